"""Auto's choice among the model draft, the suffix draft and prompt lookup per step: by
measured acceptance and cost, exact whichever drafts, and reported per source."""

from __future__ import annotations

from typing import Sequence

import pytest

from engine import Engine
from engine.decoding.decoder import Decoder
from engine.decoding.drafting.cost_model import CostModel, Costs
from engine.decoding.drafting.draft_context import DraftContext
from engine.decoding.drafting.drafters import Drafter, ModelDrafter, Proposal
from engine.decoding.drafting.lookup_drafter import PromptLookupDrafter
from engine.decoding.drafting.lookahead import Auto, Fixed
from engine.decoding.drafting.mixed_drafter import MixedDrafter
from engine.decoding.drafting.source_choice import MODEL, PLAIN, Pick, SourceChooser, SourceTrust
from engine.decoding.drafting.suffix_drafter import SuffixDrafter
from engine.decoding.events import DoneEvent
from engine.decoding.quality import first_divergence
from engine.decoding.sampling.sampler import Sampler, SamplingParams
from engine.decoding.request import GenerationRequest
from engine.llamacpp.llama import Model
from engine.llamacpp.runtime import RuntimeParams

GREEDY = Sampler(SamplingParams())
# A GPU-like curve: a pass over 2..5 tokens costs little more than one; a draft token 0.3 of one.
GPU = Costs([(1, 1.0), (2, 1.05), (4, 1.15), (8, 1.6)], 0.3, 0.3, alpha=0.7)


class FixedModel(Drafter):
    """A stand-in model draft (no llama.cpp): proposes `tokens`, counts its calls."""

    kind = "model"
    cost_class = "model"

    def __init__(self, tokens: list[int]):
        self.tokens = tokens
        self.calls = 0

    def propose(self, context, k, sampler, rules=DraftContext()):
        self.calls += 1
        return Proposal(self.tokens[:k], [None] * min(k, len(self.tokens)), [0.9] * min(k, len(self.tokens)))


class Liar(SuffixDrafter):
    """A suffix draft that is always sure and always wrong."""

    def propose(self, context, k, sampler, rules=DraftContext()):
        return Proposal([7] * k, [None] * k, [0.95] * k, "suffix:history")

    def feedback(self, drafted: int, accepted: int) -> None:
        pass


def test_trust_follows_measured_acceptance_per_request_seeded_from_the_engine():
    t = SourceTrust()
    assert t.factor("lookup") == pytest.approx(1.0)  # nothing measured: as sure as it says
    for _ in range(6):
        t.observe("lookup", [0.9, 0.9], drafted=2, accepted=0)
    low = t.factor("lookup")
    assert low < 0.3
    t.begin()  # a new request starts from the engine's history, not from scratch
    assert low < t.factor("lookup") < 0.5
    assert t.factor("suffix:history") == pytest.approx(1.0)  # each source its own
    assert t.chances("lookup", [0.9, 0.9])[1] < t.chances("suffix:history", [0.9, 0.9])[1]


def test_the_chooser_weighs_acceptance_against_cost():
    c = SourceChooser(GPU, room=8)
    sure, unsure = [0.95] * 6, [0.05, 0.01]
    assert c.pick(4, [sure]).index == 0  # free and likely: beats a model draft that costs time
    assert c.pick(4, [unsure]) == Pick(MODEL, 4, c.model_rate(4))  # unlikely: the model drafts
    assert c.pick(0, [unsure]).index == PLAIN  # below plain decoding: no draft at all
    assert c.pick(0, [[0.2] * 3, sure]).index == 1  # the better of two free proposals
    assert c.pick(0, [sure]).k == 6  # as many of its tokens as pay
    cpu = SourceChooser(Costs([(1, 1.0), (2, 1.9), (4, 3.6)], 0.5, 0.5, alpha=0.7), room=8)
    assert cpu.pick(0, [[0.5] * 4]).index == PLAIN  # where a wider pass is dear, a guess does not pay


def test_in_a_shared_pass_the_chooser_prices_what_a_proposal_adds_to_every_slots_pass():
    """This 2-core CPU's measured pass times (1.5B target, rows 1-7: one row 80 ms, then about
    48 ms a row). Alone a likely 3-token lookup pays; beside three other slots (3 rows, 3
    tokens) its 3 rows cost about what 3 tokens of the others cost, so plain decoding wins.
    Priced as if alone, the chooser verified such proposals in full batches (lookup at 4
    clients: 0.92x the aggregate of no draft)."""
    from dataclasses import replace

    from engine.decoding.drafting.cost_model import BatchLoad

    curve = Costs([(1, 0.080), (2, 0.106), (3, 0.144), (4, 0.191), (5, 0.280), (6, 0.314), (7, 0.349)],
                  0.03, 0.4, alpha=0.7)
    likely = [[0.8, 0.7, 0.6]]
    alone = SourceChooser(curve, room=8).pick(0, likely)
    assert alone.index == 0 and alone.k >= 2
    shared = SourceChooser(replace(curve, load=BatchLoad(3, 3.0)), room=8)
    assert shared.pick(0, likely).index == PLAIN
    assert shared.pick(0, [[0.99] * 6]).index == 0  # a near-certain long one still pays for its rows
    assert shared.model_rate(2) < shared.pick(0, []).tokens_per_s  # the model's draft likewise


