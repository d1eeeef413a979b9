"""The first half of a slots' step: every stepping slot's plan (`Decoder.planning`), the draft
model's decodes of all the slots drafting with it made together (`DraftBatch.run`), so too an
MTP head's (`HeadBatch.run`), and Auto in each slot planning under what the others put in the
shared pass (`BatchLoad`)."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from ..decoder import StepPlan
from ..drafting.batched_drafter import DraftBatch
from ..drafting.cost_model import BatchLoad, expected_tokens
from ..drafting.drafter_api import DraftRows, Steps
from ..drafting.mtp_drafter import HeadBatch

__all__ = ["plan_slots"]


def plan_slots(stepping: Sequence[Any],
               batches: Mapping[Any, DraftBatch | HeadBatch], finish: Callable[[Any], None],
               fail: Callable[[Any, BaseException], None]) -> dict[int, StepPlan]:
    """Each stepping slot's plan, by its place in `stepping` (a slot whose run ended is handed
    to `finish`, one whose planning raised to `fail`; neither has a plan). The slots drafting
    with a draft model (or an MTP head) draft together, a pass at a time: their catch-up tokens
    and a new slot's read of its prompt (a chunk a pass, in the room the drafting slots leave),
    one decode per draft position with a row per slot still drafting; each slot's drafting is
    then priced at its share of those passes (`StepPlan.draft_s`), not at the wall time of all
    of them. Auto in a slot plans under what the slots before it put in the pass (their rows,
    or 1 + k while they draft) plus a row and a token for each slot after it (prompts read in
    the pass are no load: `BatchLoad`)."""
    steps: dict[int, Steps[StepPlan | None]] = {}
    wants: dict[int, DraftRows] = {}
    plans: dict[int, StepPlan] = {}
    spent: dict[int, float] = {}

    def load(i: int) -> BatchLoad:
        rows, tokens = 0, 0.0
        for j in range(i):
            if j in plans:
                rows, tokens = rows + len(plans[j].rows), tokens + _expected(stepping[j], plans[j])
            elif j in wants:
                k = wants[j].k
                rows, tokens = rows + 1 + k, tokens + expected_tokens(k, stepping[j].decoder.cost.alpha)
        later = len(stepping) - i - 1  # a row and a token each at least
        return BatchLoad(rows + later, tokens + later)

    def advance(i: int, row: Any) -> None:
        slot = stepping[i]
        try:
            with slot.decoder.cost.loaded(load(i)):
                if i not in steps:
                    steps[i] = slot.decoder.planning(slot.run)
                wants[i] = steps[i].send(row)
        except StopIteration as done:
            wants.pop(i, None)
            if done.value is None:  # limits or a cancel ended it
                finish(slot)
            else:
                plans[i] = done.value
                if i in spent:
                    done.value.draft_s = spent[i]
        except BaseException as e:
            wants.pop(i, None)
            fail(slot, e)

    for i in range(len(stepping)):
        advance(i, None)
    left: dict[Any, dict[int, list[int]]] = {}  # per batch, each want's tokens not decoded yet
    reads: dict[int, float] = {}  # a slot's read's seconds so far (timed apart from its drafting)
    while wants:
        for shared in {w.ctx.shared for w in wants.values()}:  # a pass of each batch, then the next
            mine = {i: w for i, w in wants.items() if w.ctx.shared is shared}
            try:
                rows, seconds = batches[shared].step(mine, left.setdefault(shared, {}))
            except BaseException as e:  # the draft pass failed for every slot in it
                for i in mine:
                    steps[i].close()
                    del wants[i]
                    left[shared].pop(i, None)
                    fail(stepping[i], e)
                continue
            for i, s in seconds.items():
                if mine[i].reads:
                    reads[i] = reads.get(i, 0.0) + s
                else:
                    spent[i] = spent.get(i, 0.0) + s
            for i, row in rows.items():
                advance(i, reads.pop(i) if mine[i].reads else row)
    return plans


def _expected(slot: Any, plan: StepPlan) -> float:
    """The tokens a slot's plan is expected to give: Auto's own prediction for the k it chose,
    else the acceptance measured so far."""
    k = len(plan.drafts)
    if k == 0:
        return 1.0
    predicted = getattr(slot.run.lookahead.current, "last_prediction", None)
    if predicted is not None and predicted.k == k:
        return predicted.tokens_per_step
    return expected_tokens(k, slot.decoder.cost.alpha)
