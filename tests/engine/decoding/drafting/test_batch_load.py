"""Auto in a pass shared by parallel slots: a draft pays only for what it adds to the whole
pass, so on a steep (CPU) verify curve the fuller the batch the fewer tokens are verified,
down to none, while on a flat (GPU) curve drafting still pays beside a full batch."""

from __future__ import annotations

from engine.decoding.drafting.cost_model import BatchLoad, CostModel
from engine.decoding.drafting.drafters import Proposal
from engine.decoding.drafting.lookahead import Auto

# Whole-pass cost relative to one row: a 2-core CPU's is close to linear past a few rows
# (docs/benchmarks.md), a GPU's nearly flat (published batch curves: see test_gpu_curves).
CPU_LINEAR = {n: 1.0 + 0.45 * (n - 1) for n in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)}
GPU_FLAT = {n: 1.0 + 0.01 * (n - 1) for n in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)}


def _cost(curve: dict[int, float], held: float = 0.9) -> CostModel:
    """A free drafter's cost model on `curve` whose copies stated 0.9 held `held` of the time."""
    c = CostModel()
    c.free_drafter = True
    for n, t in curve.items():
        c.observe_verify(n, t * 0.05)
    for i in range(400):
        c.observe_acceptance(1, int(i * held) != int((i + 1) * held), [0.9])
    return c


def _trim(cost: CostModel, load: BatchLoad) -> int:
    proposal = Proposal(list(range(12)), [None] * 12, [0.9] * 12)
    with cost.loaded(load):
        return Auto().trim(proposal, cost)


def _others(n: int) -> BatchLoad:
    """n other slots, each with a row and a token expected (their pending tokens)."""
    return BatchLoad(n, float(n))


def test_on_a_steep_curve_the_fuller_the_batch_the_fewer_drafts_down_to_none():
    cost = _cost(CPU_LINEAR)
    ks = [_trim(cost, _others(n)) for n in (0, 1, 3, 7)]
    assert ks[0] >= 2, ks  # alone, drafting pays on this curve
    assert ks == sorted(ks, reverse=True) and ks[-1] < ks[0], ks
    assert ks[-1] == 0, ks  # beside 7 others a row costs as much as it gives


def test_on_a_flat_curve_drafting_still_pays_beside_a_full_batch():
    cost = _cost(GPU_FLAT)
    alone, full = _trim(cost, BatchLoad()), _trim(cost, _others(7))
    assert full >= 1 and full >= alone - 2, (alone, full)


def test_the_load_is_the_planning_slots_alone_and_is_gone_after():
    cost = _cost(CPU_LINEAR)
    with cost.loaded(_others(3)):
        assert cost.snapshot().load == BatchLoad(3, 3.0)
    assert cost.snapshot().load == BatchLoad()
    assert _trim(cost, BatchLoad()) == Auto().trim(Proposal(list(range(12)), [None] * 12, [0.9] * 12), cost)


def test_predicted_speedup_is_the_whole_pass_and_falls_with_the_load():
    cost = _cost(CPU_LINEAR)
    cost.observe_draft(1, 1e-6)  # a draft that costs nothing: the verify curve decides
    speedups = []
    for n in (0, 1, 3, 7):
        with cost.loaded(_others(n)):
            speedups.append(cost.snapshot().predict(3, alpha=0.8).speedup)
    assert speedups == sorted(speedups, reverse=True) and speedups[0] > 1.0 > speedups[-1], speedups
    # alone it is the single-sequence formula: E(k) / T(k + 1) against 1 / T(1)
    costs = cost.snapshot()
    e = (1 - 0.8 ** 4) / (1 - 0.8)
    t = costs.draft_time(3) + costs.verify_time(4)
    assert abs(costs.predict(3, alpha=0.8).speedup - (e / t) * costs.verify_time(1)) < 1e-9


def test_prompt_rows_read_in_the_pass_do_not_make_a_draft_look_cheap():
    """Reading a prompt's rows is done whatever a slot drafts: counted as load (verify rows, as
    they were) they made the pass look long and each draft row beside them nearly free, and
    prompt lookup at 8 clients ran at 0.87x of no draft. The slots plan without them."""
    cost = _cost(CPU_LINEAR)
    beside_slots = _trim(cost, _others(3))
    as_verify_rows = _trim(cost, BatchLoad(3 + 40, 3.0))  # the old pricing: 40 prompt rows as verify rows
    assert beside_slots < as_verify_rows, (beside_slots, as_verify_rows)


def test_a_long_free_proposal_is_verified_at_most_twice_as_wide_as_any_pass_measured():
    """Confidences of 0.999 on a flat curve would verify all 200 tokens in one pass; Auto goes no
    wider than twice the widest pass it has measured (at least 16), and wider as wider passes are
    measured (a suffix draft's 238 tokens once went in one CPU pass: 13 accepted, 2 s)."""
    cost = CostModel()
    cost.free_drafter = True
    for n in (1, 2, 4, 8):
        cost.observe_verify(n, 0.05 * (1.0 + 0.01 * (n - 1)))
    for _ in range(400):
        cost.observe_acceptance(1, 1, [0.999])
    proposal = Proposal(list(range(200)), [None] * 200, [0.999] * 200)
    assert Auto().trim(proposal, cost) == 16
    cost.observe_verify(40, 0.05 * 1.4)
    assert Auto().trim(proposal, cost) == 80