class OnGpu(Auto):
    """Auto, choosing among sources by the GPU-like curve whatever the cost model measured."""

    def source_chooser(self, cost, room):
        return SourceChooser(GPU, room)


def test_a_source_that_is_never_accepted_stops_being_chosen():
    """If the choice ignored measured acceptance, the liar's stated 0.95 would win every step."""
    model = FixedModel([1, 2, 3, 4])
    mix = MixedDrafter(model, Liar(with_lookup=False), PromptLookupDrafter())
    mix.begin([50, 51, 52])

    def request(prompt: list[int]) -> list[str]:
        mix.begin(prompt)
        picks = []
        for step in range(12):
            rules = DraftContext(trimmed_by_caller=True, policy=OnGpu(), cost=CostModel(), room=4)
            p = mix.propose([*prompt, *range(100, 100 + step)], 4, GREEDY, rules)
            picks.append(p.source or "model")
            mix.feedback(len(p.tokens), 0 if mix.last_free else len(p.tokens))
        return picks

    first = request([50, 51, 52])
    assert first[0] == "suffix:history"  # first it is believed
    assert first[-4:] == ["model"] * 4  # then measured: the model drafts
    assert first.count("suffix:history") <= 4
    # the next request starts from what the engine measured: the liar is given less rope
    second = request([60, 61])
    assert second.count("suffix:history") < first.count("suffix:history") and second[-4:] == ["model"] * 4


def test_a_fixed_lookahead_drafts_with_the_model_alone():
    model = FixedModel([1, 2, 3, 4])
    mix = MixedDrafter(model, Liar(with_lookup=False), PromptLookupDrafter())
    mix.begin([5])
    fixed = DraftContext(policy=Fixed(3), cost=CostModel(), room=4)
    assert not mix.wants_proposal(0, 4, Fixed(0)) and mix.wants_proposal(0, 4, Auto())  # only Auto weighs free drafts
    p = mix.propose([5, 6], 3, GREEDY, fixed)
    assert p.tokens == [1, 2, 3] and not mix.last_free and p.asked is None and model.calls == 1
    assert mix.propose([5, 6], 0, GREEDY, fixed).tokens == []


def test_the_mix_keeps_a_free_drafts_cost_and_acceptance_out_of_the_models():
    """The decoder measures every proposal through `measure`: a free one must not teach the cost
    model (the model's) a draft time or an acceptance, and says it was asked for the whole room."""
    model = FixedModel([1, 2, 3, 4])
    mix = MixedDrafter(model, SuffixDrafter(with_lookup=False), PromptLookupDrafter())
    mix.begin([5, 6, 7, 8, 5, 6, 7])
    cost = CostModel()
    p = mix.propose([5, 6, 7, 8, 5, 6, 7], 0, GREEDY, DraftContext(policy=OnGpu(), cost=cost, room=6))
    assert p.tokens and p.source in ("lookup", "suffix:request") and mix.last_free and p.asked == 6
    mix.measure(cost, p, 0, 1.0)
    assert cost.draft_token_s is None and cost.alpha == CostModel().alpha
    p = mix.propose([5, 6], 2, GREEDY, DraftContext(policy=Fixed(2), cost=cost, room=6))
    mix.measure(cost, p, 2, 0.5)
    assert cost.draft_token_s == pytest.approx(0.25) and cost.alpha > CostModel().alpha


# -- through the decoder: exact whichever drafts ------------------------------------------------
class Alternate(Auto):
    """Auto with a chooser that takes the model draft and a free proposal in turn (when both
    exist): a choice rule like any other, so the output must stay the target's."""

    first_step_plain = False  # it drafts every step: the chi-square needs two-token answers drafted

    def __init__(self, counter: list[int] | None = None):
        super().__init__()
        self.counter = counter if counter is not None else [0]

    def choose(self, room, cost, unread=0):
        return min(2, room)

    def draft_gate(self, cost):
        return None  # the model drafts all it is asked, whatever this machine's timings

    def source_chooser(self, cost, room):
        outer = self

        class Turns(SourceChooser):
            def pick(self, model_k: int, free: Sequence[Sequence[float]]) -> Pick:
                outer.counter[0] += 1
                if free and outer.counter[0] % 2:
                    return Pick(0, min(len(free[0]), self.room), 1.0)
                return Pick(MODEL, model_k, 1.0)

        return Turns(cost.snapshot(), room)

    def fresh(self):
        return Alternate(self.counter)


