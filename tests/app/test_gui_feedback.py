"""Issue 26: the app says what it is doing and what happened — the first answer's progress in
the transcript, the race verdict for an audience, dark-theme contrast, toasts. Each test
clicks as a user would."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from engine.decoding.events import PrefillEvent, TokenEvent  # noqa: E402
from fakehub import fakehub  # noqa: E402,F401  (fixture)
from test_gui_chat_input import _load, _make_window, attach  # noqa: E402

SLOW_S = 0.6  # each prompt chunk of the slowed-down engine


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch, tiny_target):
    w = _make_window(qtbot, tmp_path, monkeypatch)
    _load(qtbot, w, tiny_target, tiny_target)
    w.show()
    yield w
    w.close()


def _slow_prefill(monkeypatch, engine) -> list[str]:
    """The engine reads the prompt slowly: a pause after each prompt-progress event. Returns the
    kinds of the events it has handed on so far ("prefill", "token" or "other"), in order."""
    real = engine.stream
    handed: list[str] = []

    def stream(request, *args, **kw):
        for ev in real(request, *args, **kw):
            handed.append("prefill" if isinstance(ev, PrefillEvent) else "token" if isinstance(ev, TokenEvent)
                          else "other")
            yield ev
            if isinstance(ev, PrefillEvent):
                time.sleep(SLOW_S)

    monkeypatch.setattr(engine, "stream", stream)
    return handed


def test_first_answer_shows_prompt_progress_in_the_transcript_and_never_waits_for_measuring(qtbot, window, monkeypatch):
    """Auto's first answer with no stored costs: prompt progress while the prompt is read, before
    the first token (the engine measures this machine after it, not before: no waiting line).
    Ordered by the events, not timed: the test must pass on a busy machine."""
    chat = window.chat
    handed = _slow_prefill(monkeypatch, window.session.engine)
    chat.apply_settings({"drafter": "model", "lookahead": "auto", "temperature": 0.0, "max_tokens": 8})
    chat.prompt.setPlainText("the value of the class " * 6)
    seen: list[str] = []
    qtbot.mouseClick(chat.send_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat.transcript.progress_text().startswith("Reading the prompt"), timeout=60000)
    assert "prefill" in handed and "token" not in handed, f"the progress line came after the answer began: {handed}"
    label = chat.transcript._progress
    assert label.isVisible() and chat.transcript.viewport().rect().contains(label.geometry())

    def note() -> bool:
        text = chat.transcript.progress_text()
        if text and (not seen or seen[-1] != text):
            seen.append(text)
        return chat.worker is None

    qtbot.waitUntil(note, timeout=30000)
    assert not any(t.startswith("Measuring") for t in seen), seen
    assert chat.transcript.progress_text() == "", "the answer's text replaces the progress line"
    msgs = window.history.messages(chat.conversation_id)
    assert msgs[-1].status == "complete" and "Measuring" not in msgs[-1].content


def test_no_measuring_line_once_this_machine_is_measured(qtbot, window, monkeypatch):
    chat = window.chat
    chat.apply_settings({"drafter": "model", "lookahead": "auto", "temperature": 0.0, "max_tokens": 6})
    chat.prompt.setPlainText("the value of")
    qtbot.mouseClick(chat.send_btn, Qt.MouseButton.LeftButton)  # the first answer measures
    qtbot.waitUntil(lambda: chat.worker is None, timeout=30000)
    _slow_prefill(monkeypatch, window.session.engine)
    seen: list[str] = []
    chat.prompt.setPlainText("and the class of")
    qtbot.mouseClick(chat.send_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: seen.append(chat.transcript.progress_text()) or chat.worker is None, timeout=30000)
    assert not any(t.startswith("Measuring") for t in seen) and any(t.startswith("Reading the prompt") for t in seen)


# -- the race for an audience ---------------------------------------------------------------------
def _race(qtbot, w, *, lookahead, drafter: str = "lookup"):
    w.nav.setCurrentRow(1)
    race = w.views["Race"]
    race.drafter.setCurrentIndex(race.drafter.findData(drafter))
    race.lookahead.set_value(lookahead)
    race.max_tokens.setValue(16)
    race.prompt.setPlainText("the value of the value of the")
    qtbot.mouseClick(race.start_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: race.result is not None and race.worker is None, timeout=60000)
    race.stop_replay()
    return race


def _green_pixels(widget) -> int:
    from app import theme

    img = widget.grab().toImage()
    r0, g0, b0 = theme.RACE_SIDES["speculative"]
    return sum(1 for x in range(0, img.width(), 2) for y in range(0, img.height(), 2)
               if (c := img.pixelColor(x, y)) and abs(c.red() - r0) + abs(c.green() - g0) + abs(c.blue() - b0) < 30)


def test_a_race_that_drafted_nothing_shows_no_winner_bar(qtbot, window):
    race = _race(qtbot, window, lookahead=0)
    assert race.result["race"].about_the_same and race.speedup_label.text().startswith("About the same")
    assert race.bars.neutral and _green_pixels(race.bars) == 0, "a green bar reads as a win"
    assert race.speedup_label.styleSheet() == ""
    race.bars.set_values(target=9.6, speculative=11.5)  # the same bars for a real win do show green
    assert _green_pixels(race.bars) > 0


def test_a_near_tie_divergence_is_explained_in_plain_words_with_the_detail_on_hover(qtbot, window, monkeypatch):
    from engine.decoding.quality import Divergence
    from engine.measure import racing

    tie = Divergence(index=62, margin=0.018, within_noise=True, expected_token=5, got_token=6)
    monkeypatch.setattr(racing, "compare", lambda *a, **k: racing.Comparison(False, tie))
    race = _race(qtbot, window, lookahead=2)
    text = race.identical_label.text()
    assert "Both outputs are the target's own" in text and "At token 63" in text and "within 0.02" in text
    assert "✗" not in text and "logit" not in text, "no alarm and no jargon under 'output must be identical'"
    assert "0.018" in race.identical_label.toolTip() and "near-tie" in race.identical_label.toolTip()

    real = Divergence(index=3, margin=2.5, within_noise=False, expected_token=5, got_token=6)
    monkeypatch.setattr(racing, "compare", lambda *a, **k: racing.Comparison(False, real))
    race = _race(qtbot, window, lookahead=2)
    assert "✗ Outputs differ" in race.identical_label.text(), "a real break is said as it is"


# -- dark theme: every control visible, by contrast ratio ----------------------------------------
def _luminance(c) -> float:
    def lin(v: int) -> float:
        v = v / 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    return 0.2126 * lin(c.red()) + 0.7152 * lin(c.green()) + 0.0722 * lin(c.blue())


def contrast(a, b) -> float:
    """WCAG 2 contrast ratio of two colours (1..21)."""
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _best_contrast(widget, rect, background) -> float:
    """The strongest contrast any pixel of `rect` (widget coordinates) has against `background`."""
    img = widget.grab().toImage()
    ratio = img.devicePixelRatio()
    return max(contrast(img.pixelColor(int(x * ratio), int(y * ratio)), background)
               for x in range(max(rect.left(), 0), min(rect.right(), widget.width() - 1) + 1)
               for y in range(max(rect.top(), 0), min(rect.bottom(), widget.height() - 1) + 1))


def test_dark_theme_checkboxes_and_the_slider_handle_stand_out(qtbot, window):
    from PySide6.QtCore import QRect
    from PySide6.QtGui import QPalette
    from PySide6.QtWidgets import QApplication, QStyle, QStyleOptionButton, QStyleOptionSlider

    from app import appearance

    window.set_theme("dark")
    try:
        pal = QApplication.instance().palette()
        bg, base = pal.color(QPalette.ColorRole.Window), pal.color(QPalette.ColorRole.Base)
        window.nav.setCurrentRow(3)
        bench = window.views["Bench"]
        box = bench.mode_boxes["fixed"]
        box.click()  # unchecked, as a user leaves it
        assert not box.isChecked()
        opt = QStyleOptionButton()
        opt.initFrom(box)
        indicator = box.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, opt, box)
        assert _best_contrast(box, indicator, bg) >= 3.0, "an unchecked box must be visible (WCAG 3:1)"

        item = bench.suites.item(0)
        assert item.checkState() == Qt.CheckState.Unchecked
        row = bench.suites.visualItemRect(item)
        square = QRect(row.left(), row.top(), row.height() + 4, row.height())
        assert _best_contrast(bench.suites.viewport(), square, base) >= 3.0, "an unchecked suite must be visible"

        window.nav.setCurrentRow(0)
        chat = window.chat
        chat.sides.drawer_clicked(True)
        chat.lookahead.set_value(0)
        slider = chat.lookahead.slider
        qtbot.wait(20)
        so = QStyleOptionSlider()
        so.initFrom(slider)
        so.minimum, so.maximum = slider.minimum(), slider.maximum()
        so.sliderPosition = so.sliderValue = slider.value()
        so.orientation, so.tickPosition, so.tickInterval = slider.orientation(), slider.tickPosition(), slider.tickInterval()
        so.subControls = QStyle.SubControl.SC_SliderHandle
        handle = slider.style().subControlRect(QStyle.ComplexControl.CC_Slider, so, QStyle.SubControl.SC_SliderHandle, slider)
        assert slider.value() == 0 and _best_contrast(slider, handle, bg) >= 3.0, "the handle at 0 must be visible"
    finally:
        appearance.apply(QApplication.instance(), "system")


# -- toasts: Copy, Export, Use this setting in Chat -----------------------------------------------
def _toast(w):
    from app.widgets.controls.toast import Toast

    return w.findChild(Toast, "toast")


def _assert_toast(w, text: str) -> None:
    t = _toast(w)
    assert t is not None and t.isVisible() and text in t.text()
    from PySide6.QtCore import QPoint, QRect

    assert w.rect().contains(QRect(t.mapTo(w, QPoint(0, 0)), t.size())), "the toast shows inside the window"


def test_copy_export_and_use_in_chat_each_say_so_in_a_toast(qtbot, window, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    from test_gui_bench_models import click_row, only_suite

    chat = window.chat
    chat.apply_settings({"drafter": "model", "lookahead": 2, "max_tokens": 6})
    chat.prompt.setPlainText("the value of")
    qtbot.mouseClick(chat.send_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat.worker is None, timeout=30000)
    assert _toast(window) is None or not _toast(window).isVisible()
    qtbot.mouseClick(chat.copy_btn, Qt.MouseButton.LeftButton)
    _assert_toast(window, "Answer copied")
    qtbot.waitUntil(lambda: not _toast(window).isVisible(), timeout=60000)  # it goes by itself

    out = tmp_path / "talk.md"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(out), ""))
    chat.export_btn.menu().actions()[0].trigger()  # Export… → Whole conversation…
    assert out.exists()
    _assert_toast(window, "Exported to talk.md")

    window.nav.setCurrentRow(3)
    bench = window.views["Bench"]
    only_suite(bench, "chat")
    bench.sweep.setText("2")
    bench.mode_boxes["auto"].setChecked(False)
    bench.repeat.setValue(1)
    bench.limit.setValue(1)
    bench.max_tokens.setValue(6)
    qtbot.mouseClick(bench.start_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bench.result is not None and bench.worker is None, timeout=60000)
    click_row(qtbot, bench.table, 1)
    qtbot.mouseClick(bench.use_btn, Qt.MouseButton.LeftButton)
    _assert_toast(window, "Chat now uses")
    assert chat.settings()["lookahead"] == 2


# -- closing, reopening, drafts -------------------------------------------------------------------
def test_closing_mid_answer_asks_first_and_the_partial_says_the_app_was_closed(qtbot, window, monkeypatch):
    from PySide6.QtWidgets import QMessageBox

    from app.history import stop_reason

    chat = window.chat
    asked: list[str] = []
    reply = [QMessageBox.StandardButton.No]
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: asked.append(a[2]) or reply[0])
    chat.apply_settings({"drafter": "none", "max_tokens": 20000})
    chat.prompt.setPlainText("the value of")
    qtbot.mouseClick(chat.send_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat.stream.tokens != [], timeout=60000)
    window.close()
    assert asked and "Stop it and quit" in asked[0]
    assert window.isVisible() and chat.worker is not None, "No keeps the window and the answer going"
    cid = chat.conversation_id
    reply[0] = QMessageBox.StandardButton.Yes
    window.close()
    assert not window.isVisible()
    qtbot.waitUntil(lambda: (window.history.messages(cid)[-1].stats or {}).get("stopped_by") == "close", timeout=60000)
    answer = window.history.messages(cid)[-1]
    assert answer.status == "stopped" and answer.content
    assert stop_reason(answer) == "stopped: the app was closed"


def test_the_app_reopens_the_last_conversation(qtbot, tmp_path, monkeypatch, tiny_target):
    first = _make_window(qtbot, tmp_path, monkeypatch)
    _load(qtbot, first, tiny_target, "lookup")
    c = first.chat
    c.apply_settings({"drafter": "lookup", "max_tokens": 6})
    for text in ("first chat", "second chat"):
        c.new_conversation()
        c.prompt.setPlainText(text)
        qtbot.mouseClick(c.send_btn, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: c.worker is None, timeout=30000)
    older = first.history.conversations()[-1].id
    c.open_conversation(older)
    first.close()
    again = _make_window(qtbot, tmp_path, monkeypatch)
    assert again.chat.conversation_id == older
    assert "first chat" in again.chat.transcript.toPlainText()
    assert again.chat.conv_list.currentItem().data(Qt.ItemDataRole.UserRole) == older
    again.close()


def test_an_unsent_prompt_stays_with_its_conversation(qtbot, window):
    chat = window.chat
    a = window.history.create(title="A")
    b = window.history.create(title="B")
    window.history.add_message(a.id, "user", "hi")
    window.history.add_message(b.id, "user", "hello")
    chat.refresh_conversations()

    def click(cid: int) -> None:
        for i in range(chat.conv_list.count()):
            item = chat.conv_list.item(i)
            if item.data(Qt.ItemDataRole.UserRole) == cid:
                rect = chat.conv_list.visualItemRect(item)
                qtbot.mouseClick(chat.conv_list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
                return
        raise AssertionError(cid)

    window.resize(1360, 860)
    click(a.id)
    qtbot.keyClicks(chat.prompt, "half a thought for A")
    click(b.id)
    assert chat.prompt.toPlainText() == "", "A's draft does not follow into B"
    qtbot.keyClicks(chat.prompt, "for B")
    qtbot.mouseClick(chat.new_btn, Qt.MouseButton.LeftButton)
    assert chat.prompt.toPlainText() == ""
    click(a.id)
    assert chat.prompt.toPlainText() == "half a thought for A"
    click(b.id)
    assert chat.prompt.toPlainText() == "for B"


# -- state that says what is really active --------------------------------------------------------
def test_status_bar_names_the_drafter_in_use_and_the_meter_counts_max_tokens(qtbot, window):
    chat = window.chat
    label = window.pair_label
    assert label.text() == "loaded: tiny"  # the loaded pair, its draft model drafting
    for key, words in (("lookup", "drafting by prompt lookup"), ("none", "target alone"), ("model", "loaded: tiny")):
        chat.drafter.setCurrentIndex(chat.drafter.findData(key))
        assert words in label.text(), (key, label.text())
    assert "prompt lookup" not in label.text()

    chat.max_tokens.setValue(512)
    chat.meter.update_now()
    before = chat.meter.used
    chat.max_tokens.setValue(100)
    qtbot.waitUntil(lambda: chat.meter.used == before - 412, timeout=60000)
    assert "max tokens" in chat.meter.toolTip()


def test_help_keys_are_keys_and_bench_tips_name_real_columns(qtbot, window):
    from app.help_menu import collect_shortcuts
    from app.views.bench_results import COLUMN_TIPS, COLUMNS

    keys = [s.keys for s in collect_shortcuts(window)]
    assert "Exit" not in keys and any(k.startswith("Ctrl+") for k in keys)
    titles = {t for _, t in COLUMNS}
    for tip in COLUMN_TIPS.values():
        assert "Speedup" not in tip, "a tooltip names a column the table does not have"
    assert "Decode ×" in titles


def test_export_suggests_the_whole_title_as_the_file_name(qtbot, window, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    chat = window.chat
    title = "A question about the exact output of speculative decoding: why does it match? " * 2
    conv = window.history.create(title=title.strip())
    window.history.add_message(conv.id, "user", "hi")
    chat.open_conversation(conv.id)
    offered = []
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: offered.append(a[2]) or ("", ""))
    chat.export_btn.menu().actions()[0].trigger()
    assert offered == [title.strip().replace(":", "-").replace("?", "-") + ".md"]


# -- code reads like code -------------------------------------------------------------------------
CODE_ANSWER = 'Here:\n\n```python\ndef f(x):\n    # a comment\n    return "s" + str(42)\n```\n\nDone.'


def _char_format_at(transcript, needle: str, offset: int = 0):
    from PySide6.QtGui import QTextCursor

    doc = transcript.document()
    found = doc.find(needle)
    assert not found.isNull(), needle
    c = QTextCursor(doc)
    c.setPosition(found.selectionStart() + offset + 1)  # the format of the character before the cursor
    return c.charFormat()


def test_code_blocks_are_highlighted_and_the_tint_skips_indentation(qtbot, window):
    from app.widgets.transcript.code_highlight import PALETTE

    chat = window.chat
    conv = window.history.create(title="code")
    window.history.add_message(conv.id, "user", "show me")
    window.history.add_message(conv.id, "assistant", CODE_ANSWER, spans=[(len(CODE_ANSWER), "draft")])
    chat.refresh_conversations()
    item = chat.conv_list.item(0)
    window.resize(1360, 860)
    qtbot.mouseClick(chat.conv_list.viewport(), Qt.MouseButton.LeftButton, pos=chat.conv_list.visualItemRect(item).center())
    assert chat.conversation_id == conv.id
    t = chat.transcript
    colours = dict(PALETTE)
    assert _char_format_at(t, "def").foreground().color() == colours["Keyword"]
    assert _char_format_at(t, "# a comment").foreground().color() == colours["Comment"]
    assert _char_format_at(t, '"s"').foreground().color() == colours["Literal.String"]
    assert _char_format_at(t, "42").foreground().color() == colours["Literal.Number"]
    assert _char_format_at(t, "Here").foreground().color() not in colours.values(), "prose stays plain"
    # the draft tint is on the glyphs, not on the four spaces in front of `return`
    assert _char_format_at(t, "return").background().color().alpha() > 0
    assert _char_format_at(t, "    return").background().style() == Qt.BrushStyle.NoBrush


def test_syntax_colours_read_on_light_and_dark(qtbot):
    from PySide6.QtGui import QColor

    from app.widgets.transcript.code_highlight import PALETTE

    for name, colour in PALETTE:
        for bg in (QColor(255, 255, 255), QColor(30, 31, 34)):
            assert contrast(colour, bg) >= 3.0, (name, bg.name())


# -- a Hub that cannot be reached: the mirror, offered in the same dialog --------------------------
def test_unreachable_hub_offers_the_mirror_and_downloads_from_it(qtbot, tmp_path, monkeypatch, fakehub, tiny_target):
    from PySide6.QtWidgets import QMessageBox

    from engine.models import store
    from fakehub import closed_port_url
    from test_gui_shell import _tiny_catalog
    from test_store import MIRROR_TOML, build_wheel

    data = tiny_target.read_bytes()
    wheels = tmp_path / "wheels"
    build_wheel(wheels, 1, data[: len(data) // 2])
    build_wheel(wheels, 2, data[len(data) // 2:])
    _tiny_catalog(fakehub, tmp_path, monkeypatch, tiny_target, mirror=MIRROR_TOML)
    monkeypatch.setenv("HF_ENDPOINT", closed_port_url())
    monkeypatch.setenv("TANDEM_PIP_ARGS", f"--no-index --find-links '{wheels}'")
    asked: list[str] = []
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: asked.append(a[2]) or QMessageBox.StandardButton.Yes)
    w = _make_window(qtbot, tmp_path, monkeypatch)
    w.show()
    w.nav.setCurrentRow(2)
    pairs = w.views["Models"].pairs
    pair = next(iter(w.catalog.pairs.values()))
    pairs.select_pair(pair.id)
    pairs.source.setCurrentIndex(pairs.source.findData("hub"))  # the user insists on Hugging Face
    qtbot.mouseClick(pairs.download_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(asked), timeout=30000)
    assert "Hugging Face cannot be reached" in asked[0] and "mirror" in asked[0]
    assert w.errors == [], "no raw ConnectError dialog"
    qtbot.waitUntil(lambda: store.locate_model(pair.target) is not None, timeout=60000)
    assert pairs.source.currentData() == "mirror"
    w.close()


# -- attachments as file cards --------------------------------------------------------------------
def test_a_sent_attachment_shows_as_a_file_card_that_opens(qtbot, window, tmp_path):
    from test_gui_transcript import click_anchor

    from app.widgets.attachments.attachments import split_attachments
    from app.widgets.transcript.file_card import FileViewer

    chat = window.chat
    window.resize(1360, 860)
    body = "line one of the notes\n" * 40
    f = tmp_path / "notes.md"
    f.write_text(body.rstrip("\n"), encoding="utf-8")
    attach(qtbot, chat, f)
    assert chat.attachments.items()
    chat.apply_settings({"drafter": "lookup", "max_tokens": 6})
    chat.prompt.setPlainText("summarise")
    qtbot.mouseClick(chat.send_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat.worker is None, timeout=30000)
    user = window.history.messages(chat.conversation_id)[0]
    assert split_attachments(user.content) == ("summarise", [("notes.md", body.rstrip("\n"))]), "sent as before"
    shown = chat.transcript.toPlainText()
    n = len(window.session.engine.target.tokenize(body.rstrip("\n"), add_special=False, parse_special=False))
    assert f"\ufffc notes.md · 879 B · {n:,} tokens" in shown and "line one of the notes" not in shown
    click_anchor(qtbot, chat.transcript, f"msg:file:{user.id}:0")
    viewer = chat.transcript.findChild(FileViewer)
    assert viewer is not None and viewer.isVisible() and viewer.windowTitle() == "notes.md"
    assert viewer.text.toPlainText() == body.rstrip("\n")


def test_split_attachments_leaves_other_messages_alone():
    from app.widgets.attachments.attachments import Attachment, attachment_block, split_attachments

    a, b = Attachment("a.txt", "x\n```\ny", 3, True), Attachment("b.md", "", 0, True)
    assert split_attachments("\n\n".join(["hi", attachment_block(a), attachment_block(b)])) == \
        ("hi", [("a.txt", "x\n```\ny"), ("b.md", "")])
    assert split_attachments(attachment_block(b)) == ("", [("b.md", "")])
    typed = "see Attached file `x`:\n\n```\ncode\n```"  # typed by hand, mid-line: not a card
    assert split_attachments(typed) == (typed, [])


def test_a_pair_loaded_after_a_start_with_no_models_drafts_with_its_draft_model(qtbot, tmp_path, monkeypatch, tiny_target, tiny_draft):
    """A fresh install lists no model, so the Draft box falls back to prompt lookup; that was
    not the user's choice, so loading a pair with a draft model drafts with it. A user's own
    pick of lookup is kept."""
    import app.widgets.panels.model_bar as model_bar

    monkeypatch.setattr(model_bar, "available_models", lambda catalog=None: [])
    w = _make_window(qtbot, tmp_path, monkeypatch)
    assert w.chat.drafter.currentData() == "lookup"
    _load(qtbot, w, tiny_target, tiny_draft)
    assert w.chat.drafter.currentData() == "model" and w.pair_label.text() == "loaded: tiny"
    w.chat.drafter.setCurrentIndex(w.chat.drafter.findData("lookup"))  # the user's own choice
    _load(qtbot, w, tiny_target, tiny_draft)
    assert w.chat.drafter.currentData() == "lookup"
    w.close()
