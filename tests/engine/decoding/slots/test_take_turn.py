"""`take_turn`, the one way a generation takes its turn (the app's chat answers and each model
turn of its tool loop): in a slot beside the others when the slots run its draft, else the
engine's queue alone; the place in line taken only when iterated and given back at its end, a
Stop while it waits ends the wait. An engine and slots that only stream (no llama.cpp)."""

from __future__ import annotations

import threading

import pytest

from engine.decoding.cancel import CancelToken
from engine.decoding.events import DoneEvent, RunStats
from engine.decoding.queue import GenerationQueue
from engine.decoding.request import GenerationRequest
from engine.decoding.slots.turn import take_turn
from engine.errors import Cancelled


def _done(text: str) -> DoneEvent:
    return DoneEvent(text, [1], RunStats(finish_reason="stop"))


class Streaming:
    """An engine whose `stream` answers "alone" and whose prompt is three tokens."""

    def __init__(self) -> None:
        self.queue = GenerationQueue()
        self.queue.slots = 2

    def prompt_input(self, request):
        return [1, 2, 3], []

    def stream(self, request, cancel=None):
        yield _done("alone")


class Slots:
    drafts = ["none", "lookup"]

    def __init__(self) -> None:
        self.asked: list = []

    def stream(self, tokens, request, cancel, *, draft, images):
        self.asked.append((tokens, draft))
        yield _done("in a slot")


REQ = GenerationRequest("hello")


def test_in_a_slot_beside_the_others_when_the_slots_run_the_draft():
    eng, slots, seen = Streaming(), Slots(), []
    eng.queue.add_listener(lambda job, ev: seen.append((job.source, job.side_by_side, ev.text)))
    beside = eng.queue.submit("server", side_by_side=True)
    eng.queue.wait_turn(beside)  # a server request runs in the other slot
    events = list(take_turn(eng, REQ, slots=slots, draft="lookup"))
    assert [ev.text for ev in events] == ["in a slot"] and slots.asked == [([1, 2, 3], "lookup")]
    assert seen == [("chat", True, "in a slot")]  # the queue's listeners see it, as a server request's
    eng.queue.finish(beside)
    assert not eng.queue.busy  # its turn given back


def test_without_a_draft_the_slots_run_it_takes_the_queue_alone():
    eng, slots = Streaming(), Slots()
    assert [ev.text for ev in take_turn(eng, REQ, slots=slots, draft=None)] == ["alone"]
    assert [ev.text for ev in take_turn(eng, REQ)] == ["alone"] and not slots.asked and not eng.queue.busy


def test_the_place_in_line_is_taken_when_iterated_and_given_back_when_closed():
    eng = Streaming()
    turn = take_turn(eng, REQ, slots=Slots(), draft="none")
    assert not eng.queue.busy  # made, not begun: no place held (the tool loop makes one per model turn)
    next(turn)
    assert eng.queue.running_side_by_side == 1
    turn.close()
    assert not eng.queue.busy


def test_stop_while_it_waits_for_a_slot_ends_the_wait():
    eng, cancel = Streaming(), CancelToken()
    q = eng.queue
    holder = q.submit("race")
    q.wait_turn(holder)  # the engine held: no slot can start
    threading.Timer(0.2, cancel.cancel).start()
    with pytest.raises(Cancelled):
        list(take_turn(eng, REQ, cancel, slots=Slots(), draft="none"))
    q.finish(holder)
    assert not q.busy
