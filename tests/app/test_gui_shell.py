"""The window around the views (issue 15, items 7, 9, 10 and the chat list): it fits in
~800 px, the Settings page and Help menu work, the first-run download banner tells the
truth, the chat list has dates and a menu. Real widgets, driven as a user would."""

from __future__ import annotations

from datetime import datetime

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QSettings, Qt, QUrl  # noqa: E402
from PySide6.QtGui import QDesktopServices, QFontMetrics  # noqa: E402
from PySide6.QtWidgets import QApplication, QMessageBox, QPushButton  # noqa: E402

from app.history import History  # noqa: E402
from app.relative_time import relative_date  # noqa: E402
from fakehub import fakehub  # noqa: E402,F401  (fixture)


@pytest.fixture
def make_window(qtbot, tmp_path, monkeypatch):
    """A main window with its own history and settings; errors collected, not shown."""
    from app.main_window import MainWindow

    errors: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning", lambda *a, **k: errors.append(a[2]) or QMessageBox.StandardButton.Ok)
    made = []

    def make(size: tuple[int, int] | None = None, settings: QSettings | None = None):
        w = MainWindow(history=History(tmp_path / "h.db"),
                       settings=settings or QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat), autoload=False)
        w.errors = errors  # type: ignore[attr-defined]
        qtbot.addWidget(w)
        if size:
            w.resize(*size)
        w.show()
        qtbot.waitExposed(w)
        made.append(w)
        return w

    yield make
    for w in made:
        w.close()
    from app import appearance

    app = QApplication.instance()
    if app is not None:
        appearance.apply(app, "system")  # a test that forced a theme must not leak it


def _settle(qtbot, w) -> None:
    for _ in range(5):
        QApplication.processEvents()
    qtbot.wait(30)


def visible_buttons(w):
    return [b for b in w.findChildren(QPushButton) if b.isVisibleTo(w) and b.window() is w]


# -- item 7: the window fits ----------------------------------------------------------------------
def test_minimum_width_is_about_800_and_opening_a_chat_does_not_grow_it(qtbot, make_window, tiny_target):
    w = make_window((820, 600))
    assert w.minimumSizeHint().width() <= 820
    assert w.minimumWidth() <= 820
    w.session.load(tiny_target, "lookup", label="tiny + lookup")
    qtbot.waitUntil(lambda: w.session.engine is not None, timeout=20000)
    chat = w.chat
    chat.apply_settings({"drafter": "lookup", "max_tokens": 40, "temperature": 0.0})
    chat.prompt.setPlainText("a rather long first message " * 8)
    chat.send()
    qtbot.waitUntil(lambda: chat.worker is None, timeout=30000)
    w.resize(800, 600)
    _settle(qtbot, w)
    assert w.width() <= 820, "sending a message widened the window"
    assert w.minimumSizeHint().width() <= 820
    assert not chat.drawer_open, "the settings drawer starts closed in a narrow window"


@pytest.mark.parametrize("size, drawer", [((1024, 700), False), ((1440, 900), True)])
def test_nothing_is_clipped_at_two_sizes(qtbot, make_window, size, drawer):
    w = make_window(size)
    _settle(qtbot, w)
    assert (w.width(), w.height()) == size
    assert w.chat.drawer_open is drawer
    for page in range(len(w.views)):
        w.nav.setCurrentRow(page)
        _settle(qtbot, w)
        for b in visible_buttons(w):
            assert b.width() >= b.sizeHint().width() - 1, f"{b.text()!r} is clipped ({b.width()} < {b.sizeHint().width()})"
        area = w.stack.currentWidget()
        inner = area.widget()
        assert inner.width() <= area.viewport().width(), f"page {page} scrolls sideways at {size}"
    for child in w.findChildren(type(w.centralWidget())):
        if child.isVisibleTo(w) and child.window() is w:
            assert child.width() <= w.width()


def test_drawer_toggle_opens_and_closes_the_settings_and_charts(qtbot, make_window):
    w = make_window((1024, 700))
    _settle(qtbot, w)
    chat = w.chat
    assert not chat.drawer_open and not chat.charts.isVisibleTo(w)
    width_closed = chat.transcript.width()
    qtbot.mouseClick(chat.drawer_btn, Qt.MouseButton.LeftButton)
    _settle(qtbot, w)
    assert chat.drawer_open and chat.charts.isVisibleTo(w) and chat.temperature.isVisibleTo(w)
    assert chat.transcript.width() < width_closed
    assert w.width() == 1024, "opening the drawer must not grow the window"
    w.resize(1440, 900)  # the user chose: a wider window no longer decides
    qtbot.mouseClick(chat.drawer_btn, Qt.MouseButton.LeftButton)
    _settle(qtbot, w)
    assert not chat.drawer_open


