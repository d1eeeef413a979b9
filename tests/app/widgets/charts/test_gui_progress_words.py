"""The app says what is happening: a model draft reading the prompt is named, with how far it
is, in the stats line; a long prompt's reading moves between the engine's batches, with the
time left (issue #47 item 5)."""

from __future__ import annotations

import threading

import pytest

from app.widgets.charts.prefill_progress import PrefillProgress


def test_prompt_reading_moves_between_batches_and_never_past_the_one_under_way():
    p = PrefillProgress()
    p.update(0, 2048, now=10.0)
    assert p.reading and p.text(10.0) == "Reading the prompt… 0% (0/2,048 tokens)"  # no rate yet: no guess
    p.update(512, 2048, now=14.0)  # 128 tokens/s
    assert p.estimate(14.0) == (512, 12.0)
    assert p.estimate(15.0) == (640, 11.0)  # a second later: 128 more, estimated
    assert p.estimate(30.0)[0] == 1023  # a slow batch: at most to the end of the one under way
    assert p.text(15.0) == "Reading the prompt… 31% (640/2,048 tokens, about 11 s left)"
    p.update(2048, 2048, now=26.0)
    assert not p.reading


def test_reading_says_how_much_of_the_prompt_came_from_the_cache():
    """Issue #47 item 5: a prompt the prompt cache (or the context) mostly held says so."""
    p = PrefillProgress()
    p.update(0, 219, now=0.0, cached=2980)
    assert p.text(0.0) == "Reading the prompt… 0% (0/219 tokens; 2,980 of 3,200 from cache)"
    p.update(100, 219, now=2.0, cached=2980)
    assert p.text(2.0) == "Reading the prompt… 45% (100/219 tokens; 2,980 of 3,200 from cache, about 2 s left)"
    p.reset()
    p.update(0, 40, now=0.0)
    assert "cache" not in p.text(0.0)  # nothing held: nothing said


def test_a_long_wait_is_told_in_minutes():
    p = PrefillProgress()
    p.update(0, 60000, now=0.0)
    p.update(512, 60000, now=4.0)
    assert p.text(4.0).endswith("about 8 min left)")


pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")


def test_the_status_line_says_when_the_draft_reads_the_prompt(qtbot, tmp_path, monkeypatch, tiny_target):
    from engine.decoding.decoder import Decoder

    from test_gui_chat_input import _load, _make_window

    w = _make_window(qtbot, tmp_path, monkeypatch)
    _load(qtbot, w, tiny_target, tiny_target)
    chat = w.chat
    release = threading.Event()
    real = Decoder._read_draft

    def held(self, run, limit):  # the reading waits until the test has seen the line
        assert release.wait(30)
        return real(self, run, limit)

    monkeypatch.setattr(Decoder, "_read_draft", held)
    chat.apply_settings({"drafter": "model", "lookahead": 3, "temperature": 0.0, "max_tokens": 8})
    chat.prompt.setPlainText("the value of")
    chat.send()
    try:
        qtbot.waitUntil(lambda: "draft reading the prompt: 0 of " in chat.stats_label.text(), timeout=20000)
    finally:
        release.set()
    qtbot.waitUntil(lambda: chat.worker is None, timeout=30000)
    assert "draft reading" not in chat.stats_label.text()
    w.close()
