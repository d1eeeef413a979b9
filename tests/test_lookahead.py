"""The cost model and the Auto controller, on synthetic timings (no clock involved)."""

from __future__ import annotations

import threading

import pytest

from engine.lookahead import Auto, CostModel, Fixed, expected_tokens, parse_lookahead

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
    import engine.lookahead as la

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