def test_race_pane_shows_the_widest_speed_figure_whole(qtbot, make_window):
    w = make_window((1024, 700))
    w.nav.setCurrentRow(1)
    race = w.views["Race"]
    for pane in race.panes.values():
        pane.speed.setText("✓ 12.93 s · 145.3 tok/s")
    _settle(qtbot, w)
    for pane in race.panes.values():
        need = QFontMetrics(pane.speed.font()).horizontalAdvance(pane.speed.text())
        assert pane.speed.width() >= need, f"{pane.speed.width()} < {need}: the figure is clipped"
        assert pane.subtitle.toolTip()  # the elided subtitle keeps its whole text


def test_long_status_texts_elide_instead_of_widening_the_window(qtbot, make_window):
    w = make_window((800, 600))
    w.pair_label.setText("loaded: " + "a very long pair title " * 10)
    _settle(qtbot, w)
    assert w.width() <= 820 and w.minimumSizeHint().width() <= 820
    assert w.pair_label.is_elided() and w.pair_label.toolTip().startswith("loaded: a very long")


# -- item 9: settings and help ------------------------------------------------------------------
def test_theme_override_applies_live_and_is_kept(qtbot, make_window, tmp_path):
    w = make_window()
    view = w.settings_view
    qtbot.mouseClick(w.nav.viewport(), Qt.MouseButton.LeftButton, pos=w.nav.visualItemRect(w.nav.item(4)).center())
    assert w.stack.currentWidget().widget() is view
    view.theme.setCurrentIndex(view.theme.findData("dark"))
    app = QApplication.instance()
    assert app.palette().window().color().lightness() < 128
    assert w.chat.charts.acc_plot.backgroundBrush().color().lightness() < 128  # the charts follow
    view.theme.setCurrentIndex(view.theme.findData("light"))
    assert app.palette().window().color().lightness() > 128
    assert w.settings.value("appearance/theme") == "light"
    w.settings.setValue("appearance/theme", "dark")
    w.settings.sync()
    w2 = make_window(settings=w.settings)  # the next start applies the stored choice
    assert app.palette().window().color().lightness() < 128 and w2.settings_view.theme.currentData() == "dark"


def test_performance_settings_are_stored_and_used_by_the_next_load(qtbot, make_window, tiny_target):
    w = make_window()
    view = w.settings_view
    view.threads.setValue(1)
    view.n_ctx.setCurrentIndex(view.n_ctx.findData(2048))
    assert int(w.settings.value("performance/threads")) == 1
    assert int(w.settings.value("performance/n_ctx")) == 2048
    assert (w.session.n_threads, w.session.default_n_ctx()) == (1, 2048)
    w.session.load(tiny_target, "lookup", label="tiny")
    qtbot.waitUntil(lambda: w.session.engine is not None, timeout=20000)
    assert w.session.engine.n_threads == 1
    assert w.session.engine.runtime.n_ctx == 2048


def test_suffix_draft_memory_can_be_switched_off_and_cleared(qtbot, make_window, tiny_target):
    """Settings → Suffix draft memory: off keeps past answers out of the file from now on (and
    for the next load); Clear deletes every model's file and the loaded engine's memory."""
    w = make_window()
    view = w.settings_view
    w.session.load(tiny_target, "suffix", label="tiny")
    qtbot.waitUntil(lambda: w.session.engine is not None, timeout=20000)
    eng = w.session.engine
    first = eng.generate("the value of", draft_model="suffix", lookahead=4, max_tokens=12)
    path = eng.draft_history_path()
    assert path.exists()
    view.history.setChecked(False)
    assert w.settings.value("drafting/history") == "false" and w.session.history_draft is False
    path.unlink()
    eng.generate("def count items", draft_model="suffix", max_tokens=12)
    assert not path.exists()  # off: nothing written
    qtbot.mouseClick(view.clear_history, Qt.MouseButton.LeftButton)
    again = eng.generate("the value of", draft_model="suffix", lookahead=4, max_tokens=12)
    assert again.tokens == first.tokens and again.stats.accepted == first.stats.accepted  # forgotten: as cold
    view.history.setChecked(True)
    eng.generate("the value of", draft_model="suffix", max_tokens=12)
    assert path.exists()
    qtbot.mouseClick(view.clear_history, Qt.MouseButton.LeftButton)
    assert not path.exists() and not list(path.parent.glob("*.npy"))


