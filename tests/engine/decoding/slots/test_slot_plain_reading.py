"""The parallel slots read long prompts on the target's plain twin (engine/llamacpp/plain_reader.py):
a chunk per scheduler step, the running slots' passes between, the state handed to the slot's
sequence at the end; answers as a lone read's; a refused state or a cancel loses nothing."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Iterator

import pytest

from engine import Engine
from engine.decoding.cancel import CancelToken
from engine.decoding.drafting.lookup_drafter import PromptLookupDrafter
from engine.decoding.events import DoneEvent, PrefillEvent, TokenEvent
from engine.decoding.request import GenerationRequest
from engine.decoding.slots.scheduler import SlotScheduler
from engine.llamacpp import plain_reader
from engine.llamacpp.llama import Model
from engine.llamacpp.plain_reader import PlainReader
from engine.llamacpp.runtime import RuntimeParams
from engine.llamacpp.sequences import SharedContext
from engine.models import calibration


def _prompts(model: Model, n: int, length: int) -> list[list[int]]:
    ids = model.tokenize(" ".join(["the value of data is"] * 400), add_special=False)
    return [ids[i * 7: i * 7 + length] for i in range(n)]


@contextlib.contextmanager
def _slots(path, n: int, mode: str) -> Iterator[tuple[Engine, SlotScheduler]]:
    eng = Engine(path, n_ctx=2048, n_batch=64, metrics_log=False, calibration=False, prompt_cache=False,
                 plain_reading=mode)
    try:
        sched = SlotScheduler(eng.target, n, runtime=RuntimeParams(n_ctx=2048 * n, n_batch=64),
                              drafters={"lookup": lambda: PromptLookupDrafter()}, reader=eng.reader)
        try:
            yield eng, sched
        finally:
            sched.close()
    finally:
        eng.close()


def _ask(sched: SlotScheduler, prompt: list[int], out: dict, key, max_tokens: int = 12, cancel=None) -> None:
    stamps = []
    for ev in sched.stream(prompt, GenerationRequest(prompt, lookahead=3, max_tokens=max_tokens), cancel):
        stamps.append((time.perf_counter(), ev))
    out[key] = stamps


def _answer(stamps) -> list[int]:
    done = stamps[-1][1]
    assert isinstance(done, DoneEvent), done
    return done.tokens


@pytest.fixture(scope="module")
def alone(tiny_target):
    """Each prompt's answer read and written in a lone engine, without the twin."""
    eng = Engine(tiny_target, n_ctx=2048, n_batch=64, metrics_log=False, calibration=False, prompt_cache=False,
                 plain_reading="never")
    memo: dict[tuple, list[int]] = {}

    def answer(prompt):
        if tuple(prompt) not in memo:
            eng.forget_prompts()
            memo[tuple(prompt)] = eng.generate(prompt, draft_model="lookup", lookahead=3, max_tokens=12).tokens
        return memo[tuple(prompt)]

    yield answer
    eng.close()


def test_slots_reading_on_the_twin_answer_as_a_lone_read(tiny_target, alone):
    """Three prompts of 300 tokens at once in two slots, every prompt read on the twin."""
    with _slots(tiny_target, 2, "always") as (eng, sched):
        prompts = _prompts(eng.target, 3, 300)
        out: dict = {}
        threads = [threading.Thread(target=_ask, args=(sched, p, out, i)) for i, p in enumerate(prompts)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert eng.reader._twin is not None
        for i, p in enumerate(prompts):
            reads = [e.done for _, e in out[i] if isinstance(e, PrefillEvent)]
            assert reads == sorted(reads) and reads[-1] == len(p) - 1 and len(reads) >= 3, reads
            assert _answer(out[i]) == alone(p)


def test_a_stream_goes_on_while_another_slot_reads_on_the_twin(tiny_target):
    """A 1,500-token prompt read a chunk per step: the running slot's tokens arrive between its
    first and last chunk, not after."""
    with _slots(tiny_target, 2, "always") as (eng, sched):
        short, long = _prompts(eng.target, 2, 1500)
        short = short[:20]
        out: dict = {}
        first = threading.Thread(target=_ask, args=(sched, short, out, "short"), kwargs={"max_tokens": 400})
        first.start()
        while "short" not in out and not any(sched.busy()):
            time.sleep(0.001)
        _ask(sched, long, out, "long")
        first.join(120)
        reading = [t for t, e in out["long"] if isinstance(e, PrefillEvent)]
        streamed = [t for t, e in out["short"] if isinstance(e, TokenEvent)]
        assert len(reading) > 10
        assert any(reading[1] < t < reading[-1] for t in streamed), "the running slot stalled while the twin read"


def test_a_refused_state_is_read_again_in_the_shared_passes(tiny_target, alone, monkeypatch):
    """Where llama.cpp refused the twin's state, the slot's sequence reads its prompt again: the
    answer is the same, only later."""
    monkeypatch.setattr(plain_reader, "_hand_seq", lambda src, dst, seq: False)
    with _slots(tiny_target, 2, "always") as (eng, sched):
        prompt = _prompts(eng.target, 1, 300)[0]
        out: dict = {}
        _ask(sched, prompt, out, 0)
        assert _answer(out[0]) == alone(prompt)


def test_a_cancel_while_the_twin_reads_frees_the_slot(tiny_target, alone):
    with _slots(tiny_target, 1, "always") as (eng, sched):
        long = _prompts(eng.target, 1, 1500)[0]
        cancel = CancelToken()
        events = []
        for ev in sched.stream(long, GenerationRequest(long, max_tokens=10), cancel):
            events.append(ev)
            if isinstance(ev, PrefillEvent) and ev.done >= 128:
                cancel.cancel()
        assert isinstance(events[-1], DoneEvent) and events[-1].stats.finish_reason == "cancelled"
        until = time.monotonic() + 10
        while any(sched.busy()) and time.monotonic() < until:  # freed just after its end is out
            time.sleep(0.01)
        assert sched.busy() == [False]
        prompt = _prompts(eng.target, 1, 300)[0]
        out: dict = {}
        _ask(sched, prompt, out, 0)
        assert _answer(out[0]) == alone(prompt), "the slot reads and answers afresh"


def test_the_slots_measure_the_twin_from_their_own_passes(tiny_target, tmp_path, monkeypatch):
    """A repacked target with no verdict: the slots' passes that only read tell the target's rate;
    the next long prompt is read on the twin, which tells its own, and the verdict is kept."""
    from engine.llamacpp.quantize import quantize

    monkeypatch.setattr(calibration, "store_path", lambda: tmp_path / "calibration.json")
    q4 = quantize(tiny_target, tmp_path / "t.q4_0.gguf", "q4_0")
    model = Model(q4)
    if not model.repacked:
        model.close()
        pytest.skip("this CPU's llama.cpp build repacks no Q4_0 weights")
    shared = SharedContext(model, RuntimeParams(n_ctx=4096, n_batch=64), 2)
    reader = PlainReader(model)
    assert not reader.plan_seq(shared, 0, 1000), "no rate known: read on the target"
    reader.observe_target(shared.n_threads, 512, 0.5)
    assert reader.plan_seq(shared, 0, 1000) and not reader.plan_seq(shared, 0, 100)
    prompt = _prompts(model, 1, 300)[0]
    done = list(reader.feed_seq(shared, 1, prompt))
    assert done[-1] == len(prompt) and shared.tokens[1] == prompt and shared.tokens[0] == []
    assert reader.verdict is not None and reader.verdict["target_tok_s"] == 1024.0
    assert (tmp_path / "calibration.json").exists()
    shared.close()
    reader.close()
    model.close()
