"""The draft model batched across parallel slots (drafting/batched_drafter.py): the slots drafting
with it decode on the sequences of one draft context, one `llama_decode` per draft position for
all of them; each request's greedy output is still its output alone, sampled ones keep the exact
rule, and the drafts stay batched (counted, so the feature cannot fall back to slot by slot)."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Callable

import pytest

from engine import Engine
from engine.decoding.cancel import CancelToken
from engine.decoding.drafting.batched_drafter import BatchedModelDrafter
from engine.decoding.drafting.lookahead import Fixed
from engine.decoding.events import DoneEvent, TokenEvent
from engine.decoding.request import GenerationRequest
from engine.decoding.sampling.params import SamplingParams
from engine.decoding.slots.scheduler import SlotScheduler
from engine.llamacpp.runtime import RuntimeParams

from test_decoder import _chi_square, _exact_two_token_distribution
from test_mixed_drafter import Alternate
from test_scheduler import PROMPTS, _alone, _check_same, _requests, _together, sampled_pairs


@pytest.fixture(scope="module")
def eng(tiny_target):
    e = Engine(tiny_target, n_ctx=512, metrics_log=False)
    yield e
    e.close()


def _slots(eng: Engine, n_slots: int, draft) -> SlotScheduler:
    return SlotScheduler(eng.target, n_slots, runtime=RuntimeParams(n_ctx=512 * n_slots, n_batch=64),
                         drafters={"model": lambda: eng.slot_drafter(str(draft))})


def _drafting_passes(sched: SlotScheduler, parts: list | None = None) -> list[list[int]]:
    """Record, per `llama_decode` on the draft model's context, the sequences it carried (and
    into `parts`, its parts themselves)."""
    (batch,) = sched.draft_batches.values()
    passes: list[list[int]] = []
    one_pass = batch.shared._pass

    def counted(ps):
        passes.append([p.seq for p in ps])
        if parts is not None:
            parts.append(list(ps))
        return one_pass(ps)

    batch.shared._pass = counted
    return passes


def _run_slots(eng: Engine, n_slots: int, draft, requests, *, stagger_s: float | None = None,
               watch: Callable[[SlotScheduler], object] = _drafting_passes) -> tuple[list[list], object]:
    """`requests` sent at once to `n_slots` slots drafting with `draft` (the i-th `stagger_s`
    later, `_together`'s default when None), the scheduler closed after: each request's events,
    and what `watch` set up on the scheduler before they ran (the draft passes, by default)."""
    sched = _slots(eng, n_slots, draft)
    try:
        seen = watch(sched)
        events = _together(sched, requests) if stagger_s is None else _together(sched, requests, stagger_s)
    finally:
        sched.close()
    return events, seen


@pytest.mark.parametrize("pair", ["other", "self"])
@pytest.mark.parametrize("n_slots", [1, 2, 4, 8])
def test_greedy_output_with_the_batched_draft_model_is_each_requests_alone(eng, tiny_draft, tiny_target, pair, n_slots):
    """Requests of other lengths and limits (finishing at other times), each with its own fixed k
    (1 to 5), staggered: a draft that disagrees often (rejected tails rolled back per sequence)
    and the target as its own draft (long accepted runs, several tokens to catch up)."""
    requests = _requests(eng, count=10)
    alone = _alone(eng, requests, None)

    def drafters(sched: SlotScheduler) -> None:
        drafters = [s.decoder.drafter.model_drafter for s in sched.slots]
        assert all(isinstance(d, BatchedModelDrafter) for d in drafters)
        assert [d.ctx.seq for d in drafters] == list(range(n_slots))  # a sequence each of one context
        assert len(sched.draft_batches) == 1

    events, _ = _run_slots(eng, n_slots, tiny_draft if pair == "other" else tiny_target, requests, watch=drafters)
    _check_same(eng, requests, alone, events, f"{n_slots} slots, batched draft model ({pair})")
    by_model = sum(e[-1].stats.accepted_by.get("model", 0) for e in events)
    drafted = sum(e[-1].stats.drafted for e in events)
    assert by_model > 0 and drafted > 0
    if pair == "other":
        assert sum(e[-1].stats.accepted for e in events) < drafted


class GatedTurns(Alternate):
    """The model draft and a free proposal in turn, the model's drafting stopped by a confidence
    gate (after two tokens, at the first below 0.9): each slot's draft ends where its own rows
    say, so the slots drop out of the batch's positions at different times."""

    def choose(self, room, cost, unread=0):
        return min(5, room)

    def draft_gate(self, cost):
        return lambda i, conf: (True, i < 2 or conf > 0.9)

    def fresh(self):
        return GatedTurns(self.counter)


def test_the_model_beside_free_drafters_under_a_gate_drafts_batched_and_each_answer_is_alone(eng, tiny_target):
    """The slots' drafter as the server makes it (the model with the suffix draft and prompt lookup
    beside it, one chosen per step by the policy) under a gate that stops each draft by its own
    confidence: greedy output is each request's alone, and the model's drafts were batched."""
    requests = [replace(r, lookahead=GatedTurns()) for r in _requests(eng, count=8)]
    events, passes = _run_slots(eng, 4, tiny_target, requests)
    alone = _alone(eng, requests, None)
    _check_same(eng, requests, alone, events, "4 slots, the model and free drafters in turn, gated")
    by: dict[str, int] = {}
    for e in events:
        for src, n in e[-1].stats.accepted_by.items():
            by[src] = by.get(src, 0) + n
    assert by.get("model", 0) > 0 and sum(n for s, n in by.items() if s != "model") > 0, by
    assert any(len(set(p)) > 1 for p in passes)


def test_the_draft_models_decodes_carry_every_drafting_slot_at_once(eng, tiny_target):
    """Four requests at once, k = 3 each: the draft passes carry rows of several sequences, about
    one pass per draft position for all of them, where slot by slot took one per slot."""
    requests = [GenerationRequest(r.prompt, lookahead=Fixed(3), max_tokens=40) for r in _requests(eng, count=4)]
    events, passes = _run_slots(eng, 4, tiny_target, requests, stagger_s=0.0)
    assert all(isinstance(e[-1], DoneEvent) for e in events)
    rows_by_slot = sum(len(p) for p in passes)  # the decodes slot by slot would have taken, at least
    together = [p for p in passes if len(set(p)) > 1]
    assert len(together) >= len(passes) // 2, passes
    assert rows_by_slot >= 2 * len(passes), (rows_by_slot, len(passes))


def test_a_cancel_beside_the_batched_drafts_frees_its_slot_and_the_others_finish_as_alone(eng, tiny_draft):
    requests = _requests(eng, count=6)
    long = GenerationRequest(eng.tokens_for("the value of"), lookahead=Fixed(4), max_tokens=400)
    alone = _alone(eng, requests, None)
    sched = _slots(eng, 4, tiny_draft)
    cancel, seen = CancelToken(), []

    def cancelled_run() -> None:
        for ev in sched.stream(long.prompt, long, cancel):
            seen.append(ev)
            if sum(isinstance(e, TokenEvent) for e in seen) == 5:
                cancel.cancel()

    try:
        t = threading.Thread(target=cancelled_run)
        t.start()
        while not any(isinstance(e, TokenEvent) for e in seen):
            time.sleep(0.001)
        events = _together(sched, requests)
        t.join(60)
    finally:
        sched.close()
    done = seen[-1]
    assert isinstance(done, DoneEvent) and done.stats.finish_reason == "cancelled"
    assert 5 <= len(done.tokens) < 30
    _check_same(eng, requests, alone, events, "beside a cancelled run, batched draft model")


def test_sampling_with_the_batched_draft_model_in_four_slots_keeps_the_targets_distribution(eng, tiny_draft):
    """Two sampled tokens after one prompt, 1200 seeds through 4 slots drafting together with a
    draft that disagrees often (its own q, so the residual draws decide much): the pairs follow
    the target's exact distribution (chi-square)."""
    params = SamplingParams(temperature=1.0, top_k=6)
    prompt = eng.tokens_for("the value of")
    exact = _exact_two_token_distribution(eng.target, prompt, params)
    sched = _slots(eng, 4, tiny_draft)
    passes = _drafting_passes(sched)
    n = 1200
    counts = sampled_pairs(sched, prompt, n, 4, params)
    assert any(len(set(p)) > 1 for p in passes)  # the slots drafted together
    assert _chi_square(counts, exact, n) > 0.01


def test_a_slots_drafting_is_priced_at_its_share_of_the_batched_passes(eng, tiny_target):
    """Auto learns a draft token's cost from what each slot is charged: its share of the draft
    passes it had rows in (they add up to the passes' time), not the wall time of every slot's
    drafting, which would price each drafted token as if the slots drafted one after another."""
    requests = [GenerationRequest(r.prompt, lookahead=Fixed(3), max_tokens=40) for r in _requests(eng, count=4)]
    ran, charged = [], []

    def timing(sched: SlotScheduler) -> None:
        (batch,) = sched.draft_batches.values()
        cost = sched.slots[0].decoder.cost
        step, observe = batch.step, cost.observe_draft

        def timed(wants, left):
            t = time.perf_counter()
            rows, seconds = step(wants, left)
            ran.append(time.perf_counter() - t)
            return rows, seconds

        def observing(drafted, seconds):
            charged.append(seconds)
            observe(drafted, seconds)

        batch.step, cost.observe_draft = timed, observing

    events, _ = _run_slots(eng, 4, tiny_target, requests, stagger_s=0.0, watch=timing)
    assert all(isinstance(e[-1], DoneEvent) for e in events)
    assert len(charged) > 4 and 0 < sum(charged) <= sum(ran)
    drafting = sum(e[-1].stats.draft_s for e in events)
    assert drafting <= sum(ran) * 1.05 + 0.05  # the requests' draft time, each its own share


def test_a_hybrid_draft_model_keeps_a_context_per_slot(tiny_hybrid, tiny_hybrid_draft):
    """A draft with a recurrent state is not batched (llama.cpp's recurrent cache moves a sequence's
    state in a batch of several without its snapshots): each slot drafts on a context of its own,
    as before (its answers: test_hybrid_slots)."""
    e = Engine(tiny_hybrid, n_ctx=256, metrics_log=False)
    try:
        sched = SlotScheduler(e.target, 2, runtime=RuntimeParams(n_ctx=512, n_batch=64, n_threads=1),
                              drafters={"model": lambda: e.slot_drafter(str(tiny_hybrid_draft))})
        try:
            assert sched.draft_batches == {}
            drafters = [s.decoder.drafter.model_drafter for s in sched.slots]
            assert not any(isinstance(d, BatchedModelDrafter) for d in drafters)
            assert len({id(d.ctx) for d in drafters}) == 2
        finally:
            sched.close()
    finally:
        e.close()


def test_grammar_constrained_requests_draft_batched_within_their_own_grammar(eng, tiny_target):
    """Each slot's model draft drafts within a clone of its own request's grammar (other grammars
    beside it, or none): greedy output is each request's alone."""
    grammars = ['root ::= [a-z ]+', None, 'root ::= ("the" | "value" | "of" | " ")+', 'root ::= [a-m ]+']
    requests = [replace(r, grammar=grammars[i % 4], lookahead=Fixed(3)) for i, r in enumerate(_requests(eng, count=8))]
    events, passes = _run_slots(eng, 4, tiny_target, requests)
    _check_same(eng, requests, _alone(eng, requests, None), events, "4 slots, grammars, batched draft model")
    assert all(set(events[i][-1].text) <= set("abcdefghijklm ") for i in range(3, 8, 4))  # held to their grammar
    assert sum(e[-1].stats.accepted_by.get("model", 0) for e in events) > 0
    assert any(len(set(p)) > 1 for p in passes)


LONG = ["the value of the list of items in the data is the total", "def count items in the class and return total",
        "import data for the class while item is not in the list", "print the total value of the items and the sum"]


def _long_requests(eng: Engine, n: int) -> list[GenerationRequest]:
    """Four prompts of `n` tokens each, k = 3: a draft model reads each before its first step."""
    return [GenerationRequest(eng.tokens_for(" ".join([p] * 40))[:n], lookahead=Fixed(3), max_tokens=12) for p in LONG]


def _reads(parts: list) -> list[list[tuple[int, int]]]:
    """Per draft pass that read a prompt (a part without logits), its reads: (sequence, tokens)."""
    return [r for r in ([(p.seq, len(p.tokens)) for p in ps if p.logits == "none"] for ps in parts) if r]


def test_slots_starting_together_read_their_prompts_in_shared_draft_passes(eng, tiny_target):
    """Four slots whose prompts the target reads in one pass: their draft model reads the four
    prompts in shared passes (fewer than one decode a slot, as each read alone took: here one
    pass for all four), and each answer is its answer alone."""
    requests = _long_requests(eng, 110)
    parts: list = []
    sched = SlotScheduler(eng.target, 4, runtime=RuntimeParams(n_ctx=2048, n_batch=1024),
                          drafters={"model": lambda: eng.slot_drafter(str(tiny_target))})
    _drafting_passes(sched, parts)
    try:
        events = _together(sched, requests, stagger_s=0.0)
    finally:
        sched.close()
    _check_same(eng, requests, _alone(eng, requests, None), events, "4 slots reading their prompts together")
    reads = _reads(parts)
    read_by = {seq for r in reads for seq, _ in r}
    assert read_by == {0, 1, 2, 3}
    assert len(reads) < len(read_by), reads  # alone: a decode (at least) for each slot's read
    assert any(len({seq for seq, _ in r}) > 1 for r in reads), reads


def test_a_long_prompt_is_read_a_chunk_a_pass_beside_the_other_slots_drafting(tiny_target):
    """A draft context of 64-row passes: a request of ~200 tokens arriving while three slots draft
    has its prompt read by the draft in several passes, each also carrying the drafting slots'
    rows, so their drafting goes on while it reads (read in one go, alone, it held them for its
    whole length); answers are each alone."""
    e = Engine(tiny_target, n_ctx=512, n_batch=64, metrics_log=False)
    try:
        requests = [GenerationRequest(e.tokens_for(p), lookahead=Fixed(3), max_tokens=150) for p in PROMPTS[:3]]
        requests.append(_long_requests(e, 200)[0])
        parts: list = []
        sched = _slots(e, 4, tiny_target)
        _drafting_passes(sched, parts)
        events: list = [None] * 4

        def run(i: int) -> None:
            events[i] = list(sched.stream(requests[i].prompt, requests[i]))

        try:
            threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
            for t in threads:
                t.start()
            while not any(p.logits == "last" for ps in list(parts) for p in ps):  # the three draft
                time.sleep(0.001)
            run(3)
            for t in threads:
                t.join(120)
        finally:
            sched.close()
        _check_same(e, requests, _alone(e, requests, None), events, "a long read beside three drafting slots")
    finally:
        e.close()
    reads = [ps for ps in parts if any(p.seq == 3 and p.logits == "none" for p in ps)]
    beside = [ps for ps in reads if any(p.seq != 3 for p in ps)]
    assert sum(len(p.tokens) for ps in reads for p in ps if p.seq == 3) >= 199
    assert len(reads) >= 3 and len(beside) >= 2, [[(p.seq, len(p.tokens), p.logits) for p in ps] for ps in reads]


def test_a_slots_draft_read_of_its_prompt_is_told_to_the_request(eng, tiny_target):
    """The draft's read, now made at the slot's first step, still tells the request how far it got
    (`DraftReadEvent`, as the single-sequence path does): its start and its end, all read."""
    from engine.decoding.events import DraftReadEvent

    request = _long_requests(eng, 100)[0]
    (events,), _ = _run_slots(eng, 2, tiny_target, [request])
    reads = [(e.done, e.total) for e in events if isinstance(e, DraftReadEvent)]
    assert reads[0][0] == 0 and reads[-1][0] == reads[-1][1] > 90, reads
