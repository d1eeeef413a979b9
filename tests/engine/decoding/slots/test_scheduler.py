"""Parallel slots on tiny models: each request's output is the one it gets alone on the
single-sequence decoder, whatever runs beside it (1 to 8 slots, prompts of other lengths read
in chunks, other limits, staggered arrivals, a cancel); bad requests fail alone."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any, Callable

import pytest

from engine import Engine
from engine.decoding.drafting.cost_model import BatchLoad
from engine.decoding.drafting.lookup_drafter import PromptLookupDrafter
from engine.decoding.drafting.suffix_drafter import SuffixDrafter
from engine.decoding.events import DoneEvent, PrefillEvent, StepEvent, TokenEvent
from engine.decoding.request import GenerationRequest
from engine.decoding.sampling.params import SamplingParams
from engine.decoding.slots.scheduler import SlotScheduler
from engine.errors import PromptError, TandemError
from engine.llamacpp.runtime import RuntimeParams

PROMPTS = ["the value of", "def count items def count items def count", "return total and",
           "import data for the class import data for the class", "while item is not",
           " ".join(["the list of items in the data"] * 12),  # longer than a batch of 64: read in chunks
           "class with value", "print the total"]
MAX_TOKENS = [40, 75, 23, 90, 8, 60, 1, 51]


@pytest.fixture(scope="module")
def eng(tiny_target):
    e = Engine(tiny_target, n_ctx=512, metrics_log=False)
    yield e
    e.close()


def _drafter(draft: str | None, n_vocab: int):
    """Each slot's drafter: none, prompt lookup, or a suffix drafter over past answers (its own,
    in memory) with lookup beside it."""
    if draft == "suffix":
        return lambda: SuffixDrafter(n_vocab=n_vocab, with_lookup=True)
    return (lambda: PromptLookupDrafter()) if draft == "lookup" else (lambda: None)


def _requests(eng: Engine, sampling: SamplingParams | None = None, count: int = 10) -> list[GenerationRequest]:
    out = []
    for i in range(count):
        toks = eng.tokens_for(PROMPTS[i % len(PROMPTS)])
        kw = {"sampling": sampling.__class__(**{**sampling.__dict__, "seed": 100 + i})} if sampling else {}
        out.append(GenerationRequest(toks, lookahead=1 + i % 5, max_tokens=MAX_TOKENS[i % len(MAX_TOKENS)] + i, **kw))
    return out


def _alone(eng: Engine, requests: list[GenerationRequest], draft: str | None) -> list[DoneEvent]:
    dec = eng.decoder(draft)
    out = []
    for r in requests:
        dec.forget_prompts()
        out.append([e for e in dec.run(r.prompt, r) if isinstance(e, DoneEvent)][0])
    return out


def sampled_pairs(sched: Any, prompt: list[int], n: int, workers: int, params: Any) -> dict[tuple[int, int], int]:
    """Two sampled tokens after `prompt`, seeds 0..n-1 spread over `workers` threads drafting
    k=2 in `sched`'s slots: how often each pair came (for a chi-square against the target's
    exact two-token distribution); `sched` is closed at the end."""
    from engine.decoding.drafting.lookahead import Fixed

    counts: dict[tuple[int, int], int] = {}
    lock = threading.Lock()

    def draw(w: int) -> None:
        for seed in range(w, n, workers):
            r = GenerationRequest(prompt, lookahead=Fixed(2), max_tokens=2, sampling=replace(params, seed=seed))
            done = list(sched.stream(prompt, r))[-1]
            assert isinstance(done, DoneEvent) and len(done.tokens) == 2
            with lock:
                counts[tuple(done.tokens)] = counts.get(tuple(done.tokens), 0) + 1

    try:
        at_once([lambda w=w: draw(w) for w in range(workers)])
    finally:
        sched.close()
    return counts


def at_once(calls: list[Callable[[], Any]], stagger_s: float = 0.0) -> list[Any]:
    """Each call from a thread of its own, the i-th starting i staggers later; their results in
    order (a call that raised fails the test with its error)."""
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    def go(i: int) -> None:
        time.sleep(stagger_s * i)
        try:
            results[i] = calls[i]()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            errors.append(e)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    return results


def _together(sched: SlotScheduler, requests: list[GenerationRequest], stagger_s: float = 0.003) -> list[list]:
    """Every request from its own thread, the i-th starting i staggers later; each one's events."""
    return at_once([lambda r=r: list(sched.stream(r.prompt, r)) for r in requests], stagger_s)


