"""The main window: navigation between Chat, Race, Models, Bench, Settings and Library; a status bar
with the backend and hardware, the loaded pair and live tok/s; File and Help menus; shortcuts;
settings kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, QSettings, Qt, QTimer
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QApplication, QHBoxLayout, QLabel, QListWidget, QListWidgetItem, QMainWindow, QMessageBox, QStackedWidget,
    QVBoxLayout, QWidget,
)

from engine.llamacpp import ggml_devices
from engine.models import catalog, hardware, store

from . import appearance, help_menu, theme
from .downloads.job import DownloadStatus
from .first_window import first_geometry
from .chat_model import load_chat_model
from .history import History, HistoryError
from .history.settings import chat_settings
from .session import Session
from .views.chat import ChatView
from .widgets.controls.elided_label import ElidedLabel
from .widgets.controls.load_bar import LoadBar
from .widgets.controls.page_scroll import PageScroll
from .widgets.controls.live_label import pin_size
from .widgets.panels.welcome_banner import WelcomeBanner

PAGES = ["Chat", "Race", "Models", "Bench", "Settings", "Library"]
NAV_WIDTH = 100
MIN_WIDTH, MIN_HEIGHT = 800, 560
SPEED_REFRESH_MS = 250
BUSY_MARK = "\u25cf"  # ● (in DejaVu Sans and the other default fonts; ⏳ rendered as a missing-glyph box)


def is_dark(app: QApplication) -> bool:
    """Drawn dark now (the Settings override, else the system): see app/appearance.py."""
    return appearance.is_dark(app)


class MainWindow(QMainWindow):
    def __init__(self, *, history: History | None = None, settings: QSettings | None = None, autoload: bool = True):
        super().__init__()
        from engine import paths

        self.setWindowTitle("Tandem — local speculative decoding")
        self.settings = settings or QSettings("Tandem", "Tandem")
        self.history = history or History(paths.history_db())
        self.session = Session(self)
        self._fallback_note = ""  # why autoload did not load the reopened chat's own model
        self.catalog = catalog.load()
        self.hw = ggml_devices.probe()
        # A GPU this build leaves idle (a CPU-only llama.cpp on a GPU machine): asked once, and
        # only when llama.cpp registered no GPU, since it runs nvidia-smi.
        self._unused_gpu = None if self.hw.gpus else hardware.unused_gpu(self.hw, offload=False)
        self._build()
        self._restore()
        self.session.pairChanged.connect(self._pair_changed)
        self.chat.model_bar.draftChanged.connect(self._show_pair)
        self.session.loadProgress.connect(self._load_progress)
        self.session.loadFailed.connect(self.show_error)
        self.session.busyChanged.connect(self._busy_changed)
        self.session.liveSpeed.connect(self._live_speed)
        self._update_welcome()
        if self.history.notice:  # a damaged history was moved aside: say where, in the window
            self.history_notice.setText(f"⚠ {self.history.notice}")
            self.history_notice.show()
        app = QApplication.instance()
        if app is not None:
            app.styleHints().colorSchemeChanged.connect(self._scheme_changed)  # follow the system live
        if autoload:
            QTimer.singleShot(0, self.autoload)
        from .widgets.panels.rpc_dialog import install_rpc_ui  # [rpc] status-bar RPC button + "Reload locally"

        install_rpc_ui(self)

    # -- layout --------------------------------------------------------------------------
    def _build(self) -> None:
        """Banners above, the page list and the pages, the status bar; shortcuts and menus."""
        central = QWidget()
        outer = QVBoxLayout(central)
        outer.setContentsMargins(0, 0, 0, 0)
        self._build_banners(outer)
        body = QHBoxLayout()
        outer.addLayout(body, 1)
        self.nav = QListWidget()
        self.nav.setObjectName("nav")
        self.nav.setFixedWidth(NAV_WIDTH)
        for name in PAGES:
            QListWidgetItem(name, self.nav)
        self.stack = QStackedWidget()
        body.addWidget(self.nav)
        body.addWidget(self.stack, 1)
        self.setCentralWidget(central)
        self.setMinimumSize(MIN_WIDTH, MIN_HEIGHT)  # half of a 1920-px screen, with room to spare
        self._build_pages()
        self._build_status_bar()
        QShortcut(QKeySequence("Ctrl+N"), self, activated=self._new_chat).setWhatsThis("New chat")
        QShortcut(QKeySequence("Ctrl+L"), self, activated=self._focus_prompt).setWhatsThis("Go to the chat's prompt box")
        for i, name in enumerate(PAGES):
            QShortcut(QKeySequence(f"Ctrl+{i + 1}"), self,
                      activated=lambda i=i: self.nav.setCurrentRow(i)).setWhatsThis(f"Show {name}")
        self._build_menus()
        from .views.settings_view import theme_choice

        app = QApplication.instance()
        if app is not None and theme_choice(self.settings) != "system":
            appearance.apply(app, theme_choice(self.settings))  # type: ignore[arg-type]
        self.apply_theme()

    def _build_banners(self, outer: QVBoxLayout) -> None:
        """The first-run download banner and the damaged-history notice."""
        self.welcome = WelcomeBanner()
        self.welcome.button.clicked.connect(self.download_recommended)
        self.welcome.cancel.clicked.connect(lambda: self.session.downloads.cancel())
        self.session.downloads.changed.connect(self._download_changed)
        outer.addWidget(self.welcome)
        self.history_notice = QLabel()
        self.history_notice.setObjectName("historyNotice")
        self.history_notice.setWordWrap(True)
        self.history_notice.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.history_notice.setStyleSheet("padding: 6px; background: rgba(230,81,0,0.15);")
        self.history_notice.hide()
        outer.addWidget(self.history_notice)

    def _build_pages(self) -> None:
        """Chat, Race, Models, Bench, Settings and Library in the stack, their notices to the status bar."""
        from .library_shelf import LibraryShelf
        from .tool_servers import ToolServers
        from .views.library import LibraryView

        self.shelf = LibraryShelf(self.settings, self)  # the Library's folders, watched while the app runs
        self.tool_servers = ToolServers(self.settings)  # the mcp.json Settings shows and the chat starts servers from
        self.chat = ChatView(self.session, self.history, shelf=self.shelf, tool_servers=self.tool_servers)
        self.chat.message.connect(self.notify)
        self.chat.error.connect(self.show_error)
        self.views: dict[str, QWidget] = {"Chat": self.chat}
        from .views.race import RaceView
        from .views.models import ModelsView
        from .views.bench_view import BenchView

        self.views["Race"] = RaceView(self.session, gpu=bool(self.hw.gpus))  # the first race suits the machine
        self.views["Models"] = models = ModelsView(self.session, self.catalog, self.hw)
        self.views["Bench"] = BenchView(self.session)
        self.views["Bench"].useSetting.connect(self.use_chat_setting)
        from .views.settings_view import SettingsView, history_draft, performance

        self.settings_view = SettingsView(self.settings, cores=self.hw.cores_physical, gpu=bool(self.hw.gpus),
                                          tool_servers=self.tool_servers)
        self.settings_view.mcpChanged.connect(self.chat.tools.refresh)
        self.settings_view.themeChanged.connect(self.set_theme)
        self.settings_view.performanceChanged.connect(self._apply_performance)
        self.settings_view.historyDraftChanged.connect(self._apply_history_draft)
        self.settings_view.historyCleared.connect(self._history_cleared)
        self.views["Settings"] = self.settings_view
        self.views["Library"] = library = LibraryView(self.shelf, catalog=self.catalog)  # last: Ctrl+5 stays Settings
        library.showModels.connect(lambda: self.nav.setCurrentRow(PAGES.index("Models")))
        models.embedding.statesChanged.connect(library.models_changed)  # the Library takes up a model downloaded
        self._apply_performance(performance(self.settings))
        self.session.history_draft = history_draft(self.settings)
        for name in PAGES:
            v = self.views[name]
            if hasattr(v, "message"):
                v.message.connect(self.notify)  # type: ignore[attr-defined]
            if hasattr(v, "error") and v is not self.chat:
                v.error.connect(self.show_error)  # type: ignore[attr-defined]
            self.stack.addWidget(PageScroll(v))
        self.nav.currentRowChanged.connect(self.stack.setCurrentIndex)
        self.nav.setCurrentRow(0)

    def _build_status_bar(self) -> None:
        """The pair, load progress, busy job, live speed, hardware and the server switch."""
        sb = self.statusBar()
        # Elided, with the whole text as tooltip: a long pair title or GPU name never widens the window.
        self.hw_label = ElidedLabel(self._hw_text(), min_chars=10)
        if self._unused_gpu:  # the whole warning and the command that fixes it, on hover
            self.hw_label.setToolTip(f"{self._hw_text()}\n{self._unused_gpu}: rebuild it with\n{hardware.gpu_rebuild_command()}")
        self.pair_label = ElidedLabel("no pair loaded", min_chars=14)
        self.busy_label = QLabel("")
        self.speed_label = QLabel("")
        self.speed_label.setObjectName("liveSpeed")
        self.speed_label.setToolTip("Decode speed of the running generation, over its last 16 steps")
        # Wide enough for any figure, and pinned: a new value repaints the label alone instead of
        # re-laying out the status bar and the window (app/widgets/controls/live_label.py).
        pin_size(self.speed_label, self.speed_label.fontMetrics().horizontalAdvance("0000.0 tok/s") + 6)
        self.speed_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self._speed_value = 0.0
        self._speed_timer = QTimer(self)  # shows the latest figure 4 times a second, not per step
        self._speed_timer.setInterval(SPEED_REFRESH_MS)
        self._speed_timer.setSingleShot(True)
        self._speed_timer.timeout.connect(self._show_speed)
        self.load_bar = LoadBar()
        sb.addPermanentWidget(self.pair_label, 1)
        sb.addPermanentWidget(self.load_bar)
        sb.addPermanentWidget(self.busy_label)
        sb.addPermanentWidget(self.speed_label)
        sb.addPermanentWidget(self.hw_label)
        from .widgets.panels.server_switch import ServerSwitch

        self.server_switch = ServerSwitch(self.session, charts=self.chat.charts)  # the local OpenAI-compatible server
        self.server_switch.message.connect(self.notify)
        self.server_switch.error.connect(self.show_error)
        sb.addPermanentWidget(self.server_switch)

    def _build_menus(self) -> None:
        """File (export and import chats, Quit) and Help (every shortcut, collected from the window; About)."""
        file_menu = self.menuBar().addMenu("&File")
        for label, act in (("Export this chat…", lambda: self.chat.export_conversation()),
                           ("Export all chats…", lambda: self.chat.export_all()),
                           ("Import chats…", lambda: self.chat.import_chats())):
            file_menu.addAction(label, act)
        file_menu.addSeparator()
        quit_action = QAction("Quit", self)
        # The platform's Quit keys; Ctrl+Q where the platform theme names none (a bare X server).
        typed = [k for k in QKeySequence.keyBindings(QKeySequence.StandardKey.Quit) if k[0].keyboardModifiers()]
        quit_action.setShortcuts(typed or [QKeySequence("Ctrl+Q")])  # not the "Exit" key a bare X server lists
        quit_action.triggered.connect(self.close)
        file_menu.addAction(quit_action)
        help_menu = self.menuBar().addMenu("&Help")
        self.shortcuts_action = QAction("Keyboard shortcuts", self)
        self.shortcuts_action.setShortcut(QKeySequence("F1"))
        self.shortcuts_action.triggered.connect(self.show_shortcuts)
        self.about_action = QAction("About Tandem", self)
        self.about_action.triggered.connect(self.show_about)
        help_menu.addAction(self.shortcuts_action)
        help_menu.addAction(self.about_action)

    def shortcuts(self) -> list[help_menu.ShortcutInfo]:
        """Every shortcut the window has now, with the page it works on."""
        return help_menu.collect_shortcuts(self, {v: name for name, v in self.views.items()})

    def show_shortcuts(self) -> None:
        self.shortcuts_dialog = help_menu.ShortcutsDialog(self.shortcuts(), self)
        self.shortcuts_dialog.show()

    def show_about(self) -> None:
        QMessageBox.about(self, "About Tandem", help_menu.about_html(self._hw_text()))

    def set_theme(self, scheme: str) -> None:
        """Settings → Appearance: follow the system or force light/dark, at once."""
        app = QApplication.instance()
        if app is not None:
            appearance.apply(app, scheme)  # type: ignore[arg-type]
        self.apply_theme()

    def use_chat_setting(self, setting: dict) -> None:
        """Bench's "Use this setting in Chat": the row's drafter and lookahead, the rest kept."""
        self.chat.apply_settings({**self.chat.settings(), **setting})

    def _apply_performance(self, p: Any) -> None:
        """Settings → Performance: how the next pair loads (the context length is read from
        QSettings at each load: Session.default_n_ctx)."""
        self.session.n_threads = p.threads
        self.session.n_gpu_layers = p.gpu_layers

    def _apply_history_draft(self, on: bool) -> None:
        """Settings → Suffix draft memory: the next load and the loaded engine, from now."""
        self.session.history_draft = on
        if hasattr(self.session.engine, "set_history_draft"):
            self.session.engine.set_history_draft(on)

    def _history_cleared(self) -> None:
        """The files went (Settings); the loaded engine forgets its answers too."""
        if hasattr(self.session.engine, "clear_draft_history"):
            self.session.engine.clear_draft_history()

    def apply_theme(self) -> None:
        app = QApplication.instance()
        dark = bool(app) and is_dark(app)  # type: ignore[arg-type]
        self.chat.charts.set_dark(dark)
        for v in self.views.values():
            if hasattr(v, "set_dark"):
                v.set_dark(dark)  # type: ignore[attr-defined]
        accent = theme.palette(dark).accent
        self.setStyleSheet(
            f"#nav {{ font-size: 14px; border: none; }} #nav::item {{ padding: 10px 8px; }}"
            f"#nav::item:selected {{ border-left: 3px solid {accent}; font-weight: bold; color: palette(text);"
            f" background: {theme.ACCENT_TINT}; }}"
            f"#welcome {{ background: {theme.BANNER_TINT}; border-bottom: 1px solid {theme.BANNER_BORDER}; }}"
            f"#answerStats {{ color: palette(mid); }}"
        )

    def _scheme_changed(self, *_: object) -> None:
        self.apply_theme()

    def _hw_text(self) -> str:
        hw = self.hw
        gpus = ", ".join(f"{d.description or d.name} {d.total / 1e9:.0f} GB" for d in hw.gpus)
        text = f"{hw.backend} · {hw.cores_physical} cores · {hw.ram_total / 1e9:.0f} GB RAM" + (f" · {gpus}" if gpus else "")
        load = ggml_devices.backends()  # a portable build names the CPU variant it chose
        text += f" · {load.status_text()}" if load and load.status_text() else ""
        return text + (" · ⚠ GPU unused: CPU-only llama.cpp build" if self._unused_gpu else "")

    # -- state ---------------------------------------------------------------------------
    def _restore(self) -> None:
        geo = self.settings.value("window/geometry")
        if isinstance(geo, QByteArray):
            self.restoreGeometry(geo)
        else:  # a fresh profile: a size that fits the screen it opens on, centred there
            self.setGeometry(first_geometry(self.screen().availableGeometry(), self.minimumSize()))
        state = self.settings.value("window/state")
        if isinstance(state, QByteArray):
            self.restoreState(state)
        self.chat.transcript.set_code_wrap(str(self.settings.value("view/wrap_code", "true")).lower() != "false")
        self.chat.transcript.codeWrapChanged.connect(lambda on: self.settings.setValue("view/wrap_code", on))
        raw = self.settings.value("chat/settings")
        if raw:
            try:
                self.chat.apply_settings(json.loads(str(raw)))
            except (ValueError, TypeError):
                pass
        self._reopen_last_conversation()
        page = self.settings.value("window/page")
        if page is not None:
            try:
                self.nav.setCurrentRow(int(page))
            except (TypeError, ValueError):
                pass

    def _confirm_close(self) -> bool:
        """Closing mid-answer stops it: ask first (the partial answer is kept either way)."""
        answer = QMessageBox.question(
            self, "Tandem", "An answer is still being written. Stop it and quit?\n\n"
            "What it has written so far is kept in the conversation.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, QMessageBox.StandardButton.No)
        return answer == QMessageBox.StandardButton.Yes

    def _reopen_last_conversation(self) -> None:
        """The chat open when the app was closed, open again (if it still exists)."""
        try:
            cid = int(self.settings.value("chat/last_conversation", 0) or 0)
        except (TypeError, ValueError):
            cid = 0
        try:
            if cid and self.history.get(cid) is not None:
                self.chat.open_conversation(cid)
                self.chat.refresh_conversations()
        except HistoryError:  # a damaged history: the notice above the pages says so already
            pass

    def save_settings(self) -> None:
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState())
        self.settings.setValue("window/page", self.nav.currentRow())
        self.settings.setValue("chat/settings", json.dumps(self.chat.settings()))
        self.settings.setValue("chat/last_conversation", self.chat.conversation_id or 0)
        if self.session.pair is not None and self.session.pair.pair_id:
            self.settings.setValue("pair/last", self.session.pair.pair_id)
        self.settings.sync()

    def autoload(self) -> None:
        """Load the reopened chat's own model; else (none recorded, or gone: said in one line)
        the last used pair or the default, if it is already downloaded."""
        if self.session.engine is not None or self.session.busy:
            return
        cid = self.chat.conversation_id
        own = (chat_settings(self.history, cid) or {}).get("model") if cid is not None else None
        why = load_chat_model(self.session, self.catalog, own) if own is not None else ""
        if own is not None and not why:
            return
        pid = str(self.settings.value("pair/last") or self.catalog.default_pair)
        if pid not in self.catalog.pairs:
            pid = self.catalog.default_pair
        loading = self.load_pair(pid, quiet=True)
        if why:  # said now, and again with "Loaded …" (which would replace it in the status bar)
            self._fallback_note = why[:1].lower() + why[1:] if loading else ""
            self.notify(f"{why}: {'loading ' + self.catalog.pair(pid).title + ' instead' if loading else 'no model loaded'}")

    def load_pair(self, pair_id: str, quiet: bool = False) -> bool:
        pair = self.catalog.pair(pair_id)
        if any(store.find_model(m.id, self.catalog) is None for m in (pair.target, pair.draft)):
            if not quiet:
                self.show_error(f"{pair.title} is not downloaded yet (Models → Download)")
            return False
        return self.session.load_pair(pair)

    def _update_welcome(self) -> None:
        have_any = any(store.find_model(p.target.id, self.catalog) and store.find_model(p.draft.id, self.catalog)
                       for p in self.catalog.pairs.values())
        if have_any or self.session.engine is not None:
            self.welcome.hide()
            return
        rec = hardware.recommend(list(self.catalog.pairs.values()), self.hw, default=self.catalog.default_pair)
        if rec is None:
            self.welcome.text.setText("<b>Welcome to Tandem.</b> No pair in the catalog fits this machine's memory; "
                                      "import a small GGUF in Models.")
            self.welcome.button.hide()
        else:
            fit = hardware.pair_fit(rec, self.hw)
            gpu = (f" Predicted speed-up on a GPU: {rec.gpu_speedup}: a prediction from others' runs, "
                   "not measured on this machine." if self.hw.gpus and rec.gpu_speedup else "")
            self.welcome.offer(rec, fit.verdict, f"{rec.note}{gpu}")
        self.welcome.show()

    def _download_changed(self, st: DownloadStatus) -> None:
        """The banner shows any download; after a cancel or a failure it offers what is on disk now."""
        self.welcome.show_download(st)
        if st.ended and not st.ok and not self.welcome.isHidden():
            self._update_welcome()

    def download_recommended(self) -> None:
        pair = self.catalog.pair(str(self.welcome.button.property("pair")))
        if not self.session.downloads.download(pair, then_load=True):
            self.notify("A download is already running (see Models)")

    def _show_pair(self, *_: Any) -> None:
        """What answers really run on: the loaded target and the drafter the Draft box chose."""
        pair = self.session.pair
        spec = self.chat.draft_spec() if pair is not None else None  # what the next answer drafts with
        if pair is None:
            text = "no pair loaded"
        elif spec == "lookup":
            text = f"loaded: {Path(pair.target).name} · drafting by prompt lookup"
        elif spec == "mtp":
            text = f"loaded: {Path(pair.target).name} · drafting with its own MTP head"
        elif spec is None:
            text = f"loaded: {Path(pair.target).name} · target alone"
        elif spec == pair.draft:
            text = f"loaded: {pair.label}"
        else:
            text = f"loaded: {Path(pair.target).name} + {Path(str(spec)).name}"
        cluster = getattr(self.session.engine, "rpc", None) if pair else None  # [rpc] hosts holding the target
        if cluster is not None:
            text += f" · target on this machine + {', '.join(cluster.endpoints)}"
        self.pair_label.setText(text)

    def _pair_changed(self, pair: Any) -> None:
        self.load_bar.hide()
        self._show_pair()
        if pair is not None:
            self.welcome.hide()
            note, self._fallback_note = self._fallback_note, ""
            self.notify(f"Loaded {pair.label}" + (f" ({note})" if note else ""))

    def _load_progress(self, label: str, x: float) -> None:
        self.load_bar.show_progress(label, x)

    def _busy_changed(self, job: str) -> None:
        self.busy_label.setText(f"{BUSY_MARK} {job}" if job else "")
        if not job:
            self.load_bar.hide()

    def _live_speed(self, v: float) -> None:
        """The running generation's tok/s (any view): shown within SPEED_REFRESH_MS; 0 clears."""
        self._speed_value = v
        if v <= 0:
            self._speed_timer.stop()
            self.speed_label.setText("")
        elif not self._speed_timer.isActive():
            self._speed_timer.start()

    def _show_speed(self) -> None:
        v = self._speed_value
        self.speed_label.setText(f"{v:.1f} tok/s" if v > 0 else "")

    def notify(self, text: str) -> None:
        self.statusBar().showMessage(text, 6000)

    def show_error(self, text: str) -> None:
        self.load_bar.hide()
        QMessageBox.warning(self, "Tandem", text)

    def _new_chat(self) -> None:
        self.nav.setCurrentRow(0)
        self.chat.new_conversation()

    def _focus_prompt(self) -> None:
        self.nav.setCurrentRow(0)
        self.chat.prompt.setFocus()

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.isVisible() and self.chat.answering and not self._confirm_close():
            event.ignore()
            return
        self.save_settings()
        self.server_switch.shutdown()
        self.chat.shutdown()
        for v in self.views.values():
            if hasattr(v, "shutdown") and v is not self.chat:
                v.shutdown()  # type: ignore[attr-defined]
        self.session.shutdown()
        event.accept()
