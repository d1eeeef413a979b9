"""Issue 26: the app says what it is doing and what happened — the first answer's progress in
the transcript, the race verdict for an audience, dark-theme contrast, toasts. Each test
clicks as a user would."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from engine.decoding.events import PrefillEvent  # noqa: E402
from test_gui_chat_input import _load, _make_window  # noqa: E402

SLOW_S = 0.6  # each prompt chunk of the slowed-down engine


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch, tiny_target):
    w = _make_window(qtbot, tmp_path, monkeypatch)
    _load(qtbot, w, tiny_target, tiny_target)
    w.show()
    yield w
    w.close()


def _slow_prefill(monkeypatch, engine) -> None:
    """The engine reads the prompt slowly: a pause after each prompt-progress event."""
    real = engine.stream

    def stream(request, *args, **kw):
        for ev in real(request, *args, **kw):
            yield ev
            if isinstance(ev, PrefillEvent):
                time.sleep(SLOW_S)

    monkeypatch.setattr(engine, "stream", stream)


def test_first_answer_shows_prompt_progress_then_auto_measuring_in_the_transcript(qtbot, window, monkeypatch):
    chat = window.chat
    _slow_prefill(monkeypatch, window.session.engine)
    chat.apply_settings({"drafter": "model", "lookahead": "auto", "temperature": 0.0, "max_tokens": 8})
    chat.prompt.setPlainText("the value of the class " * 6)
    seen: list[str] = []
    t0 = time.perf_counter()
    qtbot.mouseClick(chat.send_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat.transcript.progress_text().startswith("Reading the prompt"), timeout=500)
    assert time.perf_counter() - t0 < 0.5 + SLOW_S  # waitUntil's own limit says 0.5 s; the clock agrees
    label = chat.transcript._progress
    assert label.isVisible() and chat.transcript.viewport().rect().contains(label.geometry())

    def note() -> bool:
        text = chat.transcript.progress_text()
        if text and (not seen or seen[-1] != text):
            seen.append(text)
        return chat.worker is None

    qtbot.waitUntil(note, timeout=30000)
    assert any(t.startswith("Measuring this machine for Auto") for t in seen), seen
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
