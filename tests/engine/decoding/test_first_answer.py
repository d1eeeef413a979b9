"""Auto's first answer on a fresh profile never waits: nothing is measured apart from the answer
(its own prefill chunks and verify passes teach the cost model, and the store is written once
the curve is known), and a model draft that must read the prompt first reads it in chunks
between target steps that go on writing (issue #47 items 1 and 5)."""

from __future__ import annotations

import pytest

from engine import Engine
from engine.decoding.cancel import CancelToken
from engine.decoding.decoder import Decoder
from engine.decoding.drafting.cost_model import CostModel
from engine.decoding.drafting.drafters import Drafter, ModelDrafter, Proposal
from engine.decoding.events import DoneEvent, DraftReadEvent, PrefillEvent, StepEvent, TokenEvent
from engine.decoding.request import GenerationRequest
from engine.llamacpp.context import Context
from engine.llamacpp.llama import Model
from engine.llamacpp.runtime import RuntimeParams
from engine.models import calibration
from test_draft_reading import Fixed  # a CPU-like verify curve, the draft reading 1 ms a token: catch-up chunks of 30


def _count_decodes(monkeypatch, ctx: Context) -> list[int]:
    """The batch size of every decode `ctx` makes from now on."""
    sizes: list[int] = []
    real = Context.decode

    def decode(self, tokens, **kw):
        if self is ctx:
            sizes.append(len(tokens))
        return real(self, tokens, **kw)

    monkeypatch.setattr(Context, "decode", decode)
    return sizes


def test_a_first_answer_on_an_empty_store_decodes_only_its_prompt_and_its_steps(tiny_target, tiny_draft, monkeypatch):
    e = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False)  # nothing stored, nothing measured
    try:
        prompt = "the value of " * 12  # long enough for its reading to be timed
        base = e.generate(prompt, max_tokens=40)
        dec = e.decoder(tiny_draft)
        assert not dec.cost.verify_s
        sizes = _count_decodes(monkeypatch, dec.ctx)
        events = list(e.stream(prompt, draft_model=tiny_draft, lookahead="auto", max_tokens=40))
        done = events[-1]
        assert isinstance(done, DoneEvent) and done.tokens == base.tokens
        chunks = [ev for ev in events if isinstance(ev, PrefillEvent) and ev.done > 0]
        steps = [ev for ev in events if isinstance(ev, StepEvent)]
        # every target pass is a prompt chunk or a step: no throwaway batches of 1..16 tokens
        assert len(sizes) == len(chunks) + len(steps) == len(chunks) + done.stats.steps, sizes
        assert sizes[len(chunks):] == [1 + s.drafted for s in steps]
        assert not any(ev.kind == "calibration" for ev in events)
        assert "calibration_s" not in done.stats.to_dict()
        assert dec.cost.target_read_token_s is not None  # the prompt's chunks were timed
        assert 1 in dec.cost.verify_s  # and so were the steps
    finally:
        e.close()


class _Oracle(Drafter):
    """A free drafter that knows the target's output and offers it in turns: nothing (a plain
    step), one right token then wrong ones stated unsure, two right then wrong ones, so Auto
    verifies passes of several widths, as real text makes it do."""

    kind = "oracle"

    def __init__(self, prompt_len: int, truth: list[int]):
        self.prompt_len, self.truth = prompt_len, truth
        self.calls = 0

    def propose(self, context, k, sampler, rules=None):
        i = len(context) - self.prompt_len
        self.calls += 1
        sure = self.calls % 3
        toks = self.truth[i:i + sure] + [(t + 1) % 50 for t in self.truth[i + sure:i + 4]] if sure else []
        return Proposal(toks, [None] * len(toks), ([0.97] * sure + [0.05] * 4)[:len(toks)])


class _Steady(CostModel):
    """Takes every verify pass the steps make, at a steady machine's time for its width (this
    machine is shared: its own timings would make Auto's trims, and so this test, a lottery)."""

    def observe_verify(self, n: int, seconds: float) -> None:
        super().observe_verify(n, 0.001 * (1 + 0.3 * (n - 1)))


