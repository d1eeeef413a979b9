"""Settings: the theme (applied at once), how models load (threads, GPU layers, context
length; used from the next load), the MCP servers the chat may use (mcp_settings.py) and
where Tandem keeps its files, each with "Open folder".

Values live in QSettings under fixed keys, so other parts of the app read the same ones
(the chat's model bar reads "performance/n_ctx").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QSettings, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QCheckBox, QComboBox, QFormLayout, QGridLayout, QGroupBox, QHBoxLayout, QLabel, QPushButton, QSpinBox,
    QVBoxLayout, QWidget,
)

from engine.models.context_window import DEFAULT_N_CTX

from ..tool_servers import ToolServers
from ..widgets.controls.elided_label import ElidedLabel
from .mcp_settings import McpServersBox

THEME_KEY = "appearance/theme"
THREADS_KEY = "performance/threads"  # 0: llama.cpp's choice (the physical cores)
GPU_LAYERS_KEY = "performance/gpu_layers"  # -1: every layer that fits
N_CTX_KEY = "performance/n_ctx"
DRAFT_HISTORY_KEY = "drafting/history"  # the suffix draft keeps past answers in a file per model
THEMES = [("System", "system"), ("Light", "light"), ("Dark", "dark")]
CONTEXT_LENGTHS = [2048, 4096, 8192, 16384, 32768, 65536, 131072]


@dataclass(frozen=True)
class Performance:
    """How the next pair loads: None means the engine's own default."""

    threads: int | None
    gpu_layers: int | None
    n_ctx: int


def _int(settings: QSettings, key: str, default: int) -> int:
    try:
        return int(settings.value(key, default))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return default


def performance(settings: QSettings) -> Performance:
    """The stored performance settings (defaults where unset or unreadable)."""
    threads = _int(settings, THREADS_KEY, 0)
    layers = _int(settings, GPU_LAYERS_KEY, -1)
    n_ctx = _int(settings, N_CTX_KEY, DEFAULT_N_CTX)
    return Performance(threads if threads > 0 else None, layers if layers >= 0 else None,
                       n_ctx if n_ctx >= 256 else DEFAULT_N_CTX)


def history_draft(settings: QSettings) -> bool:
    """Whether the suffix draft keeps past answers on disk (default: yes)."""
    return str(settings.value(DRAFT_HISTORY_KEY, "true")).lower() not in ("false", "0", "no")


def theme_choice(settings: QSettings) -> str:
    value = str(settings.value(THEME_KEY, "system"))
    return value if value in dict((k, k) for _, k in THEMES) else "system"


def storage_places() -> list[tuple[str, Path, str]]:
    """(what, path, why) for each place Tandem reads or writes (engine/paths.py, the HF cache)."""
    from engine.models import calibration, store
    from engine import paths

    return [
        ("Models", store.hub_cache(), "Downloaded GGUF files (the Hugging Face cache; HF_HOME moves it)"),
        ("Chat history", paths.history_db(), "Every conversation (SQLite)"),
        ("Metrics log", paths.metrics_log(), "One line per generation (JSON lines; TANDEM_METRICS_LOG moves it)"),
        ("Calibration", calibration.store_path(), "Measured draft and target costs that Auto uses"),
        ("Draft memory", paths.draft_history_dir(), "Past answers the Suffix draft drafts from (token ids, one file per model)"),
        ("App data", paths.data_dir(), "Imported models list and the rest (TANDEM_HOME moves it)"),
    ]


def folder_of(path: Path) -> Path:
    """The folder to open for a place: itself if it is a folder, else the folder holding it."""
    return path if path.is_dir() or not path.suffix else path.parent


