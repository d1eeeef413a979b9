"""What a drafter is told each step comes as one DraftContext handed to `propose`: the
lookahead policy's gate and trimming, the request's logits processors and the grammar's
committed state. Nothing is set on the drafter itself."""

from __future__ import annotations

import dataclasses

import pytest

from engine import Engine
from engine.decoding.drafting.drafters import DraftContext, Drafter, ModelDrafter, PromptLookupDrafter, Proposal
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
    assert all(r == DraftContext() for r in seen), seen  # nothing asked: the defaults

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