def _check_same(eng: Engine, requests, alone: list[DoneEvent], events: list[list], label: str) -> None:
    for i, (r, ref, evs) in enumerate(zip(requests, alone, events)):
        done = evs[-1]
        assert isinstance(done, DoneEvent), f"{label}: request {i} ended with {done!r}"
        if done.tokens != ref.tokens:
            div = eng.first_divergence(r.prompt, ref.tokens, done.tokens)
            where = "one is the other's prefix" if div is None else div.describe(eng.target)
            pytest.fail(f"{label}: request {i} wrote {done.text!r}, alone {ref.text!r}: {where}")
        assert done.text == ref.text and done.stats.finish_reason == ref.stats.finish_reason
        assert "".join(e.text for e in evs if isinstance(e, TokenEvent)) == done.text
        assert done.stats.drafted == sum(e.drafted for e in evs if isinstance(e, StepEvent))


@pytest.mark.parametrize("draft", [None, "lookup", "suffix"])
@pytest.mark.parametrize("n_slots", [1, 2, 4, 8])
def test_greedy_output_of_each_request_is_its_output_alone(eng, draft, n_slots):
    requests = _requests(eng)
    alone = _alone(eng, requests, draft)
    sched = SlotScheduler(eng.target, n_slots, runtime=RuntimeParams(n_ctx=512 * n_slots, n_batch=64),
                          drafters={"d": _drafter(draft, eng.target.n_vocab)})
    try:
        events = _together(sched, requests)
    finally:
        sched.close()
    _check_same(eng, requests, alone, events, f"{n_slots} slots, draft {draft}")
    long = events[5]  # its prompt is longer than a batch: read over several steps, beside the others
    assert len([e for e in long if isinstance(e, PrefillEvent)]) >= 3
    if draft is not None:
        drafted = sum(e[-1].stats.drafted for e in events)
        accepted = sum(e[-1].stats.accepted for e in events)
        assert 0 < accepted < drafted  # drafts were accepted, and rejected tails rolled back per slot


def test_auto_prices_each_slots_drafts_against_the_whole_pass_it_joins(eng):
    """Auto in a slot weighs a draft against the rest of the shared pass: each slot plans under
    the load of the slots planned before it plus a row and a token for each one after it (prompt
    chunks read beside are no load), and the slots' cost model learns the time of whole passes (all their
    rows, once), not one slot's rows at the pass's time, nor passes that read a prompt's chunk (their
    rows need no logits). The output stays each request's alone."""
    requests = [replace(r, lookahead="auto") for r in _requests(eng, count=4)]
    alone = _alone(eng, requests, "lookup")
    sched = SlotScheduler(eng.target, 4, runtime=RuntimeParams(n_ctx=2048, n_batch=64),
                          drafters={"d": _drafter("lookup", eng.target.n_vocab)})
    loads, passes, observed = [], [], []
    cost = sched.costs["d"]
    decode, observe = sched.shared.decode, cost.observe_verify
    steps = type(sched.slots[0].decoder).planning

    def planning(dec, run):
        loads.append(cost.load)
        return steps(dec, run)

    def shared_pass(parts):
        passes.append((sum(len(p.tokens) for p in parts), any(p.logits == "none" for p in parts)))
        return decode(parts)

    def observing(n, seconds):
        observed.append(n)
        observe(n, seconds)

    for slot in sched.slots:
        for dec in slot.decoders.values():
            dec.planning = planning.__get__(dec)
    sched.shared.decode, cost.observe_verify = shared_pass, observing
    try:
        events = _together(sched, requests, stagger_s=0.0)
    finally:
        sched.close()
    _check_same(eng, requests, alone, events, "4 slots, auto")
    assert observed == [n for n, reads in passes if not reads]  # every step's pass priced once, whole
    assert any(reads for _, reads in passes)  # (a pass reading a prompt's chunk is not a verify pass)
    assert max(observed) >= 4 and any(load.rows >= 3 and load.tokens >= 1 for load in loads), (passes, loads)
    assert cost.load == BatchLoad()  # alone again after planning


