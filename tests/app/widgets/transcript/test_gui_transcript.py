"""The transcript as a user meets it (pytest-qt, offscreen): Markdown answers with code
blocks one can copy, provenance tinted over the rendered text, user messages verbatim,
following the stream unless scrolled up, the live stats line, and the per-message actions
(regenerate, edit and resend, continue) through the real engine on tiny models."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QGuiApplication, QTextCursor  # noqa: E402
from PySide6.QtWidgets import QAbstractSlider  # noqa: E402

from app.history import Message, close_open_fence, message_markdown  # noqa: E402
from app.widgets.transcript.markdown_render import align  # noqa: E402
from app.widgets.transcript.provenance import COLOURS  # noqa: E402
from app.widgets.transcript.transcript import Transcript, message_text  # noqa: E402
from test_gui_chat import _send, window  # noqa: E402,F401  (the chat tests' send helper and window fixture)

ANSWER = "Here is **the** code:\n\n```python\ndef f(x):\n    return x  # *not emphasis*\n```\n\nDone."
CODE = "def f(x):\n    return x  # *not emphasis*"


def _fragments(tr: Transcript):
    b = tr.document().begin()
    while b.isValid():
        it = b.begin()
        while not it.atEnd():
            yield b, it.fragment()
            it += 1
        b = b.next()


def click_anchor(qtbot, tr: Transcript, href: str) -> None:
    """Click the link `href` where it is drawn, as a user would."""
    frag = next(f for _, f in _fragments(tr) if f.charFormat().anchorHref() == href)
    c = QTextCursor(tr.document())
    c.setPosition(frag.position() + frag.length() // 2)
    tr.setTextCursor(c)
    tr.ensureCursorVisible()
    rect = tr.cursorRect(c)
    assert tr.anchorAt(rect.center()) == href
    qtbot.mouseClick(tr.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


def char_background(tr: Transcript, pos: int):
    c = QTextCursor(tr.document())
    c.setPosition(pos + 1)  # the format of the character before the cursor
    return c.charFormat().background()


@pytest.fixture
def tr(qtbot):
    t = Transcript()
    qtbot.addWidget(t)
    t.resize(600, 400)
    t.show()
    qtbot.waitExposed(t)
    return t


def test_code_block_is_monospace_on_a_tint_and_copy_takes_exactly_its_code(qtbot, tr):
    tr.set_messages([Message(1, 1, "user", "show me"), Message(2, 1, "assistant", ANSWER)])
    text = tr.toPlainText()
    assert "```" not in text and "**" not in text and "python   Copy" in text
    start = text.index("def f(x):")
    block = tr.document().findBlock(start)
    assert block.blockFormat().background().color().alpha() > 0  # the tint
    assert all(f.charFormat().fontFixedPitch() for b, f in _fragments(tr) if b == block)
    prose = tr.document().findBlock(text.index("Done."))
    assert not any(f.charFormat().fontFixedPitch() for b, f in _fragments(tr) if b == prose)
    QGuiApplication.clipboard().clear()
    click_anchor(qtbot, tr, "copy:0")
    assert QGuiApplication.clipboard().text() == CODE


def test_provenance_tint_lands_on_the_rendered_characters(tr):
    src = "Use **bold** here\n\n```\nx = 1\n```"
    b = src.index("bold")
    x = src.index("x = 1")
    spans = [(b, "plain"), (4, "draft"), (x - b - 4, "bonus"), (5, "target"), (len(src) - x - 5, "plain")]
    tr.set_messages([Message(1, 1, "assistant", src, spans=spans)])
    text = tr.toPlainText()
    at = text.index("Use bold here")
    want = {"U": None, "b": "draft", "o": "draft", "d": "draft", "h": "bonus", "x": "target", "1": "target"}
    for ch, prov in want.items():
        i = text.index(ch, at)
        bg = char_background(tr, i)
        if prov is None:
            assert bg.style() == Qt.BrushStyle.NoBrush, ch
        else:
            assert bg.color() == COLOURS[prov], (ch, bg.color().getRgb())
    # the plain view is the same rendering, untinted
    tr.set_show_provenance(False)
    assert tr.toPlainText() == text
    assert char_background(tr, text.index("bold")).style() == Qt.BrushStyle.NoBrush


def test_html_in_an_answer_is_shown_as_text(tr):
    tr.set_messages([Message(1, 1, "assistant", "Wrap it in a <div> and add <b>x</b> &amp; more.")])
    assert "Wrap it in a <div> and add <b>x</b> & more." in tr.toPlainText()


def test_an_answer_cannot_write_links_that_act_on_messages(tr):
    tr.set_messages([Message(3, 1, "assistant", "[again](msg:regenerate:3) [mine](copy:0) [web](https://example.org)")])
    hrefs = {f.charFormat().anchorHref() for _, f in _fragments(tr)}
    assert "msg:regenerate:3" in hrefs  # the transcript's own link under the answer
    assert "copy:0" not in hrefs and "https://example.org" in hrefs
    ours = [f for _, f in _fragments(tr) if f.charFormat().anchorHref() == "msg:regenerate:3"]
    assert [f.text() for f in ours] == ["Regenerate"]


def test_alignment_drops_markup_and_matches_whitespace():
    src = "a **b**\n- c"
    assert align("a b\nc", src) == [0, 1, 4, 7, 10]
    assert align("one two", "one\ntwo") == list(range(7))  # a soft line break renders as a space


def test_user_message_is_verbatim(tr):
    typed = "def f():\n    return 1\n\n# not a heading\n* not a list"
    tr.set_messages([Message(1, 1, "user", typed)])
    assert typed in tr.toPlainText()


def _fill(tr: Transcript, n: int = 30) -> None:
    tr.set_messages([Message(i, 1, "user" if i % 2 else "assistant", f"message {i}\n\nline") for i in range(1, n)])


class Tok:
    def __init__(self, text, provenance="plain"):
        self.text, self.provenance = text, provenance


def test_scrolling_up_stops_following_and_the_jump_button_resumes(qtbot, tr):
    _fill(tr)
    bar = tr.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() == bar.maximum() and tr.following
    tr.begin_stream()
    tr.append_tokens([Tok("word " * 50 + "\n")] * 4)
    tr.flush()
    assert bar.value() == bar.maximum()  # followed the stream
    assert not tr.jump_btn.isVisible()
    bar.triggerAction(QAbstractSlider.SliderAction.SliderPageStepSub)  # the user scrolls up
    kept = bar.value()
    assert kept < bar.maximum() and not tr.following
    assert tr.jump_btn.isVisible()
    tr.append_tokens([Tok("more " * 50 + "\n")] * 4)
    tr.flush()
    assert bar.value() == kept  # stays where the user is
    qtbot.mouseClick(tr.jump_btn, Qt.MouseButton.LeftButton)
    assert bar.value() == bar.maximum() and tr.following and not tr.jump_btn.isVisible()
    tr.append_tokens([Tok("again " * 50 + "\n")] * 4)
    tr.flush()
    assert bar.value() == bar.maximum()


def test_end_stream_keeps_a_scrolled_up_view_where_it_is(qtbot, tr):
    _fill(tr)
    tr.begin_stream()
    tr.append_tokens([Tok("word " * 80)])
    tr.flush()
    bar = tr.verticalScrollBar()
    bar.setValue(0)
    tr.end_stream(Message(99, 1, "assistant", "word " * 80))
    assert bar.value() == 0 and tr.jump_btn.isVisible()


def test_export_closes_an_open_fence_before_the_stopped_marker():
    m = Message(1, 1, "assistant", "Sure:\n\n```python\ndef f(x):\n    return", status="stopped")
    md = message_markdown(m)
    assert md.endswith("    return\n```\n\n*(stopped by you)*")
    capped = Message(2, 1, "assistant", "~~~~\ncode", stats={"finish_reason": "length"})
    assert "code\n~~~~\n\n*(stopped: max tokens)*" in message_markdown(capped)
    assert "acceptance" not in message_markdown(capped)  # nothing drafted: no rate of nothing
    closed = "```\nx\n```\n"
    assert close_open_fence(closed) == closed
    assert close_open_fence("`inline ```not a fence``` text`") == "`inline ```not a fence``` text`"


def test_copy_as_text_renders_and_copy_as_markdown_keeps_the_source(qtbot, tr):
    tr.set_messages([Message(5, 1, "assistant", "A **bold** list:\n\n- one\n- two")])
    QGuiApplication.clipboard().clear()
    click_anchor(qtbot, tr, "msg:copy-text:5")
    assert QGuiApplication.clipboard().text() == "A bold list:\n- one\n- two"
    click_anchor(qtbot, tr, "msg:copy-markdown:5")
    assert QGuiApplication.clipboard().text() == "A **bold** list:\n\n- one\n- two"
    assert message_text(Message(6, 1, "user", "**kept**")) == "**kept**"


# -- actions through the real engine ---------------------------------------------------------
@pytest.fixture
def win(window, qtbot):
    """The chat tests' window (tiny self-draft pair loaded), shown: links are clicked where drawn."""
    window.show()
    qtbot.waitExposed(window)
    return window