def test_an_answers_own_steps_measure_the_verify_curve(models, monkeypatch):
    target, _ = models
    prompt = target.tokenize("the value of")
    truth = _target_alone(target, prompt, 90).tokens
    dec = Decoder(target, _Oracle(len(prompt), truth), runtime=RuntimeParams(n_ctx=1024), cost=_Steady())
    assert not dec.cost.verify_s  # nothing measured, nothing stored
    sizes = _count_decodes(monkeypatch, dec.ctx)
    try:
        events = list(dec.run(prompt, GenerationRequest(prompt, max_tokens=90, lookahead="auto")))
    finally:
        dec.close()
    assert events[-1].tokens == truth
    assert len(sizes) == 1 + events[-1].stats.steps  # the prompt, then the steps: nothing else
    assert dec.cost.calibrated, {n: len(v) for n, v in dec.cost._verify.items()}
    assert set(dec.cost.verify_s) == set(sizes[1:])  # what it knows is what the steps verified


def test_the_store_keeps_a_width_once_measured_several_times(tiny_target, tiny_draft):
    """The engine stores, after an answer, the verify widths measured several times (not a
    single sample, nor the prior); the next process's engine starts from them."""
    e = Engine(tiny_target, n_ctx=512, metrics_log=False)  # this test's own, empty store
    key = e.calibration_key()
    try:
        cost = e.decoder(tiny_draft).cost
        for n, t in [(1, 0.010), (2, 0.013), (4, 0.019), (8, 0.031)]:  # each measured once
            cost.observe_verify(n, t)
        e.generate("the value of", draft_model=tiny_draft, lookahead=0, max_tokens=4)  # one-token passes
        assert set(calibration.load(key)["verify_s"]) == {"1"}
        v1 = cost.verify_s[1]  # as the answer measured it (a wider pass is judged against it)
        for n, r in [(2, 1.3), (2, 1.3), (4, 1.9), (4, 1.9)]:
            cost.observe_verify(n, r * v1)
        e.generate("the value of", draft_model=tiny_draft, lookahead=0, max_tokens=4)
        stored = calibration.load(key)["verify_s"]
        assert set(stored) == {"1", "2", "4"} and cost.calibrated
    finally:
        e.close()
    again = Engine(tiny_target, n_ctx=512, metrics_log=False)  # a fresh process's engine
    try:
        assert set(again.decoder(tiny_draft).cost.verify_s) == {1, 2, 4}
    finally:
        again.close()


@pytest.fixture(scope="module")
def models(tiny_target, tiny_draft):
    t, d = Model(tiny_target), Model(tiny_draft)
    yield t, d
    t.close()
    d.close()


PROMPT = "the value of the item is " * 12  # a few hundred tokens: about ten chunks of 30


def _target_alone(target, prompt, n):
    dec = Decoder(target, None, runtime=RuntimeParams(n_ctx=1024))
    try:
        return [e for e in dec.run(prompt, GenerationRequest(prompt, max_tokens=n)) if isinstance(e, DoneEvent)][0]
    finally:
        dec.close()


def test_a_model_draft_reads_the_prompt_in_chunks_while_the_target_goes_on_writing(models):
    target, draft = models
    prompt = target.tokenize(PROMPT)
    assert len(prompt) > 150
    want = _target_alone(target, prompt, 80)
    rt = RuntimeParams(n_ctx=1024)
    dec = Decoder(target, ModelDrafter(draft, rt), runtime=rt, cost=Fixed(0.001))
    try:
        events = list(dec.run(prompt, GenerationRequest(prompt, max_tokens=80, lookahead="auto")))
    finally:
        dec.close()
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.tokens == want.tokens  # exact while it reads and after
    reads = [i for i, ev in enumerate(events) if isinstance(ev, DraftReadEvent)]
    assert len(reads) >= 4, [ev.kind for ev in events]
    chunks = [events[i] for i in reads]
    assert all(b.done - a.done <= 30 for a, b in zip(chunks, chunks[1:])) and chunks[0].done <= 30
    assert chunks[-1].done == chunks[-1].total and all(c.done < c.total for c in chunks[:-1])
    assert chunks[-1].total > len(prompt) - 1  # the tokens written meanwhile were read too
    # between two chunks a plain step wrote a token: the stream never stalls on the reading
    for a, b in zip(reads, reads[1:]):
        between = events[a + 1:b]
        assert any(isinstance(ev, TokenEvent) for ev in between)
        assert [ev.drafted for ev in between if isinstance(ev, StepEvent)] == [0]
    assert not any(isinstance(ev, StepEvent) and ev.drafted for ev in events[:reads[-1]])
    assert any(isinstance(ev, StepEvent) and ev.drafted for ev in events[reads[-1]:])  # then it drafts
    assert done.stats.draft_sync_s > 0 and done.stats.drafted > 0


