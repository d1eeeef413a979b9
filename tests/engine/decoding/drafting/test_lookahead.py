"""The cost model and the Auto controller, on synthetic timings (no clock involved)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from engine.decoding.drafting.cost_model import CostModel, expected_tokens

from engine.decoding.drafting.lookahead import Auto, Fixed, parse_lookahead

# Verify cost relative to one token, as measured on the 2-core CPU for the 1.5B target.
CPU_CURVE = {1: 1.0, 2: 1.35, 3: 1.8, 4: 2.2, 6: 3.0, 8: 4.0, 12: 4.5, 16: 4.5}
GPU_CURVE = {1: 1.0, 2: 1.02, 4: 1.05, 8: 1.1, 16: 1.2}


def _model(curve, draft_ratio, alpha, steps=50):
    c = CostModel()
    for n, t in curve.items():
        c.observe_verify(n, t * 0.030)
    c.observe_draft(4, 4 * draft_ratio * 0.030)
    acc = 0.0
    for _ in range(steps):  # one-token drafts, a fraction alpha of them accepted (evenly spread)
        before = int(acc)
        acc += alpha
        c.observe_acceptance(1, int(acc) - before)
    return c


def test_expected_tokens_formula():
    assert expected_tokens(0, 0.9) == 1.0
    assert expected_tokens(4, 1.0) == 5.0
    assert expected_tokens(3, 0.5) == pytest.approx((1 - 0.5**4) / 0.5)


def test_interpolation_between_measured_batch_sizes():
    c = CostModel()
    c.observe_verify(1, 1.0)
    c.observe_verify(4, 2.2)
    assert c.verify_time(2) == pytest.approx(1.4)
    assert c.verify_time(6) > c.verify_time(4)  # extrapolates upwards


def test_past_the_widest_measured_pass_a_token_costs_no_more_than_the_prior_says():
    """A new process seeded with a stored curve of 1 and 2 tokens only (2 at 1.9x one, the
    steep end of a curve that flattens: 17 tokens cost 6-7x one, measured) must not price a
    wide pass by that first slope (17 at 16x), or a quote's confident lookup proposal is never
    verified, and the wider passes that would correct the price are never measured."""
    c = CostModel()
    c.free_drafter = True
    c.import_costs({"verify_s": {"1": 0.042, "2": 0.0805}})
    assert c.verify_time(17) == pytest.approx(0.0805 + 15 * 0.5 * 0.042)
    assert c.verify_time(17) < 10 * c.verify_time(1)
    proposal = SimpleNamespace(tokens=list(range(16)), confidence=[0.9] * 16)
    assert Auto().trim(proposal, c) >= 3
    flat = CostModel()  # a gentler measured slope than the prior's stays the one used
    flat.observe_verify(1, 1.0)
    flat.observe_verify(4, 1.3)
    assert flat.verify_time(8) == pytest.approx(1.3 + 4 * 0.1)


def test_auto_falls_back_to_target_alone_when_the_draft_is_too_slow():
    # the default pair on a 2-core CPU: draft ~0.65x the target's step, even alpha=0.95 loses
    c = _model(CPU_CURVE, 0.65, 0.95)
    auto = Auto()
    assert [auto.choose(16, c) for _ in range(100)] == [0] * 100  # no wasted probes either
    assert c.best(16).k == 0


def test_auto_drafts_long_on_a_gpu_like_curve():
    c = _model(GPU_CURVE, 0.05, 0.9)
    k = Auto().choose(16, c)
    assert k >= 6
    assert c.predict(k).speedup > 2.5


def test_auto_is_cheap_lookup_friendly_on_cpu():
    # prompt lookup costs nothing to draft; with high acceptance a few tokens pay on CPU
    c = _model(CPU_CURVE, 0.0, 0.95)
    assert 2 <= Auto().choose(16, c) <= 16
    low = _model(CPU_CURVE, 0.0, 0.2)
    auto = Auto()
    picks = [auto.choose(16, low) for _ in range(40)]
    assert picks.count(0) >= 35 and max(picks) <= 2  # mostly off, rare small probes


def test_auto_respects_room():
    c = _model(GPU_CURVE, 0.05, 0.95)
    assert Auto().choose(3, c) <= 3
    assert Auto().choose(0, c) == 0


def test_acceptance_estimate_tracks_recent_steps():
    c = CostModel()
    for _ in range(30):
        c.observe_acceptance(4, 4)
    high = c.alpha
    for _ in range(30):
        c.observe_acceptance(4, 0)
    assert high > 0.85 and c.alpha < 0.2


def test_fixed_can_be_changed_from_another_thread():
    f = Fixed(2)
    t = threading.Thread(target=f.set, args=(7,))
    t.start()
    t.join()
    assert f.choose(16, CostModel()) == 7
    assert f.choose(3, CostModel()) == 3
    f.set(99)
    assert f.k == 16


def test_parse_lookahead():
    assert isinstance(parse_lookahead("auto"), Auto)
    assert parse_lookahead("5").k == 5  # type: ignore[attr-defined]
    with pytest.raises(ValueError):
        parse_lookahead("many")
    with pytest.raises(ValueError):
        parse_lookahead(17)


def test_one_slow_step_does_not_flip_auto():
    """A plain step that waited for a busy CPU must not make speculation look good."""
    c = _model(CPU_CURVE, 0.65, 0.95)
    for _ in range(4):
        c.observe_verify(1, 0.030)
    c.observe_verify(1, 0.300)  # one step 10x slower (another process ran)
    assert Auto().choose(16, c) == 0


def test_auto_remeasures_plain_decoding_now_and_then():
    c = _model(GPU_CURVE, 0.05, 0.9)
    auto = Auto()
    picks = [auto.choose(16, c) for _ in range(2 * Auto.REFRESH_EVERY)]
    assert picks.count(0) == 2 and min(p for p in picks if p) >= 6


def test_costs_measured_under_old_load_are_forgotten(monkeypatch):
    """Plain steps timed while another process ran must not be compared with batch
    timings taken later on a quiet machine."""
    import engine.decoding.drafting.cost_model as la

    now = [1000.0]
    monkeypatch.setattr(la.time, "monotonic", lambda: now[0])
    c = _model(CPU_CURVE, 0.65, 0.95)  # quiet machine: speculation does not pay
    for _ in range(9):
        c.observe_verify(1, 0.300)  # ... but plain steps were slow (busy machine)
    assert c.verify_time(1) == 0.300
    now[0] += la.CostModel.RECENT_S + 1
    for n, t in CPU_CURVE.items():  # later, everything re-measured on a quiet machine
        c.observe_verify(n, t * 0.030)
    assert c.verify_time(1) == 0.030
    assert Auto().choose(16, c) == 0


def test_probes_back_off_while_they_do_not_change_the_decision():
    """Drafting would pay only if the draft were right more often; probes keep finding the
    same mediocre acceptance, so they must thin out (8, 24, 56, 120... steps), not repeat."""
    c = _model(CPU_CURVE, 0.25, 0.5)
    assert Auto().choose(16, c) == 0
    auto = Auto()
    probes = []
    for step in range(512):
        k = auto.choose(16, c)
        if k:
            probes.append(step)
            c.observe_acceptance(2, 1)  # the probe finds the same ~50% acceptance
            auto.feedback(2, 1)
    assert 3 <= len(probes) <= 7, probes
    gaps = [b - a for a, b in zip(probes, probes[1:])]
    assert gaps == sorted(gaps)  # exponential back-off


def test_confidence_calibration_round_trips_and_stays_adaptable():
    """What a drafter's confidences turned out to be worth is kept for the next process,
    capped so that new text still moves it; malformed or foreign data is ignored."""
    a = CostModel()
    for _ in range(200):  # says 0.9, is right half the time
        a.observe_acceptance(2, 1, [0.9, 0.9])
    assert a.calibrated_confidence(0.9) < 0.6
    data = a.export_confidence()
    assert max(data["total"]) <= CostModel.CONF_KEEP
    b = CostModel()
    assert b.calibrated_confidence(0.9) == pytest.approx(0.9)
    b.import_confidence(data)
    assert b.calibrated_confidence(0.9) < 0.6  # the earlier measurement, not the stated 0.9
    for _ in range(60):  # the new text is copied: the bucket follows
        b.observe_acceptance(2, 2, [0.9, 0.9])
    assert b.calibrated_confidence(0.9) > 0.75
    c = CostModel()
    for bad in ({}, {"hits": [1] * 3, "total": [1] * 3}, {"hits": ["x"] * 20, "total": [1] * 20},
                {"hits": [5] * 20, "total": [1] * 20}, {"hits": [float("nan")] * 20, "total": [1] * 20}):
        c.import_confidence(bad)
        assert c.calibrated_confidence(0.9) == pytest.approx(0.9)
    b.import_confidence(data)  # a model that measured its own keeps them
    assert b.calibrated_confidence(0.9) > 0.75


# Verify cost relative to one token on the 2-core EPYC (docs/benchmarks.md, section 9):
# nearly linear up to 8 tokens, and a pass over 16 cheaper than over 15 (ggml's kernel choice).
EPYC_CURVE = {1: 1.0, 2: 1.66, 3: 2.34, 4: 3.05, 5: 4.05, 8: 7.43, 15: 10.66, 16: 8.91, 17: 9.32}


def _lookup_cost(held: float) -> CostModel:
    """A free drafter's cost model whose calibration (other texts) says established copies
    (stated 0.93) held a fraction `held` of the time."""
    c = CostModel()
    c.free_drafter = True
    for n, t in EPYC_CURVE.items():
        c.observe_verify(n, t * 0.045)
    for i in range(400):
        c.observe_acceptance(1, int(i * held) != int((i + 1) * held), [0.93])
    return c


def test_a_text_earns_long_drafts_and_loses_them_by_its_own_evidence():
    """The calibration learned on code edits trusts long copies. A new text verifies a long
    proposal only once its own copies have held (verified or not: free evidence), and stops
    as soon as they fail, whatever the calibration says."""
    from engine.decoding.drafting.drafters import Proposal
    from engine.decoding.drafting.cost_model import TextAcceptance

    cost = _lookup_cost(held=0.995)
    auto = Auto()
    long = Proposal(list(range(15)), [None] * 15, [0.93] * 15)
    text = TextAcceptance(cost)
    fresh = auto.trim(long, cost, text)
    assert 1 <= fresh <= 4  # a bucket this text has not tried yet: short drafts only
    for _ in range(30):
        text.observe_one(0.93, True)
    earned = auto.trim(long, cost, text)
    assert earned == 15 > fresh
    assert auto.trim(long, cost) == 15  # the calibration alone says the same
    report = TextAcceptance(cost)
    for _ in range(4):  # a report that paraphrases: its copies break after a few tokens
        report.observe(([0.93] * 15), 15, 3)
    assert report.confidence(0.93) < 0.85 < cost.calibrated_confidence(0.93)
    assert auto.trim(long, cost, report) < fresh
    assert auto.trim(long, cost) == 15  # the calibration across texts still trusts them


def test_a_text_never_trusts_a_bucket_more_than_the_calibration():
    """Lucky guesses in one text must not start costly verifies the calibration advises
    against: a text can only lower a bucket's trust."""
    from engine.decoding.drafting.cost_model import TextAcceptance

    cost = _lookup_cost(held=0.5)
    text = TextAcceptance(cost)
    for _ in range(100):
        text.observe_one(0.93, True)
    assert text.confidence(0.93) == pytest.approx(cost.calibrated_confidence(0.93))
    assert text.confidence(0.93) < 0.6
    other = TextAcceptance(cost)  # texts do not share their evidence
    assert other.confidence(0.93) < text.confidence(0.93)


