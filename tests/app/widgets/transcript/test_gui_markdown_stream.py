"""Issue 26 item 3: Markdown rendered while it streams (the open last block alone rendered
again), Continue that keeps an answer rendered, race panes that render, live and in the
replay, and code that scrolls sideways instead of wrapping (pytest-qt, offscreen)."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import QMessageBox  # noqa: E402

from app.history import Message  # noqa: E402
from app.widgets.transcript import markdown_stream  # noqa: E402
from app.widgets.transcript.markdown_render import render_markdown  # noqa: E402
from app.widgets.transcript.markdown_stream import commit_point, slice_spans, visible_end  # noqa: E402
from app.widgets.panels.race_pane import RacePane  # noqa: E402
from app.widgets.transcript.transcript import Transcript  # noqa: E402
from engine.decoding.events import DoneEvent, RunStats, TokenEvent  # noqa: E402
from test_gui_chat import window  # noqa: E402,F401  (the chat tests' window: tiny self-draft pair loaded)
from test_gui_transcript import click_anchor  # noqa: E402

ANSWER = ("### Plan\n\nA **short** intro.\n\n```python\ndef f(x):\n    return x\n```\n\n"
          "- one\n- two\n\nDone.")
LONG_LINE = "    result = compute(" + ", ".join(f"argument_{i}" for i in range(40)) + ")"
LONG_CODE = f"Code:\n\n```python\ndef g():\n{LONG_LINE}\n    return result\n```\n\nEnd."


class Tok:
    def __init__(self, text: str, provenance: str = "plain"):
        self.text, self.provenance = text, provenance


def raw_markup(text: str) -> bool:
    """A fence or a heading's hashes left as text (an unclosed ** in the open paragraph may
    show for a frame, as it does anywhere Markdown streams: nothing can know it will close)."""
    return "```" in text or "###" in text


def blocks(doc):
    b = doc.begin()
    while b.isValid():
        yield b
        b = b.next()


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def headings(doc) -> list[tuple[int, str]]:
    out, b = [], doc.begin()
    while b.isValid():
        if b.blockFormat().headingLevel():
            out.append((b.blockFormat().headingLevel(), b.text()))
        b = b.next()
    return out


def monospace(block) -> bool:
    it = block.begin()
    return not it.atEnd() and it.fragment().charFormat().fontFixedPitch()


def code_block(doc, first_line: str):
    """The code lines of the block that starts with `first_line`, as QTextBlocks."""
    b = doc.begin()
    while b.isValid() and b.text() != first_line:
        b = b.next()
    out = []
    while b.isValid() and monospace(b):
        out.append(b)
        b = b.next()
    return out


# -- where the source is cut ----------------------------------------------------------------------
def test_the_source_is_cut_only_where_a_finished_block_ends():
    assert commit_point("para one\n\npara two\n", 0) == len("para one\n\n")
    assert commit_point("para one\n\npara tw", 0) == 0  # the next block's first line is not whole yet
    assert commit_point("```\ncode\n\nmore\n", 0) == 0  # inside an open fence
    assert commit_point("```\ncode\n```\nafter\n", 0) == len("```\ncode\n```\n")
    assert commit_point("### H\ntext\n", 0) == len("### H\n")
    assert commit_point("- a\n\n- b\n", 0) == 0  # the list goes on
    assert commit_point("1. a\n\n   more\n", 0) == 0  # indented: the item goes on
    assert commit_point("a\n\nb\n\nc\n", 3) == len("a\n\nb\n\n")  # from where the last cut was
    assert commit_point("~~~~\n```\n~~~~\nx\n", 0) == len("~~~~\n```\n~~~~\n")  # a fence closes with its own kind
    assert visible_end("text\n``") == 5 and visible_end("text\n```py") == 5  # a fence being typed waits
    assert visible_end("text\n`x` y") == len("text\n`x` y")
    assert slice_spans([(3, "draft"), (4, "target"), (2, "bonus")], 2, 8) == [(1, "draft"), (4, "target"), (1, "bonus")]


# -- the transcript while an answer streams --------------------------------------------------------
@pytest.fixture
def tr(qtbot):
    t = Transcript()
    qtbot.addWidget(t)
    t.resize(800, 500)
    t.show()
    qtbot.waitExposed(t)
    return t


def test_streaming_renders_each_finished_block_once_and_the_open_one_again(qtbot, tr, monkeypatch):
    pieces: list[str] = []
    real = markdown_stream.render_markdown
    monkeypatch.setattr(markdown_stream, "render_markdown", lambda src, *a, **k: pieces.append(src) or real(src, *a, **k))
    tr.begin_stream()
    for text in ("### Plan\n", "\nA **short** intro.\n", "\n```python\ndef f(x):\n"):
        tr.append_tokens([Tok(text, "draft")])
        tr.flush()
    shown = tr.toPlainText()
    assert not raw_markup(shown) and "**" not in shown, shown  # rendered while it streams
    assert headings(tr.document()) == [(3, "Plan")]
    assert "A short intro." in shown and "def f(x):" in shown
    assert monospace(code_block(tr.document(), "def f(x):")[0])
    assert pieces == ["### Plan\n",  # the open heading
                      "### Plan\n\n", "A **short** intro.\n",  # the heading, finished; the open paragraph
                      "A **short** intro.\n\n", "```python\ndef f(x):\n"]  # each finished block rendered once
    tr.append_tokens([Tok(ANSWER[len("### Plan\n\nA **short** intro.\n\n```python\ndef f(x):\n"):], "target")])
    tr.flush()
    assert tr.stream_source() == ANSWER
    whole = render_markdown(ANSWER).document.toPlainText()
    assert lines(tr.stream_text()) == lines(whole)  # the end of the stream changes no text: no jump


def test_a_fence_being_typed_never_shows_its_backticks(qtbot, tr):
    tr.begin_stream()
    tr.append_tokens([Tok("Look:\n\n"), Tok("``")])
    tr.flush()
    assert "`" not in tr.toPlainText()
    tr.append_tokens([Tok("`py"), Tok("thon\nx = 1\n")])
    tr.flush()
    assert "`" not in tr.toPlainText() and "x = 1" in tr.toPlainText()


# -- long code lines: wrapped by default, or whole with the toggle off ----------------------------------
def test_a_long_code_line_wraps_at_800_px_and_the_transcript_never_scrolls_sideways(qtbot, tr):
    tr.resize(800, 500)
    tr.set_messages([Message(1, 1, "user", "code please"), Message(2, 1, "assistant", LONG_CODE)])
    qtbot.wait(50)
    lines = code_block(tr.document(), "def g():")
    assert [b.text() for b in lines] == ["def g():", LONG_LINE, "    return result"]
    assert lines[1].layout().lineCount() > 1, "the long line wraps inside its block"
    assert not tr.horizontalScrollBar().isVisible(), "prose and actions stay where they are"


def test_with_wrapping_off_a_long_code_line_stays_whole_and_scrolls_sideways(qtbot, tr):
    tr.resize(800, 500)
    tr.set_code_wrap(False)
    try:
        tr.set_messages([Message(1, 1, "user", "code please"), Message(2, 1, "assistant", LONG_CODE)])
        qtbot.wait(50)
        lines = code_block(tr.document(), "def g():")
        assert [b.text() for b in lines] == ["def g():", LONG_LINE, "    return result"]
        assert sum(b.layout().lineCount() for b in lines) == 3  # one line on screen per line of source
        assert tr.horizontalScrollBar().maximum() > 0 and tr.horizontalScrollBar().isVisible()
    finally:
        tr.set_code_wrap(True)
    # the prose still wraps at the window's width: a long paragraph takes several lines
    tr.set_messages([Message(3, 1, "assistant", "word " * 200)])
    para = next(b for b in blocks(tr.document()) if b.text().startswith("word"))
    assert para.layout().lineCount() > 3


def test_jump_to_latest_sits_under_the_text_and_covers_none_of_it(qtbot, tr):
    tr.set_messages([Message(i, 1, "assistant", LONG_CODE) for i in range(1, 6)])
    bar = tr.verticalScrollBar()
    bar.setValue(bar.maximum() // 2)
    assert tr.jump_btn.isVisible()
    vp = tr.viewport().geometry()
    assert tr.jump_btn.geometry().top() > vp.bottom()  # below the viewport: no line of text under it
    assert tr.rect().contains(tr.jump_btn.geometry())
    qtbot.mouseClick(tr.jump_btn, Qt.MouseButton.LeftButton)
    assert not tr.jump_btn.isVisible() and tr.viewport().geometry().bottom() > vp.bottom()  # the strip is given back
    assert bar.value() == bar.maximum()


# -- race panes ------------------------------------------------------------------------------------------
def test_a_race_pane_renders_markdown_live(qtbot):
    pane = RacePane("Target alone", "tiny")
    qtbot.addWidget(pane)
    pane.resize(500, 400)
    pane.show()
    for i in range(0, len(ANSWER), 5):
        pane.append([Tok(ANSWER[i:i + 5], "draft" if i % 2 else "target")])
    assert pane.markdown() == ANSWER
    qtbot.waitUntil(lambda: "Done." in pane.plain_text(), timeout=60000)
    assert not raw_markup(pane.plain_text()) and headings(pane.text.document()) == [(3, "Plan")]
    pane.clear_text()
    assert pane.plain_text() == "" and pane.markdown() == ""


def test_the_race_replay_renders_markdown(qtbot, window):
    race = window.views["Race"]
    events = [TokenEvent(ANSWER[i:i + 4], i, "plain", i // 4, i // 4, 0.02 + i * 0.002) for i in range(0, len(ANSWER), 4)]
    race.tokens = {"target": events, "speculative": list(events)}
    with qtbot.waitSignal(race.replayFinished, timeout=60000):
        race.replay()
    for side in ("target", "speculative"):
        shown = race.panes[side].plain_text()
        assert "Done." in shown and not raw_markup(shown)
        assert headings(race.panes[side].text.document()) == [(3, "Plan")]


# -- the chat, as a user drives it -----------------------------------------------------------------
def _scripted(monkeypatch, engine, answer: str, *, finish: str = "stop", pause: float = 0.03) -> None:
    """The engine writes `answer`, a few characters per token, `pause` seconds apart."""

    def stream(request, *args, **kw):
        t0 = time.perf_counter()
        parts = [answer[i:i + 3] for i in range(0, len(answer), 3)]
        for i, text in enumerate(parts):
            time.sleep(pause)
            yield TokenEvent(text, i, "draft" if i % 3 else "target", i, i, time.perf_counter() - t0)
        stats = RunStats(generated_tokens=len(parts), finish_reason=finish, decode_s=time.perf_counter() - t0,
                         stopped_by="max_tokens" if finish == "length" else "eos")
        yield DoneEvent(answer, list(range(len(parts))), stats.finalize())

    monkeypatch.setattr(engine, "stream", stream)


def test_chat_renders_while_streaming_and_continue_keeps_it_rendered(qtbot, window, monkeypatch):
    chat = window.chat
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)  # a failure mid-answer must not hang on "close?"
    window.resize(800, 700)
    window.show()
    qtbot.waitExposed(window)
    first, rest = ANSWER[:60], ANSWER[60:]  # cut inside the code block
    assert "```python" in first and not first.endswith("```")
    _scripted(monkeypatch, window.session.engine, first, finish="length", pause=0.06)
    chat.apply_settings({"drafter": "model", "lookahead": 4, "temperature": 0.0, "max_tokens": 20})
    chat.prompt.setPlainText("plan it")
    qtbot.mouseClick(chat.send_btn, Qt.MouseButton.LeftButton)
    seen: list[str] = []
    qtbot.waitUntil(lambda: seen.append(chat.transcript.toPlainText()) or "def f" in seen[-1], timeout=60000)
    assert chat.worker is not None, "the answer must still be streaming for this test to mean anything"
    assert not any(raw_markup(s) for s in seen), [s for s in seen if raw_markup(s)][:1]
    assert (3, "Plan") in headings(chat.transcript.document())
    qtbot.waitUntil(lambda: chat.worker is None, timeout=60000)
    cut = window.history.messages(chat.conversation_id)[-1]
    assert cut.content == first and "stopped: max tokens" in chat.transcript.toPlainText()

    _scripted(monkeypatch, window.session.engine, rest)
    seen.clear()
    click_anchor(qtbot, chat.transcript, f"msg:continue:{cut.id}")
    assert chat.worker is not None
    qtbot.waitUntil(lambda: seen.append(chat.transcript.toPlainText()) or chat.worker is None, timeout=60000)
    assert len(seen) > 3 and not any(raw_markup(s) for s in seen), [s for s in seen if raw_markup(s)][:1]
    assert all("Plan" in s and "A short intro." in s for s in seen)  # what was there stays rendered
    longer = window.history.messages(chat.conversation_id)[-1]
    assert longer.id == cut.id and longer.content == ANSWER
    final = chat.transcript.toPlainText()
    assert "Done." in final and "**" not in final and headings(chat.transcript.document()) == [(3, "Plan")]


# -- an open code fence: its finished lines rendered once ------------------------------------------
CODE_LINES = ["def step_{0}(values):".format(i // 5) if i % 5 == 0 else f"    total_{i} = sum(values[{i}:]) * {i}  # line {i}"
              for i in range(150)]
CODE_ANSWER = "Here it is:\n\n```python\n" + "\n".join(CODE_LINES) + "\n```\n\nThat is all."


def _signature(doc):
    """Every block's text, block format and character runs with their formats."""
    out = []
    for b in blocks(doc):
        runs, it = [], b.begin()
        while not it.atEnd():
            frag = it.fragment()
            runs.append((frag.text(), frag.charFormat()))
            it += 1
        out.append((b.text(), b.blockFormat(), b.charFormat(), runs))
    return out


