"""A draft model loaded when first needed (`Engine(draft_when_needed=True)`, what `tandem generate`
and `tandem ask` use): a run whose policy never drafts with the model never loads it, Auto prices
the load before it decides to, and a draft loaded at the start or in the middle of an answer
keeps greedy output identical to the target alone."""

from __future__ import annotations

import argparse

import pytest

from engine import Engine
from engine.decoding.drafting import lazy_drafter
from engine.decoding.drafting.cost_model import CostModel
from engine.decoding.drafting.lazy_drafter import LazyModelDrafter
from engine.decoding.drafting.lookahead import Auto, Fixed

PROMPT = "the value of the list and the data of the value"


class _LaterK(Fixed):
    """No draft for the first `after` steps, then k a step: the draft loads mid-answer."""

    def __init__(self, k: int, after: int):
        super().__init__(k)
        self.after, self.steps = after, 0

    def choose(self, room, cost, unread=0):
        self.steps += 1
        return 0 if self.steps <= self.after else super().choose(room, cost, unread)

    @property
    def drafts_from_start(self) -> bool:
        return False

    def fresh(self) -> "_LaterK":
        return _LaterK(self.k, self.after)


@pytest.fixture
def lazy(tiny_target):
    e = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False, prompt_cache=False, draft_when_needed=True)
    yield e
    e.close()


@pytest.fixture(scope="module")
def alone(tiny_target):
    e = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False, prompt_cache=False)
    yield e.generate(PROMPT, max_tokens=40).tokens
    e.close()


def _lazy(eng: Engine, draft) -> LazyModelDrafter:
    inner = eng.decoder(str(draft)).drafter.model_drafter
    assert isinstance(inner, LazyModelDrafter)
    return inner


def test_a_run_that_never_drafts_with_the_model_never_loads_it(lazy, tiny_draft, alone):
    out = lazy.generate(PROMPT, draft_model=str(tiny_draft), lookahead=0, max_tokens=40)
    assert out.tokens == alone
    d = _lazy(lazy, tiny_draft)
    assert not d.loaded and d.contexts == [] and not lazy._drafts  # no Model of the draft was made
    assert d.model.path == tiny_draft.resolve() and d.pending_load_s > 0  # named and priced by its file


@pytest.mark.parametrize("policy", [lambda: Fixed(3), lambda: _LaterK(3, after=5)], ids=["from the start", "mid-answer"])
def test_a_draft_loaded_when_needed_keeps_the_targets_greedy_output(lazy, tiny_draft, alone, policy):
    out = lazy.generate(PROMPT, draft_model=str(tiny_draft), lookahead=policy(), max_tokens=40)
    assert out.tokens == alone
    d = _lazy(lazy, tiny_draft)
    assert d.loaded and d.pending_load_s == 0 and d.load_s is not None and len(d.contexts) == 1
    assert out.stats.drafted > 0 and out.stats.draft_sync_s > 0  # it read the context, then drafted


def test_auto_leaves_the_model_unloaded_where_its_load_cannot_pay(lazy, tiny_draft, alone, monkeypatch):
    monkeypatch.setattr(lazy_drafter, "LOAD_S_PER_GB", 1e9)  # a load that no answer can pay back
    out = lazy.generate(PROMPT, draft_model=str(tiny_draft), lookahead="auto", max_tokens=40)
    assert out.tokens == alone
    assert not _lazy(lazy, tiny_draft).loaded


def test_auto_counts_the_load_beside_the_reading():
    auto, cost = Auto(), CostModel()
    for _ in range(8):
        cost.observe_verify(1, 0.03)
        cost.observe_verify(4, 0.04)
        cost.observe_draft(4, 0.004)
        cost.observe_acceptance(4, 4)
    costs = cost.snapshot()
    best = costs.best(4)
    assert best.k > 0
    assert auto._reading_pays(costs, best, 0, 256) and auto._reading_pays(costs, best, 0, 256, 0.0)
    assert not auto._reading_pays(costs, best, 0, 256, 60.0)  # a minute's load: nothing pays it back
    assert auto.choose(256, cost, 0) > 0
    cost.draft_load_s = 60.0  # what the decoder sets from its drafter before Auto chooses
    assert auto.fresh().choose(256, cost, 0) == 0


def test_an_assistant_or_bridged_draft_and_the_servers_engine_load_as_before(tiny_target, tiny_draft):
    e = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False, prompt_cache=False)
    try:
        assert not isinstance(e.decoder(str(tiny_draft)).drafter.model_drafter, LazyModelDrafter)
    finally:
        e.close()


def test_the_one_shot_commands_engine_loads_its_draft_when_needed(tiny_target):
    from engine.cli.rpc import engine_for
    from engine.llamacpp.runtime import RuntimeParams

    args = argparse.Namespace(rpc=None, projector=None, no_history_draft=True)
    for one_shot in (True, False):
        e = engine_for(tiny_target, RuntimeParams(n_ctx=256), args, one_shot=one_shot)
        try:
            assert e.draft_when_needed is one_shot
        finally:
            e.close()
