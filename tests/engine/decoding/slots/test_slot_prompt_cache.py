"""The prompt cache in the parallel slots (`tandem serve`'s default on most machines): a document
read in one slot and pushed out by another prompt, asked again in any slot or after a restart,
is read only past the shared part, and the answer is a cold read's. A lone context's states are
not a slot's (llama.cpp's bytes name the context's KV streams) and are never loaded into one."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Iterator

import pytest

from engine import Engine
from engine.decoding.drafting.lookup_drafter import PromptLookupDrafter
from engine.decoding.events import DoneEvent, PrefillEvent, TokenEvent
from engine.decoding.prompt_cache import CacheLimits
from engine.decoding.request import GenerationRequest
from engine.decoding.slots.scheduler import SlotScheduler
from engine.llamacpp.runtime import RuntimeParams

LIMITS = CacheLimits(min_tokens=16)  # the tiny model's prompts are short: keep them anyway
DOC = list(range(300, 450))  # a "document" of 150 tokens
DOC2 = list(range(200, 300))
ASK1, ASK2 = [400, 401, 402], [410, 411, 412, 413]


def _engine(path):
    return Engine(path, n_ctx=512, metrics_log=False, calibration=False, prompt_cache=LIMITS)


@contextlib.contextmanager
def _slots(path, n: int) -> Iterator[tuple[Engine, SlotScheduler]]:
    """An engine with a prompt cache and `n` slots over its target that use it; both closed after."""
    eng = _engine(path)
    try:
        sched = SlotScheduler(eng.target, n, runtime=RuntimeParams(n_ctx=512 * n, n_batch=64),
                              drafters={"lookup": lambda: PromptLookupDrafter()}, prompt_cache=eng.prompt_cache)
        try:
            yield eng, sched
        finally:
            sched.close()
    finally:
        eng.close()  # finishes writing its files


def _ask(sched: SlotScheduler, prompt: list[int], max_tokens: int = 12) -> tuple[int, list[int]]:
    """(prompt tokens the slot did not read, the answer)."""
    events = list(sched.stream(prompt, GenerationRequest(prompt, lookahead=3, max_tokens=max_tokens)))
    first = next(e for e in events if isinstance(e, PrefillEvent))
    assert isinstance(events[-1], DoneEvent), events[-1]
    return first.cached, events[-1].tokens


@pytest.fixture(scope="module")
def cold(tiny_target):
    """A cold read's answer per prompt (a lone engine with no prompt cache, emptied each time)."""
    eng = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False, prompt_cache=False)
    memo: dict[tuple, list[int]] = {}

    def answer(prompt):
        if tuple(prompt) not in memo:
            eng.forget_prompts()
            memo[tuple(prompt)] = eng.generate(prompt, draft_model="lookup", lookahead=3, max_tokens=12).tokens
        return memo[tuple(prompt)]

    yield answer
    eng.close()


def test_a_document_pushed_out_of_its_slot_is_restored_from_the_cache(tiny_target, cold):
    with _slots(tiny_target, 1) as (eng, sched):
        assert _ask(sched, DOC + ASK1) == (0, cold(DOC + ASK1))
        assert _ask(sched, DOC2 + ASK1)[0] == 0  # the one slot now holds the other document
        cached, answer = _ask(sched, DOC + ASK2)
        assert cached == len(DOC) and answer == cold(DOC + ASK2)
        done = list(sched.stream(DOC + ASK1, GenerationRequest(DOC + ASK1, max_tokens=4)))[-1]
        assert done.stats.cached_tokens == len(DOC)  # as its answer's stats say (the slot kept the document)


def test_a_state_kept_from_one_slot_serves_another(tiny_target, cold):
    """Slot 0 read the document and is busy with a long answer: the question about it goes to
    slot 1, which loads slot 0's kept state onto its own sequence."""
    with _slots(tiny_target, 2) as (eng, sched):
        assert _ask(sched, DOC + ASK1)[0] == 0
        started, long_done = threading.Event(), []

        def long_answer() -> None:
            for ev in sched.stream(DOC2 + ASK1, GenerationRequest(DOC2 + ASK1, max_tokens=150)):
                if isinstance(ev, TokenEvent):
                    started.set()
                long_done.append(ev)

        t = threading.Thread(target=long_answer)
        t.start()
        try:
            assert started.wait(60)
            assert sched.busy().count(True) == 1
            cached, answer = _ask(sched, DOC + ASK2)
        finally:
            t.join(120)
        assert cached == len(DOC) and answer == cold(DOC + ASK2)
        assert isinstance(long_done[-1], DoneEvent)
        assert [s.finished for s in sched.slots] == [2, 1] or [s.finished for s in sched.slots] == [1, 2]


def test_after_a_restart_the_slots_read_the_kept_state_from_disk(tiny_target, cold):
    with _slots(tiny_target, 2) as (_, sched):
        _ask(sched, DOC + ASK1)
    with _slots(tiny_target, 2) as (eng, sched):
        assert eng.prompt_cache.memory_used == 0
        cached, answer = _ask(sched, DOC + ASK2)
        assert cached == len(DOC) and answer == cold(DOC + ASK2)


def test_a_lone_contexts_state_is_never_loaded_into_a_slot(tiny_target, cold):
    with _slots(tiny_target, 2) as (eng, sched):
        eng.generate(DOC + ASK1, max_tokens=12)  # kept by the engine's lone decoder
        assert eng.prompt_cache.memory_used > 0
        cached, answer = _ask(sched, DOC + ASK2)
        assert cached == 0 and answer == cold(DOC + ASK2)  # read whole, and right
        # the slot keeps its state after its answer is out (in the slots' thread): one of each kind then
        deadline = time.monotonic() + 30
        while len({e.identity for e in eng.prompt_cache._entries}) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len({e.identity for e in eng.prompt_cache._entries}) == 2


def test_a_hybrid_slot_restores_the_state_kept_at_its_prompts_end(tiny_hybrid):
    """A recurrent state cannot be cut back: the slot keeps one at the prompt's end, and the
    same prompt again (regenerate) starts from it after another prompt took the slot."""
    lone = Engine(tiny_hybrid, n_ctx=512, metrics_log=False, calibration=False, prompt_cache=False)
    try:
        want = lone.generate(DOC + ASK1, draft_model="lookup", lookahead=3, max_tokens=12).tokens
    finally:
        lone.close()
    with _slots(tiny_hybrid, 1) as (_, sched):
        assert _ask(sched, DOC + ASK1) == (0, want)
        assert _ask(sched, DOC2 + ASK1)[0] == 0
        assert _ask(sched, DOC + ASK1) == (len(DOC + ASK1) - 1, want)
