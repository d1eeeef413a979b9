"""The replay clock without Qt: virtual time at a speed that can change mid-replay, which
recorded tokens are due, and what each pane says about its speed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.replay import ReplayClock, live_rate
from engine.decoding.events import TokenEvent

ROOT = Path(__file__).resolve().parents[2]


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _tokens(n: int, dt: float, word: str, t0: float = 0.1) -> list[TokenEvent]:
    return [TokenEvent(f"{word}{i} ", i, "plain", i, i, t0 + i * dt) for i in range(n)]


def test_the_clock_loads_no_qt():
    code = "import sys, app.replay; sys.exit(any(m.startswith('PySide6') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={"PYTHONPATH": str(ROOT)}).returncode == 0


def test_live_rate():
    assert live_rate([]) == 0.0
    assert live_rate(_tokens(1, 0.1, "a")) == 0.0
    assert live_rate(_tokens(11, 0.1, "a")) == pytest.approx(10.0)


def test_tokens_come_due_at_their_recorded_time_times_the_speed():
    now = FakeTime()
    runs = {"target": _tokens(10, 0.1, "t"), "speculative": _tokens(10, 0.05, "s")}
    clock = ReplayClock(runs, speed=2.0, now=now)
    assert clock.time() == 0.0 and clock.end == pytest.approx(1.0)
    clock.start()
    assert clock.advance() == {"target": [], "speculative": []}
    now.now += 0.11  # 0.22 s of recorded time at 2x
    due = clock.advance()
    assert clock.time() == pytest.approx(0.22)
    assert [ev.text for ev in due["target"]] == ["t0 ", "t1 "]
    assert [ev.text for ev in due["speculative"]] == ["s0 ", "s1 ", "s2 "]
    assert clock.advance() == {"target": [], "speculative": []}, "each token is handed out once"
    assert not clock.done
    now.now += 1.0
    due = clock.advance()
    assert len(due["target"]) == 8 and len(due["speculative"]) == 7
    assert clock.done and clock.shown == {"target": 10, "speculative": 10}


def test_a_speed_change_keeps_the_virtual_time_continuous():
    now = FakeTime()
    clock = ReplayClock({"a": _tokens(5, 1.0, "a")}, speed=1.0, now=now)
    clock.start()
    now.now += 1.0
    assert clock.time() == pytest.approx(1.0)
    clock.set_speed(4.0)
    assert clock.time() == pytest.approx(1.0), "no jump when the speed changes"
    now.now += 0.5
    assert clock.time() == pytest.approx(3.0)
    clock.set_speed(0.5)
    now.now += 2.0
    assert clock.time() == pytest.approx(4.0)


def test_restart_and_finish():
    now = FakeTime()
    runs = {"a": _tokens(4, 0.1, "a"), "b": []}
    clock = ReplayClock(runs, now=now)
    clock.start()
    now.now += 0.15
    assert len(clock.advance()["a"]) == 1
    rest = clock.finish()
    assert [ev.text for ev in rest["a"]] == ["a1 ", "a2 ", "a3 "] and rest["b"] == []
    assert clock.advance() == {"a": [], "b": []}
    clock.start()
    assert clock.time() == 0.0 and clock.shown == {"a": 0, "b": 0}


def test_speed_text_per_pane():
    now = FakeTime()
    runs = {"a": _tokens(3, 0.5, "a"), "empty": []}
    clock = ReplayClock(runs, now=now)
    clock.start()
    assert clock.speed_text("a") == "reading prompt…" and clock.speed_text("empty") == ""
    now.now += 0.2  # the first token only: no rate yet
    clock.advance()
    assert clock.speed_text("a") == "reading prompt…"
    now.now += 0.5
    clock.advance()
    assert clock.speed_text("a") == "2.0 tok/s"
    now.now += 5
    clock.advance()
    assert clock.speed_text("a") == "✓ 1.10 s · 2.0 tok/s"
    assert clock.speed_text("a", final_rate=3.31) == "✓ 1.10 s · 3.3 tok/s"


def test_the_replay_is_not_done_until_every_token_was_handed_out():
    """The clock passing the end between `advance()` and `done` (a slow frame) must not end
    the replay one frame short: CI once lost a pane's last tokens that way."""
    now = FakeTime()
    clock = ReplayClock({"a": _tokens(3, 0.5, "a")}, now=now)
    clock.start()
    now.now += 0.7
    assert len(clock.advance()["a"]) == 2
    now.now += 5.0  # past the end, but the last token has not been handed out yet
    assert not clock.done
    assert [ev.text for ev in clock.advance()["a"]] == ["a2 "]
    assert clock.done