def test_a_prompt_read_beside_a_running_slot_is_no_load_on_its_planning(eng):
    """While one slot steps and another reads a long prompt in chunks of the same passes, Auto in
    the stepping slot plans as if alone: that reading is done whatever it drafts, so counting its
    rows as load would make each draft row beside them look nearly free (commit e1f06aa). Once the
    reader steps too, it is load."""
    first = GenerationRequest(eng.tokens_for("the value of"), lookahead="auto", max_tokens=120)
    long_prompt = eng.tokens_for(" ".join(["the list of items in the data"] * 20))
    second = GenerationRequest(long_prompt, lookahead="auto", max_tokens=20)
    assert len(long_prompt) > 6 * 16  # read over several passes of 16 rows
    alone = _alone(eng, [first, second], "lookup")
    sched = SlotScheduler(eng.target, 2, runtime=RuntimeParams(n_ctx=1024, n_batch=16),
                          drafters={"d": _drafter("lookup", eng.target.n_vocab)})
    cost = sched.costs["d"]
    seen: list[tuple[int, int, BatchLoad]] = []  # (slots stepping, slots reading, the load) at each planning
    steps = type(sched.slots[0].decoder).planning

    def planning(dec, run):
        busy = [s for s in sched.slots if s.job is not None]
        seen.append((sum(s.todo is None for s in busy), sum(s.todo is not None for s in busy), cost.load))
        return steps(dec, run)

    for slot in sched.slots:
        for dec in slot.decoders.values():
            dec.planning = planning.__get__(dec)
    started = threading.Event()

    def run_first() -> list:
        out = []
        for ev in sched.stream(first.prompt, first):
            out.append(ev)
            if isinstance(ev, TokenEvent):
                started.set()
        return out

    def run_second() -> list:
        assert started.wait(60)
        return list(sched.stream(second.prompt, second))

    try:
        events = at_once([run_first, run_second])
    finally:
        sched.close()
    _check_same(eng, [first, second], alone, events, "2 slots, one reading")
    beside_a_read = [load for stepping, reading, load in seen if stepping == 1 and reading == 1]
    assert len(beside_a_read) >= 3, seen  # the long prompt took several passes beside the running slot
    assert all(load == BatchLoad() for load in beside_a_read), beside_a_read
    assert any(stepping == 2 and load.rows >= 1 for stepping, _, load in seen), seen  # a stepping slot is load


def test_seeded_sampling_in_four_slots_draws_what_each_request_draws_alone(eng):
    """Each request in a fresh sequence, its prompt read in one chunk as alone: the rows then differ
    from the lone decoder's only by the batch they share (~1e-6). (A slot reused reads a prompt
    from where it parts from the last one, in other chunks: a row moved by ~1e-6 once flipped a
    draw, request 5's token 46, with 64-token chunks after a 2-token shared start.)"""
    requests = _requests(eng, SamplingParams(temperature=0.9, top_k=40), count=4)
    alone = _alone(eng, requests, "lookup")
    sched = SlotScheduler(eng.target, 4, runtime=RuntimeParams(n_ctx=2048), drafters={"d": _drafter("lookup", eng.target.n_vocab)})
    try:
        events = _together(sched, requests)
    finally:
        sched.close()
    _check_same(eng, requests, alone, events, "4 slots, sampled")