def test_storage_lists_each_place_and_opens_its_folder(qtbot, make_window, monkeypatch):
    from engine import paths

    opened: list[QUrl] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url) or True)
    w = make_window()
    view = w.settings_view
    places = view.places
    assert {"Models", "Chat history", "Metrics log", "Calibration"} <= set(places)
    path, button = places["Chat history"]
    assert path == paths.history_db()
    view._open_url = QDesktopServices.openUrl  # the patched one (bound when the view was built)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert opened and opened[-1].toLocalFile() == str(paths.history_db().parent)
    assert paths.history_db().parent.is_dir()


def test_help_lists_every_shortcut_collected_from_the_window(qtbot, make_window):
    from PySide6.QtGui import QKeySequence, QShortcut

    w = make_window()
    keys = {(s.keys, s.what) for s in w.shortcuts()}
    assert ("Ctrl+N", "New chat") in keys and ("F1", "Keyboard shortcuts") in keys and ("Ctrl+Q", "Quit") in keys
    assert not [s for s in w.shortcuts() if s.what == "(no description)"], "every shortcut says what it does"
    assert ("Ctrl+5", "Show Settings") in keys
    QShortcut(QKeySequence("Ctrl+Shift+K"), w.chat).setWhatsThis("a shortcut added later")
    after = {s.keys: s for s in w.shortcuts()}
    assert after["Ctrl+Shift+K"].where == "Chat", "collected, not a hand-typed list"
    w.shortcuts_action.trigger()
    table = w.shortcuts_dialog.table
    assert table.rowCount() == len(w.shortcuts())
    shown = {table.item(r, 0).text() for r in range(table.rowCount())}
    assert {"Ctrl+N", "F1", "Ctrl+Shift+K"} <= shown
    w.shortcuts_dialog.close()
    menus = [a.text().replace("&", "") for a in w.menuBar().actions()]
    assert "Help" in menus


def test_about_names_the_version_backend_and_llama_cpp(qtbot, make_window, monkeypatch):
    import engine

    seen: list[str] = []
    monkeypatch.setattr(QMessageBox, "about", lambda parent, title, text: seen.append(text))
    w = make_window()
    w.about_action.trigger()
    assert seen and engine.__version__ in seen[0] and "llama-cpp-python" in seen[0] and w.hw.backend in seen[0]


# -- item 10: the first-run download banner ---------------------------------------------------------
def _tiny_catalog(fakehub, tmp_path, monkeypatch, tiny_target, mirror: str = ""):
    import hashlib

    from fakehub import write_tiny_catalog

    fakehub.add("tiny-org/tiny-GGUF", "tiny.gguf", tiny_target)
    spec = fakehub.spec("tiny-org/tiny-GGUF", "tiny.gguf")
    assert spec.sha256 == hashlib.sha256(tiny_target.read_bytes()).hexdigest()
    monkeypatch.setenv("TANDEM_CATALOG", str(write_tiny_catalog(tmp_path, spec, mirror=mirror)))
    return spec


def test_banner_shows_percent_speed_and_cancel_and_says_what_was_kept(qtbot, make_window, fakehub, tmp_path,
                                                                      monkeypatch, tiny_target):
    _tiny_catalog(fakehub, tmp_path, monkeypatch, tiny_target)
    fakehub.delay, fakehub.chunk = 0.05, 4096  # a slow link: the bar is seen moving
    w = make_window((1024, 700))
    banner = w.welcome
    assert not banner.isHidden()
    qtbot.mouseClick(banner.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: banner.progress.value() > 0 and "/s" in banner.progress.format(), timeout=20000)
    assert banner.progress.width() >= 280
    assert banner.progress.text().endswith("/s") and "%" in banner.progress.text()
    assert banner.cancel.isVisibleTo(w) and not banner.button.isEnabled()
    assert "Downloading" in banner.status.text()
    qtbot.mouseClick(banner.cancel, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: w.session.downloads.status.ended, timeout=20000)
    assert banner.status.text() == "Download cancelled; the partial file is kept: Resume continues it."
    assert banner.cancel.isHidden() and banner.button.isEnabled()
    assert list((tmp_path / "hf").rglob("*.incomplete")), "the message says a partial is kept: it is"
    assert banner.button.text() == "Resume download", "the button the line names"
    assert "on disk from an earlier download" in banner.text.text()