def _wait(qtbot, chat) -> None:
    qtbot.waitUntil(lambda: chat.worker is None, timeout=30000)


def test_regenerate_answers_again_as_a_new_version_of_the_last_answer(qtbot, win):
    chat = win.chat
    _send(qtbot, win, "the value of")
    before = win.history.messages(chat.conversation_id)
    click_anchor(qtbot, chat.transcript, f"msg:regenerate:{before[-1].id}")
    _wait(qtbot, chat)
    after = win.history.messages(chat.conversation_id)
    assert [m.role for m in after] == ["user", "assistant"]
    assert after[0].id == before[0].id and after[1].id == before[1].id
    assert (after[1].version, after[1].versions) == (2, 2)  # the first answer is kept (tests/app/views/chat/test_gui_versions.py)
    assert after[1].content == before[1].content and after[1].status == "complete"  # greedy: the same answer


def test_edit_and_resend_replaces_the_message_and_drops_what_follows(qtbot, win):
    chat = win.chat
    _send(qtbot, win, "the value of")
    _send(qtbot, win, "the data of")
    first = win.history.messages(chat.conversation_id)[0]
    click_anchor(qtbot, chat.transcript, f"msg:edit:{first.id}")
    assert chat.prompt.toPlainText() == "the value of" and chat.edit_label.isVisible()
    chat.prompt.selectAll()
    qtbot.keyClicks(chat.prompt, "the class of")
    qtbot.mouseClick(chat.send_btn, Qt.MouseButton.LeftButton)
    _wait(qtbot, chat)
    msgs = win.history.messages(chat.conversation_id)
    assert [(m.role, m.content if m.role == "user" else "") for m in msgs] == [("user", "the class of"), ("assistant", "")]
    assert msgs[1].content and not chat.edit_label.isVisible()
    # what the model read was the edited message alone, not the replaced turns before it
    sent = win.session.engine.tokens_for([{"role": "user", "content": "the class of"}], chat=True)
    assert msgs[1].stats["prompt_tokens"] == len(sent)


