"""engine.decoding.queue.GenerationQueue on its own: order, bounds, cancel, listeners (no model)."""

from __future__ import annotations

import threading
import time

import pytest

from engine.errors import Cancelled
from engine.decoding.events import DoneEvent, PrefillEvent, RunStats, TokenEvent
from engine.decoding.queue import GenerationQueue, QueueFull


class FakeEngine:
    """Yields a prefill, a few tokens and a done event; records which prompt ran when."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.active = 0
        self.overlap = False

    def stream(self, prompt, cancel=None, **kw):
        self.active += 1
        self.overlap |= self.active > 1
        self.ran.append(prompt)
        try:
            yield PrefillEvent(0, 1)
            for i in range(3):
                time.sleep(0.002)
                yield TokenEvent(f"{prompt}{i}", i, "plain", i, i, 0.0)
            yield DoneEvent(prompt, [0, 1, 2], RunStats(generated_tokens=3))
        finally:
            self.active -= 1


def run(q: GenerationQueue, eng: FakeEngine, job, prompt: str) -> list:
    return list(q.stream(eng, prompt, job))


def test_jobs_run_one_at_a_time_in_the_order_they_came():
    q, eng = GenerationQueue(max_waiting=50), FakeEngine()
    hold = q.submit("test")
    q.wait_turn(hold)
    threads = []
    for i in range(12):
        job = q.submit("server")
        t = threading.Thread(target=run, args=(q, eng, job, f"p{i:02d}"))
        t.start()
        threads.append(t)
    assert q.waiting == 12 and q.busy
    q.finish(hold)
    for t in threads:
        t.join(10)
    assert eng.ran == [f"p{i:02d}" for i in range(12)]
    assert not eng.overlap and not q.busy and q.running is None


def test_the_line_is_bounded_but_an_unbounded_caller_always_gets_in():
    q = GenerationQueue(max_waiting=2)
    first = q.submit("server")  # nothing runs yet: always admitted
    q.wait_turn(first)
    q.submit("server")
    q.submit("server")
    with pytest.raises(QueueFull) as e:
        q.submit("server")
    assert e.value.retry_after_s >= 1 and "2 request(s) already waiting" in str(e.value)
    q.submit("chat", bounded=False)
    assert q.waiting == 3


def test_cancel_while_waiting_leaves_the_line():
    q, eng = GenerationQueue(), FakeEngine()
    hold = q.submit("test")
    q.wait_turn(hold)
    job = q.submit("server")
    errors = []

    def waiter():
        try:
            run(q, eng, job, "x")
        except Cancelled as e:
            errors.append(e)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.05)
    job.cancel.cancel()
    t.join(5)
    assert errors and q.waiting == 0 and eng.ran == []
    q.finish(hold)
    assert not q.busy


def test_listeners_see_every_event_and_a_broken_one_changes_nothing():
    q, eng = GenerationQueue(), FakeEngine()
    seen = []
    q.add_listener(lambda job, ev: 1 / 0)
    q.add_listener(lambda job, ev: seen.append((job.source, ev.kind)))
    events = run(q, eng, q.submit("chat", bounded=False), "a")
    assert [e.kind for e in events] == ["prefill", "token", "token", "token", "done"]
    assert seen == [("chat", e.kind) for e in events]


def test_cancel_all_reaches_running_and_waiting_jobs_of_one_source():
    q = GenerationQueue()
    a = q.submit("server")
    q.wait_turn(a)
    b, c = q.submit("server"), q.submit("chat")
    assert q.cancel_all("server") == 2
    assert a.cancel.cancelled and b.cancel.cancelled and not c.cancel.cancelled


def test_side_by_side_jobs_run_together_up_to_the_slots_and_in_line_with_the_others():
    """The server's parallel slots: side-by-side jobs share the turn (at most `slots` at once);
    a job that runs alone (the app's chat) waits for them, and they wait for it, in arrival order."""
    q = GenerationQueue()
    q.slots = 2
    a, b, c = (q.submit("server", side_by_side=True) for _ in range(3))
    q.wait_turn(a)
    q.wait_turn(b)  # beside a
    assert q.running_side_by_side == 2 and q.busy and q.running in (a, b)
    started: list[str] = []

    def take(job, name: str) -> None:
        q.wait_turn(job)
        started.append(name)

    alone = q.submit("chat", bounded=False)
    d = q.submit("server", side_by_side=True)
    threads = [threading.Thread(target=take, args=(j, n)) for j, n in ((c, "c"), (alone, "alone"), (d, "d"))]
    for t in threads:
        t.start()
    time.sleep(0.1)
    assert started == []  # c waits for a free slot
    q.finish(a)
    time.sleep(0.1)
    assert started == ["c"]  # the chat is next in line: it waits until b and c are done, d behind it
    q.finish(b)
    q.finish(c)
    time.sleep(0.1)
    assert started == ["c", "alone"] and q.running is alone
    q.finish(alone)
    threads[2].join(2)
    assert started == ["c", "alone", "d"] and q.running is d
    q.finish(d)
    assert not q.busy
    assert q.cancel_all() == 0