def test_banner_via_the_mirror_says_so_plainly_and_that_it_restarts(qtbot, make_window, fakehub, tmp_path,
                                                                    monkeypatch, tiny_target):
    from fakehub import closed_port_url
    from test_store import MIRROR_TOML, build_wheel

    data = tiny_target.read_bytes()
    wheels = tmp_path / "wheels"
    build_wheel(wheels, 1, data[: len(data) // 2])
    build_wheel(wheels, 2, data[len(data) // 2:])
    _tiny_catalog(fakehub, tmp_path, monkeypatch, tiny_target, mirror=MIRROR_TOML)
    monkeypatch.setenv("HF_ENDPOINT", closed_port_url())
    monkeypatch.setenv("TANDEM_PIP_ARGS", f"--no-index --find-links '{wheels}'")
    w = make_window((1024, 700))
    banner = w.welcome
    lines: list[str] = []
    w.session.downloads.changed.connect(lambda st: lines.append(st.text))

    def cancel_once_assembling(st):
        if st.via_mirror and banner.cancel.isVisible():
            qtbot.mouseClick(banner.cancel, Qt.MouseButton.LeftButton)

    w.session.downloads.changed.connect(cancel_once_assembling)
    qtbot.mouseClick(banner.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: w.session.downloads.status.ended, timeout=60000)
    assert "Hugging Face is unreachable — downloading from the mirror" in lines
    assert not any("Error" in ln or "Errno" in ln for ln in lines), lines
    final = banner.status.text()
    assert "starts that file over" in final and "partial file is kept" not in final


# -- the chat list -----------------------------------------------------------------------------------
def test_relative_dates():
    now = datetime(2026, 12, 2, 15, 0)
    assert relative_date(datetime(2026, 12, 2, 14, 2).timestamp(), now) == "today 14:02"
    assert relative_date(datetime(2026, 12, 1, 9, 5).timestamp(), now) == "yesterday 09:05"
    assert relative_date(datetime(2026, 11, 30, 9, 5).timestamp(), now) == "Mon"
    assert relative_date(datetime(2026, 11, 12, 9, 5).timestamp(), now) == "12 Nov"
    assert relative_date(datetime(2025, 11, 12, 9, 5).timestamp(), now) == "12 Nov 2025"


def _click_row(qtbot, lst, row: int) -> None:
    rect = lst.visualItemRect(lst.item(row))
    qtbot.mouseClick(lst.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


def test_chat_list_rows_show_dates_and_reopen_after_new(qtbot, make_window):
    w = make_window((1024, 700))
    chat = w.chat
    a = w.history.create("first chat")
    w.history.add_message(a.id, "user", "hello from the first")
    b = w.history.create("second chat")
    w.history.add_message(b.id, "user", "hello from the second")
    chat.refresh_conversations()
    texts = [chat.conv_list.item(r).text() for r in range(chat.conv_list.count())]
    assert all("\ntoday " in t for t in texts), texts
    row_a = next(r for r in range(chat.conv_list.count()) if chat.conv_list.item(r).text().startswith("first chat"))
    _click_row(qtbot, chat.conv_list, row_a)
    assert chat.conversation_id == a.id and "hello from the first" in chat.transcript.toPlainText()
    qtbot.mouseClick(chat.new_btn, Qt.MouseButton.LeftButton)
    assert chat.conversation_id is None and chat.transcript.toPlainText().strip() == ""
    _click_row(qtbot, chat.conv_list, row_a)  # the same row again: it must open
    assert chat.conversation_id == a.id and "hello from the first" in chat.transcript.toPlainText()


def test_chat_list_context_menu_renames_exports_and_deletes(qtbot, make_window, monkeypatch, tmp_path):
    from PySide6.QtWidgets import QFileDialog, QInputDialog

    w = make_window((1024, 700))
    chat = w.chat
    c = w.history.create("old title")
    w.history.add_message(c.id, "user", "question")
    chat.refresh_conversations()
    pos = chat.conv_list.visualItemRect(chat.conv_list.item(0)).center()
    chat.conversations.show_menu(pos)  # what customContextMenuRequested calls on a right-click
    menu = chat.conversations.context_menu
    assert [a.text() for a in menu.actions() if a.text()] == [
        "Rename…", "Pin to top", "Move to folder…", "Export (Markdown, Word, PDF, HTML, JSON)…", "Delete…"]
    assert chat.conversation_id == c.id, "the right-clicked chat is the one acted on"
    monkeypatch.setattr(QInputDialog, "exec", lambda d: d.setTextValue("new title") or 1)  # typed and OK
    menu.actions()[0].trigger()
    assert w.history.get(c.id).title == "new title" and chat.conv_list.item(0).text().startswith("new title\n")
    out = tmp_path / "chat.md"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(out), ""))
    next(a for a in menu.actions() if a.text().startswith("Export")).trigger()
    assert "question" in out.read_text()
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    menu.close()
    chat.conversations.show_menu(pos)
    chat.conversations.context_menu.actions()[-1].trigger()
    assert w.history.get(c.id) is None and chat.conv_list.count() == 0


def test_switching_chats_clears_the_charts_of_the_last_run(qtbot, make_window, tiny_target):
    w = make_window((1440, 900))
    w.session.load(tiny_target, tiny_target, label="tiny self-draft")
    qtbot.waitUntil(lambda: w.session.engine is not None, timeout=20000)
    chat = w.chat
    old = w.history.create("an earlier chat")
    w.history.add_message(old.id, "user", "q")
    w.history.add_message(old.id, "assistant", "a", stats={"generated_tokens": 1, "decode_tokens_per_s": 5.0,
                                                          "wall_s": 0.2, "drafted": 0, "accepted": 0})
    chat.apply_settings({"drafter": "model", "lookahead": 4, "max_tokens": 30, "temperature": 0.0})
    chat.prompt.setPlainText("the value of")
    chat.send()
    qtbot.waitUntil(lambda: chat.worker is None, timeout=30000)
    assert len(chat.charts.series) > 0
    row = next(r for r in range(chat.conv_list.count()) if chat.conv_list.item(r).text().startswith("an earlier chat"))
    _click_row(qtbot, chat.conv_list, row)
    assert chat.conversation_id == old.id
    assert len(chat.charts.series) == 0, "the charts still show the other chat's run"
    from app.views.chat import stats_text

    assert chat.stats_label.text() == stats_text(w.history.messages(old.id)[-1].stats), "its stored summary instead"


def test_busy_mark_is_a_glyph_the_status_font_has(make_window):
    from app.main_window import BUSY_MARK

    w = make_window()
    w._busy_changed("chat")
    assert w.busy_label.text().startswith(BUSY_MARK)
    assert QFontMetrics(w.busy_label.font()).inFontUcs4(ord(BUSY_MARK))



def test_bench_use_this_setting_reaches_the_chat(qtbot, make_window):
    """Bench's 'Use this setting in Chat' sets the chat's drafter and lookahead, nothing else."""
    w = make_window()
    w.chat.temperature.setValue(0.7)
    w.views["Bench"].useSetting.emit({"drafter": "lookup", "lookahead": 3})
    assert w.chat.drafter.currentData() == "lookup" and w.chat.lookahead.value() == 3
    assert w.chat.temperature.value() == pytest.approx(0.7)
    w.views["Bench"].useSetting.emit({"drafter": "none", "lookahead": "auto"})
    assert w.chat.drafter.currentData() == "none" and w.chat.lookahead.value() == "auto"


def test_status_bar_warns_when_a_gpu_is_idle_under_a_cpu_only_build(qtbot, make_window, monkeypatch, tmp_path):
    import sys

    from engine.llamacpp import ggml_devices
    from engine.models import hardware

    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    (bindir / "nvidia-smi").write_text('#!/bin/sh\necho "NVIDIA GeForce RTX 3090"\n')
    (bindir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(ggml_devices, "devices", lambda: [])  # llama.cpp registered no GPU
    hardware.host_gpu.cache_clear()
    try:
        w = make_window()
    finally:
        hardware.host_gpu.cache_clear()
    assert "GPU unused: CPU-only llama.cpp build" in w._hw_text()
    tip = w.hw_label.toolTip()
    assert "NVIDIA GeForce RTX 3090 present, but this llama.cpp build is CPU-only" in tip
    assert "TANDEM_BACKEND=cuda bash " in tip and "install_llama_cpp.sh" in tip
