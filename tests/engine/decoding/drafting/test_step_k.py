"""A step's k is a lookahead: when Auto takes a free proposal beside a model draft, the k the
step reports is what it verified of that proposal, not the room it offered it (the app's 0-16
Lookahead readout showed 498, 490 and 119 while Auto verified at most 2)."""

from __future__ import annotations

from engine import Engine
from engine.decoding.drafting.lookahead import MAX_LOOKAHEAD
from engine.decoding.events import StepEvent

from test_mixed_drafter import Alternate


def test_a_free_proposal_step_reports_the_tokens_verified_not_the_room(tiny_target):
    eng = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False, history_draft=False)
    try:
        prompt = "the value of the data in the class "
        eng.generate(prompt, draft_model=str(tiny_target), lookahead="auto", max_tokens=60)  # an answer in memory
        done = eng.generate(prompt, draft_model=str(tiny_target), lookahead=Alternate(), max_tokens=120)
    finally:
        eng.close()
    steps: list[StepEvent] = done.step_events
    free = sum(n for src, n in done.stats.accepted_by.items() if src != "model")
    assert free > 0, "Auto took free proposals in this run"
    assert all(ev.drafted <= ev.k for ev in steps)
    assert all(ev.k <= max(ev.drafted, MAX_LOOKAHEAD) for ev in steps), [(ev.k, ev.drafted) for ev in steps]
    assert max(ev.k for ev in steps) < 100  # the room a free proposal is offered: 119 left of 120 at the start