def test_continue_appends_to_an_answer_cut_at_max_tokens(qtbot, win, tiny_target):
    chat = win.chat
    _send(qtbot, win, "the value of", max_tokens=6)
    cut = win.history.messages(chat.conversation_id)[-1]
    assert cut.stats["finish_reason"] == "length"
    assert "stopped: max tokens" in chat.transcript.toPlainText()
    click_anchor(qtbot, chat.transcript, f"msg:continue:{cut.id}")
    _wait(qtbot, chat)
    msgs = win.history.messages(chat.conversation_id)
    assert [m.id for m in msgs] == [msgs[0].id, cut.id]  # the same answer, longer
    longer = msgs[-1]
    assert longer.content.startswith(cut.content) and len(longer.content) > len(cut.content)
    assert sum(n for n, _ in longer.spans) == len(longer.content)
    assert message_text(longer) in chat.transcript.toPlainText()  # shown whole, once rendered
    assert longer.stats["generated_tokens"] <= 20  # the stats are the continuation's own


def test_send_renders_only_what_is_new_and_the_old_answer_loses_regenerate(qtbot, win):
    chat = win.chat
    _send(qtbot, win, "the value of")
    first = win.history.messages(chat.conversation_id)[-1]
    renders = chat.transcript.renders
    _send(qtbot, win, "the data of")
    assert chat.transcript.renders == renders + 1  # the new answer alone; the first is not laid out again
    hrefs = {f.charFormat().anchorHref() for _, f in _fragments(chat.transcript)}
    last = win.history.messages(chat.conversation_id)[-1]
    assert f"msg:regenerate:{first.id}" not in hrefs and f"msg:regenerate:{last.id}" in hrefs
    assert f"msg:copy-text:{first.id}" in hrefs


