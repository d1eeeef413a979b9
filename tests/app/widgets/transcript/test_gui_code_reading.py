"""Code reads like code: a user's pasted or fenced code is monospace on the code tint (the
text still verbatim), inline code spans are monospace, and long code lines wrap inside their
block unless the reader turns wrapping off (kept in the window's settings)."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import QSettings  # noqa: E402

from app.history import Message  # noqa: E402
from app.widgets.transcript.markdown_render import CODE_BG, code_wraps  # noqa: E402
from app.widgets.transcript.transcript import Transcript  # noqa: E402
from app.widgets.transcript.user_text import code_lines  # noqa: E402

ASKED = "Why does *this* fail with `KeyError`?\n\n```python\ndef f(d):\n    return d['key']\n```\nThanks **a lot**"


def _blocks(doc):
    b = doc.begin()
    while b.isValid():
        yield b
        b = b.next()


def _fixed(block, at: int = 0) -> bool:
    it = block.begin()
    while not it.atEnd():
        frag = it.fragment()
        if frag.position() - block.position() <= at < frag.position() - block.position() + frag.length():
            return frag.charFormat().fontFixedPitch()
        it += 1
    return False


@pytest.fixture
def tr(qtbot):
    t = Transcript()
    qtbot.addWidget(t)
    t.resize(800, 500)
    return t


def test_a_users_fenced_code_is_monospace_on_the_tint_and_the_text_stays_verbatim(tr):
    tr.set_messages([Message(1, 1, "user", ASKED)])
    shown = {b.text(): b for b in _blocks(tr.document())}
    for line in ("```python", "def f(d):", "    return d['key']", "```"):
        assert _fixed(shown[line]) and shown[line].blockFormat().background().color() == CODE_BG, line
    prose = shown["Why does *this* fail with `KeyError`?"]  # verbatim: the asterisks and backticks stay
    assert not _fixed(prose) and prose.blockFormat().background().color() != CODE_BG
    assert _fixed(prose, prose.text().index("`KeyError`") + 1), "an inline code span is monospace"
    assert not _fixed(shown["Thanks **a lot**"])


def test_fences_are_found_as_markdown_finds_them():
    assert code_lines("a\n```\nb\n```\nc") == [False, True, True, True, False]
    assert code_lines("~~~\n```\nx\n~~~") == [True, True, True, True], "a fence closes only with its own kind"
    assert code_lines("````\n```\n````\nafter") == [True, True, True, False], "and at least as long"
    assert code_lines("```\nopen to the end") == [True, True]
    assert code_lines("``` not`a fence") == [False], "a backtick fence's info has no backtick"


def test_the_wrap_choice_is_kept_in_the_window_settings(qtbot, tmp_path, monkeypatch):
    from test_gui_chat_input import _make_window

    w = _make_window(qtbot, tmp_path, monkeypatch, settings={"view/wrap_code": "false"})
    try:
        assert not code_wraps(), "the saved choice applies at start"
        w.chat.transcript.set_code_wrap(True)
        assert code_wraps() and str(w.settings.value("view/wrap_code")).lower() == "true"
        qs = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
        w.settings.sync()
        assert str(qs.value("view/wrap_code")).lower() == "true"
    finally:
        w.chat.transcript.set_code_wrap(True)
        w.close()