def test_a_stalled_pass_is_not_taken_for_its_cost():
    """A pass the machine paused for seconds is a stall, not what that batch size costs: kept,
    it would stop Auto drafting that size for good (and be stored for the next process)."""
    c = CostModel()
    for n, t in EPYC_CURVE.items():
        c.observe_verify(n, t * 0.045)
    c.observe_verify(3, 3.3)
    assert c.verify_s[3] == pytest.approx(2.34 * 0.045)
    c.observe_verify(3, 2.9 * 0.045)  # slower, but a cost: kept
    assert c.verify_s[3] > 2.34 * 0.045
    stored = CostModel()
    stored.import_costs({"verify_s": {"16": 0.40, "3": 1.69, "1": 0.045}})  # a store that kept one
    assert 3 not in stored.verify_s and stored.verify_s[16] == pytest.approx(0.40)


def test_wider_passes_keep_their_ratio_to_one_token_when_the_load_changes():
    """A size drafted rarely is priced as its typical multiple of a one-token pass now, not
    as its last absolute time measured under another load."""
    c = CostModel()
    c.observe_verify(1, 0.040)
    c.observe_verify(3, 0.100)  # 2.5x
    for _ in range(9):
        c.observe_verify(1, 0.080)  # the machine got twice as slow
    assert c.verify_s[3] == pytest.approx(0.200)
    assert c.export_costs()["verify_s"]["3"] == pytest.approx(0.200)
    stored = CostModel()
    stored.import_costs({"verify_s": {"1": 0.050, "3": 0.120}})
    stored.observe_verify(1, 0.025)
    assert stored.verify_s[3] == pytest.approx(0.060)  # 2.4x of today's one-token pass


