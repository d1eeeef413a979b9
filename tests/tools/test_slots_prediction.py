"""The slots prediction on synthetic cases (answers that copy their prompts, so prompt lookup
drafts well): every token is written once whatever the policy and slot count; on a steep
verify curve Auto that knows the load drafts less as slots fill and is never below no draft,
while Auto blind to the load drafts on; on a flat curve both draft."""

from __future__ import annotations

from tools.lookup_replay import Case, curve_function
from tools.slots_prediction import POLICIES, simulate, table

STEEP = curve_function({n: 0.05 * (1 + 0.6 * (n - 1)) for n in (1, 2, 4, 8, 16, 32, 64, 128)})
FLAT = curve_function({n: 0.05 * (1 + 0.01 * (n - 1)) for n in (1, 2, 4, 8, 16, 32, 64, 128)})


def _cases(n: int = 8) -> list[Case]:
    out = []
    for i in range(n):
        body = [(7 * i + j) % 200 + 10 for j in range(40)]
        out.append(Case("s", f"p{i}", body + [5, 6], body[:30] + [1, 2, 3] + body[5:25], 0.1))
    return out


def test_every_token_is_written_once_under_every_policy():
    cases = _cases()
    total = sum(len(c.output) for c in cases)
    for n in (1, 3, 8):
        for policy in POLICIES:
            o = simulate(cases, n, policy, STEEP)
            assert o.tokens == total, (n, policy)
            assert o.accepted <= o.drafted and (policy != "none" or o.drafted == 0)


def test_on_a_steep_curve_the_load_aware_auto_drafts_less_as_slots_fill_and_never_loses():
    cases = _cases()
    load = {n: simulate(cases, n, "load", STEEP) for n in (1, 8)}
    blind = simulate(cases, 8, "blind", STEEP)
    none = {n: simulate(cases, n, "none", STEEP) for n in (1, 8)}
    assert load[1].drafted > 0 and load[1].rate > none[1].rate  # alone, copying pays
    assert load[8].drafted < blind.drafted
    assert load[8].rate >= 0.98 * none[8].rate and load[8].rate >= blind.rate


def test_on_a_flat_curve_both_draft_beside_a_full_batch():
    cases = _cases()
    load, none = simulate(cases, 8, "load", FLAT), simulate(cases, 8, "none", FLAT)
    assert load.drafted > 0 and load.rate > 1.2 * none.rate
    md = table({"flat": [simulate(cases, 8, p, FLAT) for p in POLICIES]})
    assert "| flat | 8 |" in md