def test_the_stats_line_is_live_while_streaming(qtbot, win):
    chat = win.chat
    _send(qtbot, win, "the value of")
    finished = chat.stats_label.text()
    assert "tok/s" in finished
    chat.apply_settings({"drafter": "model", "lookahead": 4, "max_tokens": 4000})
    chat.prompt.setPlainText("the data of")
    chat.send()
    seen: list[str] = []
    qtbot.waitUntil(lambda: seen.append(chat.stats_label.text()) or "tokens ·" in seen[-1], timeout=60000)
    chat.stop()
    _wait(qtbot, chat)
    live = [s for s in seen if s.startswith("Generating")]
    assert live and finished not in seen
    assert "tokens ·" in live[-1] and "acceptance" in live[-1]
    assert "tok/s" not in live[-1]  # one rate on screen while streaming: the status bar's


def test_a_stopped_answer_wears_a_badge(qtbot, win):
    chat = win.chat
    chat.apply_settings({"drafter": "none", "max_tokens": 4000})
    chat.prompt.setPlainText("the value of")
    chat.send()
    chat.worker.tokens.connect(lambda toks: chat.stop())
    _wait(qtbot, chat)
    assert "Assistant   stopped by you" in chat.transcript.toPlainText()
    last = win.history.messages(chat.conversation_id)[-1]
    assert any(f.charFormat().anchorHref() == f"msg:continue:{last.id}" for _, f in _fragments(chat.transcript))


def test_continuation_tokens_open_the_assistant_turn_without_closing_it(tiny_target):
    from engine.decoding.prompting.chat import chat_tokens, continuation_tokens
    from engine.errors import PromptError
    from engine.llamacpp.llama import Model

    m = Model(tiny_target)
    try:
        conv = [{"role": "user", "content": "the value of"}, {"role": "assistant", "content": "the data"}]
        toks = continuation_tokens(m, conv)
        head = chat_tokens(m, conv[:1], add_generation_prompt=True)
        assert toks[: len(head)] == head
        assert toks[len(head):] == m.tokenize("the data", add_special=False, parse_special=False)
        assert not m.detokenize(toks).rstrip().endswith("<|im_end|>")
        with pytest.raises(PromptError):
            continuation_tokens(m, conv[:1])
    finally:
        m.close()


def test_live_stats_words_running_totals_and_no_rate_of_nothing():
    from engine.decoding.events import StepEvent

    from app.widgets.charts.live_stats import LiveStats

    live = LiveStats()
    assert live.text() == "Generating…"
    live.add_steps([StepEvent(0, 0, 0, 0, 1, 0.0, 5.0, 1.0), StepEvent(1, 0, 0, 0, 1, 0.0, 5.0, 1.5)])
    assert live.text() == "Generating… 2 tokens"  # nothing drafted: no acceptance figure; tok/s is the status bar's
    live.draft_reading(40, 3000, now=10.0)  # the model draft catches up with the prompt, between steps
    assert live.text() == "Generating… 2 tokens · draft reading the prompt: 40 of 3,000"  # no rate yet
    live.draft_reading(1200, 3010, now=12.0)  # 580 tokens/s: 1,810 more in about 3 s
    assert live.text() == "Generating… 2 tokens · draft reading the prompt: 1,200 of 3,010, about 3 s left"
    live.draft_reading(3030, 3030, now=15.0)  # caught up: drafting starts, nothing more to say
    live.add_steps([StepEvent(2, 4, 4, 3, 4, 1.0, 5.0, 2.0)])
    assert live.text() == "Generating… 6 tokens · acceptance 75% (3/4) · 2.00 tokens/step"


def test_a_long_stats_line_does_not_widen_the_window(qtbot, win):
    win.resize(1200, 800)
    qtbot.wait(50)
    width = win.width()
    win.chat.stats_label.setText("Generating… 123456 tokens · 9999.9 tok/s · acceptance 100% (99999/99999) · 16.00 tokens/step " * 3)
    qtbot.wait(50)
    assert win.width() == width