def test_a_wider_pass_measured_in_a_quiet_moment_does_not_look_cheaper():
    """On a machine shared with other programs, one 7-token pass timed at 1.05x a one-token
    pass (while 3 tokens cost 2.7x) made Auto verify 6 lookup tokens a step at half acceptance,
    three times slower than target alone. No wider pass is priced below a narrower one."""
    from engine.decoding.drafting.drafters import Proposal

    c = CostModel()
    for _ in range(9):
        c.observe_verify(1, 0.30)
    for _ in range(3):
        c.observe_verify(3, 0.81)
    c.observe_verify(7, 0.315)
    v = c.verify_s
    assert list(v) == sorted(v) and all(v[a] <= v[b] for a, b in zip(sorted(v), sorted(v)[1:]))
    assert v[7] >= v[3] * 0.9  # pooled with the better-measured 3-token pass, not 1.05x
    assert v[1] == pytest.approx(0.30)
    c.free_drafter = True
    half = Proposal(list(range(8)), [None] * 8, [0.5] * 8)
    assert Auto().trim(half, c) < 6
    for _ in range(9):  # measured cheap again and again: nine samples outweigh the three
        c.observe_verify(7, 0.33)
    assert c.verify_s[7] < 0.81 * 0.7


def test_non_decreasing_keeps_a_rising_curve_and_pools_by_weight():
    from engine.decoding.drafting.cost_model import non_decreasing

    assert non_decreasing({1: (1.0, 9), 2: (1.4, 3), 4: (2.2, 1)}) == {1: 1.0, 2: 1.4, 4: 2.2}
    pooled = non_decreasing({1: (1.0, 9), 3: (2.7, 3), 7: (1.05, 1)})
    assert pooled[3] == pooled[7] == pytest.approx((2.7 * 3 + 1.05) / 4)
    assert pooled[1] == 1.0