class SettingsView(QWidget):
    themeChanged = Signal(str)  # "system" | "light" | "dark"
    performanceChanged = Signal(object)  # Performance
    historyDraftChanged = Signal(bool)  # the suffix draft's memory on disk: on or off
    historyCleared = Signal()  # every saved draft memory was deleted
    mcpChanged = Signal()  # another mcp.json was chosen: the chat lists its servers
    message = Signal(str)
    error = Signal(str)

    def __init__(self, settings: QSettings, *, cores: int, gpu: bool, parent: QWidget | None = None,
                 open_url: Callable[[QUrl], bool] | None = None, tool_servers: ToolServers | None = None):
        super().__init__(parent)
        self.settings = settings
        self._open_url = open_url or QDesktopServices.openUrl
        root = QVBoxLayout(self)
        root.addWidget(QLabel("<b>Settings</b>"))

        look = QGroupBox("Appearance")
        lf = QFormLayout(look)
        lf.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.FieldsStayAtSizeHint)
        self.theme = QComboBox()
        for label, key in THEMES:
            self.theme.addItem(label, key)
        self.theme.setCurrentIndex(self.theme.findData(theme_choice(settings)))
        self.theme.setToolTip("System follows the desktop's light or dark setting; Light and Dark override it")
        self.theme.currentIndexChanged.connect(self._theme_changed)
        lf.addRow("Theme", self.theme)
        root.addWidget(look)

        perf = QGroupBox("Performance (used when a pair is next loaded)")
        pf = QFormLayout(perf)
        pf.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.FieldsStayAtSizeHint)
        p = performance(settings)
        self.threads = QSpinBox()
        self.threads.setRange(0, max(cores * 2, 64))
        self.threads.setSpecialValueText(f"automatic ({cores} physical cores)")
        self.threads.setValue(p.threads or 0)
        self.threads.setToolTip("CPU threads for decoding; more than the physical cores rarely helps")
        self.gpu_layers = QSpinBox()
        self.gpu_layers.setRange(-1, 999)
        self.gpu_layers.setSpecialValueText("all that fit")
        self.gpu_layers.setValue(-1 if p.gpu_layers is None else p.gpu_layers)
        self.gpu_layers.setToolTip("Target layers offloaded to the GPU; 0 keeps the model on the CPU")
        if not gpu:
            self.gpu_layers.setEnabled(False)
            self.gpu_layers.setToolTip("This build of llama.cpp has no GPU on this machine: every layer runs on the CPU")
        self.n_ctx = QComboBox()
        for n in CONTEXT_LENGTHS:
            self.n_ctx.addItem(f"{n:,} tokens", n)
        i = self.n_ctx.findData(p.n_ctx)
        if i < 0:
            self.n_ctx.addItem(f"{p.n_ctx:,} tokens", p.n_ctx)
            i = self.n_ctx.count() - 1
        self.n_ctx.setCurrentIndex(i)
        self.n_ctx.setToolTip("Default context length of a new load; longer needs more memory (the KV cache)")
        pf.addRow("Threads", self.threads)
        pf.addRow("GPU layers", self.gpu_layers)
        pf.addRow("Context length", self.n_ctx)
        for w in (self.threads, self.gpu_layers):
            w.valueChanged.connect(self._performance_changed)
        self.n_ctx.currentIndexChanged.connect(self._performance_changed)
        root.addWidget(perf)
        root.addWidget(self._draft_memory(settings))
        self.mcp = McpServersBox(tool_servers or ToolServers(settings), open_url=self._open_url)
        self.mcp.changed.connect(self.mcpChanged)
        root.addWidget(self.mcp)

        store = QGroupBox("Storage")
        grid = QGridLayout(store)
        grid.setColumnStretch(1, 1)
        self.places: dict[str, tuple[Path, QPushButton]] = {}
        for r, (what, path, why) in enumerate(storage_places()):
            name = QLabel(what)
            name.setToolTip(why)
            where = ElidedLabel(str(path), mode=Qt.TextElideMode.ElideMiddle)
            where.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            button = QPushButton("Open folder")
            button.setToolTip(f"Show {folder_of(path)} in the file manager")
            button.clicked.connect(lambda _=False, p=path: self.open_folder(p))
            grid.addWidget(name, r, 0)
            grid.addWidget(where, r, 1)
            grid.addWidget(button, r, 2)
            self.places[what] = (path, button)
        root.addWidget(store)
        root.addStretch(1)

    def _draft_memory(self, settings: QSettings) -> QGroupBox:
        box = QGroupBox("Suffix draft memory")
        row = QHBoxLayout(box)
        self.history = QCheckBox("Remember past answers on this computer to draft from")
        self.history.setChecked(history_draft(settings))
        self.history.setToolTip("The Suffix draft proposes text that earlier answers of the same model wrote. "
                                "On: they are kept in a file per model in Tandem's data folder (never sent "
                                "anywhere); off: only until the model is unloaded.")
        self.history.toggled.connect(self._history_toggled)
        self.clear_history = QPushButton("Clear")
        self.clear_history.setToolTip("Delete the remembered answers of every model, on disk and in memory")
        self.clear_history.clicked.connect(self._clear_history)
        row.addWidget(self.history, 1)
        row.addWidget(self.clear_history)
        return box

    def _history_toggled(self, on: bool) -> None:
        self.settings.setValue(DRAFT_HISTORY_KEY, "true" if on else "false")
        self.historyDraftChanged.emit(on)

    def _clear_history(self) -> None:
        from engine import paths
        from engine.decoding.drafting.suffix_stores import clear_history_files

        try:
            n = clear_history_files(paths.draft_history_dir())
        except OSError as e:
            self.error.emit(f"The draft memory was not cleared: {e}")
            return
        self.historyCleared.emit()
        self.message.emit(f"Draft memory cleared ({n} file{'s' if n != 1 else ''})")

    def _theme_changed(self, _i: int) -> None:
        key = str(self.theme.currentData())
        self.settings.setValue(THEME_KEY, key)
        self.themeChanged.emit(key)

    def _performance_changed(self, *_: object) -> None:
        self.settings.setValue(THREADS_KEY, self.threads.value())
        self.settings.setValue(GPU_LAYERS_KEY, self.gpu_layers.value())
        self.settings.setValue(N_CTX_KEY, int(self.n_ctx.currentData()))
        self.performanceChanged.emit(performance(self.settings))

    def open_folder(self, path: Path) -> None:
        folder = folder_of(path)
        try:
            folder.mkdir(parents=True, exist_ok=True)  # a fresh install has not written it yet
        except OSError as e:
            self.error.emit(f"{path}: cannot create the folder ({e.strerror})")
            return
        if not self._open_url(QUrl.fromLocalFile(str(folder))):
            self.error.emit(f"No file manager opened {folder}")

