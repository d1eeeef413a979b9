"""What a drafter is told each step comes as one DraftContext handed to `propose`: the
lookahead policy's gate and trimming, the request's logits processors, the grammar's
committed state, and the policy, costs and room a drafter with several sources chooses by.
Nothing is set on the drafter itself."""

from __future__ import annotations

import dataclasses

import pytest

from engine import Engine
from engine.decoding.drafting.drafters import DraftContext, Drafter, ModelDrafter, Proposal
from engine.decoding.drafting.lookup_drafter import PromptLookupDrafter
from engine.decoding.drafting.lookahead import Auto, Fixed


@pytest.fixture(scope="module")
def eng(tiny_target):
    e = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False)
    yield e
    e.close()


class _Recording(Drafter):
    """A free drafter that proposes nothing and keeps what each call was given; `rules` has no
    default, so a decoder that set attributes instead of passing it fails here."""

    kind = "recording"

    def __init__(self):
        self.seen: list[DraftContext] = []

    def propose(self, context, k, sampler, rules):
        self.seen.append(rules)
        return Proposal()


def _run(eng, drafter, **options):
    before = dict(vars(drafter))
    eng.generate("the value of", draft_model=drafter, max_tokens=6, **options)
    after = {k: v for k, v in vars(drafter).items() if k != "seen"}
    assert after == {k: v for k, v in before.items() if k != "seen"}, "the decoder set attributes on the drafter"
    assert drafter.seen, "the drafter was never asked"
    return drafter.seen


def test_a_free_drafter_gets_the_policy_processors_and_grammar(eng):
    seen = _run(eng, _Recording(), lookahead=Fixed(3))
    # nothing asked: the defaults, but for the step's policy, costs and room (a drafter that
    # chooses among sources of its own reads them; this one ignores them)
    assert all(dataclasses.replace(r, policy=None, cost=None, room=0) == DraftContext() for r in seen), seen
    assert all(isinstance(r.policy, Fixed) and r.cost is not None and r.room > 0 for r in seen)

    seen = _run(eng, _Recording(), lookahead=3, logit_bias={5: -100.0}, grammar='root ::= [a-z ]+')
    for r in seen:
        assert isinstance(r, DraftContext) and not r.trimmed_by_caller
        assert r.confidence_gate is None  # a free drafter is never gated
        assert r.row_processor is not None and r.grammar is not None


def test_auto_tells_a_free_drafter_it_trims(eng):
    seen: list[DraftContext] = []

    class Lookup(PromptLookupDrafter):
        def propose(self, context, k, sampler, rules=DraftContext()):
            seen.append(rules)
            return super().propose(context, k, sampler, rules)

    prompt = "the value of the item is the value of the item is the value of the item is"
    eng.generate(prompt, draft_model=Lookup(), lookahead=Auto(), max_tokens=30)
    assert seen and all(r.trimmed_by_caller and r.confidence_gate is None for r in seen)
    seen.clear()
    eng.generate(prompt, draft_model=Lookup(), lookahead=Fixed(4), max_tokens=30)
    assert seen and not any(r.trimmed_by_caller for r in seen)


def test_a_model_drafter_is_gated_by_auto_through_its_context(eng, tiny_target):
    """Auto's confidence gate reaches a model draft in the context, not as an attribute."""
    seen: list[DraftContext] = []

    class Gated(ModelDrafter):
        def propose(self, context, k, sampler, rules=DraftContext()):
            seen.append(rules)
            return super().propose(context, k, sampler, rules)

    draft = Gated(eng.target)
    try:
        eng.generate("the value of", draft_model=draft, lookahead="auto", max_tokens=40)
    finally:
        draft.close()
    assert not hasattr(draft, "confidence_gate")
    if seen:  # Auto may judge that drafting never pays on a busy machine
        assert all(r.confidence_gate is not None and r.trimmed_by_caller for r in seen)


def test_the_context_is_a_frozen_value():
    rules = DraftContext(trimmed_by_caller=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rules.trimmed_by_caller = False  # type: ignore[misc]


def test_the_decoder_drafts_through_the_drafter_interface_alone(eng):
    """Whether a step asks for a proposal and what the cost model learns from one are the
    drafter's to say (`wants_proposal`, `measure`), as a mix of sources says them: the decoder
    knows no kind of drafter. Here a drafter with sources of its own drafts at k = 0."""

    class OwnSources(Drafter):
        kind = "own"

        def __init__(self):
            self.asked: list[tuple[int, int]] = []
            self.measured = 0

        def wants_proposal(self, k, room, policy):
            return room > 0

        def propose(self, context, k, sampler, rules):
            self.asked.append((k, rules.room))
            return Proposal([9, 9], [None, None], [0.5, 0.5], "own:source", asked=rules.room)

        def measure(self, cost, proposal, accepted, seconds):
            self.measured += 1

    d = OwnSources()
    base = eng.generate("the value of", max_tokens=6)
    out = eng.generate("the value of", draft_model=d, lookahead=0, max_tokens=6)
    assert d.asked and all(k == 0 and room > 0 for k, room in d.asked)  # asked with k = 0
    assert out.stats.drafted >= len(d.asked) and d.measured == len(d.asked)  # verified up to the room it was asked for
    assert out.tokens == base.tokens  # verified like any draft
    cost = eng.decoder(d).cost
    fresh = type(cost)()  # its `measure` taught the decoder's cost model nothing
    assert cost.draft_token_s is None and cost.alpha == fresh.alpha and cost.export_confidence() == fresh.export_confidence()