def test_a_cancel_frees_its_slot_at_once_and_the_others_finish_as_alone(eng):
    requests = _requests(eng, count=4)
    long = GenerationRequest(eng.tokens_for("the value of"), max_tokens=400)
    alone = _alone(eng, requests, "lookup")
    sched = SlotScheduler(eng.target, 2, runtime=RuntimeParams(n_ctx=1024, n_batch=64), drafters={"d": _drafter("lookup", eng.target.n_vocab)})
    try:
        from engine.decoding.cancel import CancelToken

        cancel = CancelToken()
        seen: list = []

        def cancelled_run() -> None:
            for ev in sched.stream(long.prompt, long, cancel):
                seen.append(ev)
                if sum(isinstance(e, TokenEvent) for e in seen) == 5:
                    cancel.cancel()

        t = threading.Thread(target=cancelled_run)
        t.start()
        while not any(isinstance(e, TokenEvent) for e in seen):
            time.sleep(0.001)
        events = _together(sched, requests)  # one slot is held by the long run until its cancel
        t.join(60)
    finally:
        sched.close()
    done = seen[-1]
    assert isinstance(done, DoneEvent) and done.stats.finish_reason == "cancelled"
    assert 5 <= len(done.tokens) < 30  # ended within a step or two of the cancel, not at 400
    _check_same(eng, requests, alone, events, "beside a cancelled run")


def test_a_bad_request_fails_alone_and_the_others_run(eng):
    sched = SlotScheduler(eng.target, 2, runtime=RuntimeParams(n_ctx=256))
    try:
        with pytest.raises(PromptError, match="the prompt is empty"):
            list(sched.stream([]))
        per_slot = sched.shared.n_ctx_seq
        with pytest.raises(PromptError, match=f"context holds {per_slot}"):
            list(sched.stream([5] * (per_slot + 10)))
        good = eng.tokens_for("the value of")
        done = list(sched.stream(good, GenerationRequest(good, max_tokens=12)))[-1]
        assert isinstance(done, DoneEvent) and len(done.tokens) == 12
        assert sched.busy() == [False, False]
        with pytest.raises(TandemError, match="draft with none, not 'lookup'"):
            list(sched.stream(good, draft="lookup"))
    finally:
        sched.close()


@pytest.mark.parametrize("n_slots", [1, 2, 4])
def test_a_draft_model_drafts_in_every_slot_and_each_answer_is_its_answer_alone(eng, tiny_draft, n_slots):
    """Each slot's drafter drafts on a sequence of its own of one context on the one loaded draft
    model (the engine's `slot_drafter`, batched by the slots: test_batched_draft.py); greedy output
    is each request's output alone, with the draft model's drafts accepted and rejected tails
    rolled back in each slot's own draft sequence too."""
    requests = _requests(eng, count=6)
    alone = _alone(eng, requests, None)
    sched = SlotScheduler(eng.target, n_slots, runtime=RuntimeParams(n_ctx=512 * n_slots, n_batch=64),
                          drafters={"model": lambda: eng.slot_drafter(str(tiny_draft))})
    try:
        assert len({s.decoder.drafter.contexts[0].seq for s in sched.slots}) == n_slots  # a sequence each
        assert len({id(s.decoder.drafter.contexts[0].shared) for s in sched.slots}) == 1  # of one context
        assert len({id(s.decoder.drafter.model) for s in sched.slots}) == 1  # one draft model
        events = _together(sched, requests)
    finally:
        sched.close()
    _check_same(eng, requests, alone, events, f"{n_slots} slots, a draft model")
    by_model = sum(e[-1].stats.accepted_by.get("model", 0) for e in events)
    drafted = sum(e[-1].stats.drafted for e in events)
    assert by_model > 0 and sum(e[-1].stats.accepted for e in events) < drafted


def test_requests_of_different_drafts_share_the_slots_and_each_writes_its_answer_alone(eng):
    """A slot runs each request with the draft it names (the engine's free drafters): greedy output
    does not depend on it, and a slot used by one draft then another reads only what changed."""
    requests = _requests(eng, count=9)
    alone = _alone(eng, requests, None)
    kinds = ["none", "lookup", "suffix"]
    sched = SlotScheduler(eng.target, 3, runtime=RuntimeParams(n_ctx=1536, n_batch=64),
                          drafters={k: (lambda k=k: eng.slot_drafter(k)) for k in kinds})
    try:
        events = at_once([lambda i=i: list(sched.stream(requests[i].prompt, requests[i], draft=kinds[i % 3]))
                          for i in range(len(requests))], 0.003)
    finally:
        sched.close()
    _check_same(eng, requests, alone, events, "mixed drafts")
    assert all(events[i][-1].stats.drafted == 0 for i in range(0, 9, 3))
    assert sum(events[i][-1].stats.drafted for i in range(9) if i % 3) > 0