class Counting(MixedDrafter):
    """Counts the steps each source drafted."""

    drafted: dict[str, int]

    def propose(self, context, k, sampler, rules=DraftContext()):
        p = super().propose(context, k, sampler, rules)
        if p.tokens:
            self.drafted = getattr(self, "drafted", {})
            self.drafted[p.source or "model"] = self.drafted.get(p.source or "model", 0) + 1
        return p


PROMPTS = ["the value of", "def count items", "the value of", "def count items"]


@pytest.fixture(scope="module")
def eng(tiny_target):
    e = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False, history_draft=False)
    yield e
    e.close()


@pytest.mark.parametrize("policy", ["auto", "alternate"])
def test_greedy_mix_equals_target_alone(eng, tiny_target, policy):
    by: dict[str, int] = {}
    for prompt in PROMPTS:  # repeats: the second time the answer is in the suffix draft's history
        base = eng.generate(prompt, max_tokens=40)
        fast = eng.generate(prompt, draft_model=str(tiny_target), max_tokens=40,  # a self-draft: it holds
                            lookahead=Alternate() if policy == "alternate" else "auto")
        div = first_divergence(eng.target, eng.tokens_for(prompt), base.tokens, fast.tokens)
        assert div is None or div.margin < 1e-4, f"parted at token {div.index} (margin {div.margin})"
        assert fast.stats.mode == "model" and sum(fast.stats.accepted_by.values()) == fast.stats.accepted
        for src, n in fast.stats.accepted_by.items():
            by[src] = by.get(src, 0) + n
    assert set(by) <= {"model", "lookup", "suffix:request", "suffix:history"}
    if policy == "alternate":  # both kinds drafted in one run, and the race/bench see which
        assert by.get("model", 0) > 0 and sum(n for s, n in by.items() if s != "model") > 0


def test_sampling_with_the_mix_matches_target(tiny_target, tiny_draft):
    from test_decoder import _chi_square, _exact_two_token_distribution

    params = SamplingParams(temperature=1.0, top_k=6)
    target, draft = Model(tiny_target), Model(tiny_draft)
    prompt = target.tokenize("the value of")
    exact = _exact_two_token_distribution(target, prompt, params)
    suffix = SuffixDrafter(with_lookup=False)
    pairs = sorted(exact, key=lambda ab: -exact[ab])
    unlikely = next(ab for ab in pairs[3:] if ab[0] != pairs[0][0])
    for a, b in [unlikely] * 3 + pairs[:3]:  # past answers: often a pair the target rarely writes
        suffix.finish([], [prompt[-2], prompt[-1], a, b])
    rt = RuntimeParams(n_ctx=256)
    mix = Counting(ModelDrafter(draft, rt, target_vocab=target.n_vocab), suffix, PromptLookupDrafter())
    dec = Decoder(target, mix, runtime=rt)
    dec.cost.import_costs({"verify_s": {"1": 0.01, "2": 0.012, "4": 0.015}})  # no calibration step
    n, counts, turns = 1000, {}, [0]
    for seed in range(n):
        cfg = GenerationRequest(prompt, lookahead=Alternate(turns), max_tokens=2,
                                sampling=SamplingParams(temperature=1.0, top_k=6, seed=seed))
        done = [e for e in dec.run(prompt, cfg) if isinstance(e, DoneEvent)][0]
        counts[tuple(done.tokens)] = counts.get(tuple(done.tokens), 0) + 1
    dec.close()
    assert mix.drafted.get("model", 0) > n // 8 and mix.drafted.get("suffix:history", 0) > n // 4  # both, often
    assert _chi_square(counts, exact, n) > 0.01


def test_one_store_of_past_answers_for_every_drafter_of_an_engine(eng, tiny_target):
    """The model draft's free companion and the suffix choice learn into one store (one file),
    and clearing the history clears it for both."""
    mixed = eng.decoder(str(tiny_target)).drafter
    suffix = eng.decoder("suffix").drafter
    assert isinstance(mixed, MixedDrafter) and mixed.history_drafter.answers is suffix.answers
    eng.generate("the value of", draft_model=str(tiny_target), lookahead="auto", max_tokens=12)
    assert suffix.answers.tokens > 0  # learnt by the model draft's run, there for the suffix choice
    eng.clear_draft_history()
    assert suffix.answers.tokens == 0


def test_the_bench_lends_a_model_drafts_companion_a_memory_of_its_own(eng, tiny_target):
    """In the bench the suffix draft beside a model draft learns into the configuration's memory
    (no repetition drafts from the one before), never the user's, which it gets back after."""
    from engine.measure.bench_history import BenchHistories

    mixed = eng.decoder(str(tiny_target)).drafter
    users, before = mixed.suffix.answers, mixed.suffix.answers.tokens
    h = BenchHistories(eng)
    assert h.draft_for("model auto", str(tiny_target)) == str(tiny_target)
    eng.generate("the value of", draft_model=str(tiny_target), lookahead="auto", max_tokens=8)
    assert h.stores["model auto"].tokens > 0 and users.tokens == before
    h.close()
    assert mixed.suffix.answers is users