def _stream_in_pieces(qtbot, monkeypatch, answer: str, step: int = 4, stop_at: int | None = None):
    from PySide6.QtGui import QTextDocument

    from app.widgets.transcript import open_fence
    from app.widgets.panels.race_pane import COLOURS

    rendered: list[str] = []
    for module in (markdown_stream, open_fence):
        real = module.render_markdown
        monkeypatch.setattr(module, "render_markdown", lambda src, *a, _real=real, **k: rendered.append(src) or _real(src, *a, **k))
    doc = QTextDocument()
    stream = markdown_stream.MarkdownStream(doc, 0, COLOURS)
    text = answer[:stop_at] if stop_at is not None else answer
    for i in range(0, len(text), step):
        stream.add([["draft" if (i // step) % 3 else "target", text[i:i + step]]])
        stream.render()
    return doc, stream, rendered, COLOURS


def test_an_open_code_fence_renders_each_finished_line_once_not_the_whole_fence_per_frame(qtbot, monkeypatch):
    doc, stream, rendered, _ = _stream_in_pieces(qtbot, monkeypatch, CODE_ANSWER)
    # Rendering the whole open fence at each of ~1600 deliveries would feed Markdown about
    # len(CODE_ANSWER)**2 / 8 characters (~800 answers); a line or two per delivery, ~15.
    assert sum(len(s) for s in rendered) < 20 * len(CODE_ANSWER), sum(len(s) for s in rendered)
    longest_line = max(len(line) for line in CODE_LINES)
    inside = [s for s in rendered if s.startswith("```python\n") and "\n```" not in s]  # while the fence is open
    assert len(inside) > 1000 and max(len(s) for s in inside) < 3 * longest_line  # a line or two per frame
    assert stream.code_blocks == ["\n".join(CODE_LINES)]
    whole = render_markdown(CODE_ANSWER, [(len(CODE_ANSWER), "plain")]).document
    assert lines(stream.text()) == lines(whole.toPlainText())


def test_an_open_fence_rendered_line_by_line_looks_exactly_as_rendered_whole(qtbot, monkeypatch):
    """Mid-fence (code without multi-line strings) and after it closes: the same text, block
    and character formats (highlight, provenance tint, code background, label) as the same
    stream with the open tail rendered whole at each frame (as before the line-by-line path)."""
    answer = "Here it is:\n\n```python\n" + "\n".join(CODE_LINES[:40]) + "\n```\n\nThat is all."
    for stop in (answer.index("    total_27"), None):
        doc, stream, _, _ = _stream_in_pieces(qtbot, monkeypatch, answer, stop_at=stop)
        assert (stream._fence is not None) == (stop is not None)  # mid-fence: line by line
        with monkeypatch.context() as m:
            m.setattr(markdown_stream.MarkdownStream, "_render_open_fence", lambda self, cursor, end: False)
            whole_doc, whole_stream, _, _ = _stream_in_pieces(qtbot, monkeypatch, answer, stop_at=stop)
        assert doc.toPlainText() == whole_doc.toPlainText()
        assert _signature(doc) == _signature(whole_doc)
        assert stream.code_blocks == whole_stream.code_blocks


def test_an_answer_that_ends_inside_a_fence_is_rendered_whole_at_the_end(qtbot, monkeypatch):
    """Line by line, a docstring's later lines are highlighted without the opening quotes;
    `finish` (a race side's end) renders the open fence whole, as the whole answer would be."""
    answer = 'Code:\n\n```python\ndef f():\n    """Sum\n    of all.\n    """\n    return 1\n'
    doc, stream, _, _ = _stream_in_pieces(qtbot, monkeypatch, answer, step=3)
    assert stream._fence is not None
    with monkeypatch.context() as m:
        m.setattr(markdown_stream.MarkdownStream, "_render_open_fence", lambda self, cursor, end: False)
        whole_doc, whole_stream, _, _ = _stream_in_pieces(qtbot, monkeypatch, answer, step=3)
    assert doc.toPlainText() == whole_doc.toPlainText()
    assert _signature(doc) != _signature(whole_doc)  # "of all." coloured as code while the fence was open
    stream.finish()
    assert stream._fence is None and _signature(doc) == _signature(whole_doc)
    assert stream.code_blocks == whole_stream.code_blocks