def test_a_cancel_while_the_draft_reads_ends_the_answer_at_once(models):
    target, draft = models
    prompt = target.tokenize(PROMPT)
    rt = RuntimeParams(n_ctx=1024)
    dec = Decoder(target, ModelDrafter(draft, rt), runtime=rt, cost=Fixed(0.001))
    cancel = CancelToken()
    after: list[str] = []
    try:
        for ev in dec.run(prompt, GenerationRequest(prompt, max_tokens=80, lookahead="auto"), cancel):
            if cancel.cancelled:
                after.append(ev.kind)
            elif isinstance(ev, DraftReadEvent):
                cancel.cancel()
            last = ev
    finally:
        dec.close()
    assert isinstance(last, DoneEvent) and last.stats.finish_reason == "cancelled"
    assert after.count("step") <= 1 and "draft_read" not in after, after


def test_a_fixed_lookahead_reads_the_prompt_before_its_first_step_and_says_so(models):
    target, draft = models
    prompt = target.tokenize(PROMPT)
    rt = RuntimeParams(n_ctx=1024)
    dec = Decoder(target, ModelDrafter(draft, rt), runtime=rt)
    try:
        events = list(dec.run(prompt, GenerationRequest(prompt, max_tokens=10, lookahead=3)))
    finally:
        dec.close()
    kinds = [ev.kind for ev in events]
    reads = [ev for ev in events if isinstance(ev, DraftReadEvent)]
    assert [(r.done, r.total) for r in reads] == [(0, len(prompt) - 1), (len(prompt) - 1, len(prompt) - 1)]
    assert kinds.index("draft_read") < kinds.index("step") and not any(kinds[kinds.index("step"):].count(k) for k in ["draft_read"])


def test_a_stall_in_the_store_is_neither_seeded_nor_kept(tiny_target, tiny_draft):
    """Found in a store on this machine: one-token passes at 83 ms beside 2- to 4-token passes at
    8.3 s and a draft token at 15.3 s (kept by merging with the old entry after the run that
    measured them had gone). Seeded, Auto would price the model draft out for good and never
    measure it again; so such widths and draft times are not seeded, and an answer's save drops
    the stored widths its own one-token pass proves impossible."""
    e = Engine(tiny_target, n_ctx=512, metrics_log=False)  # this test's own, empty store
    try:
        vk, dk = e._costs_kept.keys(e.decoder(tiny_draft).drafter)
        calibration.save({vk: {"verify_s": {"1": 0.083, "2": 8.286, "3": 8.286, "5": 0.19, "224": 83.2}},
                          dk: {"draft_token_s": 15.29}})
        e.release(tiny_draft)  # made before the store was written: made again, seeded from it
        seeded = e.decoder(tiny_draft).cost
        assert seeded.verify_s == {1: 0.083, 5: 0.19} and seeded.draft_token_s is None
        calibration.save({dk: {"draft_token_s": 0.03}})
        e.release(tiny_draft)
        assert e.decoder(tiny_draft).cost.draft_token_s == 0.03  # a plausible one is seeded
        for _ in range(3):
            e.generate("the value of", max_tokens=4)  # one-token passes of a tiny model: ~1 ms
        kept = calibration.load(vk)["verify_s"]
        assert "1" in kept and float(kept["1"]) < 0.083 and not {"2", "3", "224"} & set(kept), kept
    finally:
        e.close()


def test_auto_writes_its_first_token_in_a_pass_of_one_row(tiny_target):
    """Issue #47: the first token no later than the target alone's. With the target as its own
    draft, a fixed lookahead verifies drafts in its first pass and Auto, which would probe there,
    does not: its first pass is target alone's (one row); the answer is the same."""
    e = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False)
    try:
        prompt = "the value of the list is the data of the value of the list is the data of"
        alone = e.generate(prompt, max_tokens=24)
        firsts = {}
        for la in (3, "auto"):
            e.forget_prompts()
            events = list(e.stream(prompt, draft_model=str(tiny_target), lookahead=la, max_tokens=24))
            assert events[-1].tokens == alone.tokens
            firsts[la] = next(ev for ev in events if isinstance(ev, StepEvent))
        assert firsts[3].drafted == 3
        assert firsts["auto"].k == 0 and firsts["auto"].drafted == 0
    finally:
        e.close()