def test_auto_counts_the_drafts_reading_of_a_long_prompt():
    """Issue #47: a model draft reads the prompt the first time Auto drafts with it. On a long
    prompt (a document) that reading can cost more than drafting would save over the answer:
    then Auto does not draft with the model (the free drafters, which read nothing, still may)."""
    ROOM = 1000  # tokens the answer may still have: the reading is paid back over at most 256 of them
    c = _model(CPU_CURVE, 0.1, 0.8)
    c.draft_ratio_prior = 0.1  # a draft a tenth of the target: reads a token at a tenth of its batched cost
    assert Auto().choose(16, c) > 0  # drafting pays, once the draft has read the prompt
    assert Auto().choose(ROOM, c, unread=500) > 0  # a chat turn's prompt: worth reading
    assert Auto().choose(ROOM, c, unread=8000) == 0  # a document: reading costs more than 256 tokens save
    auto = Auto()
    assert [auto.choose(ROOM, c, unread=8000) for _ in range(50)] == [0] * 50  # nor, later, a probe
    c.observe_draft_read(8000, 0.8)  # measured: this draft reads fast (a GPU)
    assert Auto().choose(ROOM, c, unread=8000) > 0
    short = _model(CPU_CURVE, 0.1, 0.8)
    short.draft_ratio_prior = 0.1
    assert Auto().choose(20, short, unread=500) == 0  # 20 tokens left to write: not worth reading 500
