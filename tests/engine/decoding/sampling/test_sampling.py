"""The target's distribution under each filter, and the acceptance rule on synthetic logits."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from engine.errors import TandemError
from engine.decoding.sampling.sampler import Dist, Sampler, SamplingParams, distribution, verify


def test_greedy_is_argmax():
    s = Sampler(SamplingParams())
    assert s.pick(np.array([0.1, 3.0, 2.9])) == 1


def test_filters_follow_llama_cpp_order():
    logits = np.log(np.array([0.5, 0.2, 0.15, 0.1, 0.05]))
    d = distribution(logits, SamplingParams(temperature=1.0, top_k=3))
    assert sorted(d.ids.tolist()) == [0, 1, 2]
    assert d.probs.sum() == pytest.approx(1.0)
    assert d.prob(0) == pytest.approx(0.5 / 0.85)
    d = distribution(logits, SamplingParams(temperature=1.0, top_p=0.7))
    assert sorted(d.ids.tolist()) == [0, 1]  # 0.5 + 0.2 reaches 0.7
    d = distribution(logits, SamplingParams(temperature=1.0, min_p=0.35))
    assert sorted(d.ids.tolist()) == [0, 1]  # >= 0.175 = 0.35 * 0.5
    # temperature applies after the filters: flatter, same support
    cold = distribution(logits, SamplingParams(temperature=1.0, top_k=3))
    hot = distribution(logits, SamplingParams(temperature=2.0, top_k=3))
    assert sorted(hot.ids.tolist()) == [0, 1, 2]
    assert hot.prob(0) < cold.prob(0) and hot.prob(2) > cold.prob(2)


def test_top_p_on_a_large_flat_vocabulary_is_exact():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal(50_000) * 0.01  # nearly flat: the nucleus is huge
    d = distribution(logits, SamplingParams(temperature=1.0, top_p=0.5))
    p = np.exp(logits - logits.max())
    p /= p.sum()
    order = np.argsort(-p, kind="stable")
    cut = int(np.searchsorted(np.cumsum(p[order]), 0.5)) + 1
    assert set(d.ids.tolist()) == set(order[:cut].tolist())


def test_bad_parameters_are_rejected():
    for kw in ({"temperature": -1}, {"top_p": 0.0}, {"top_p": 1.5}, {"min_p": 1.0}, {"top_k": -2}):
        with pytest.raises(TandemError):
            SamplingParams(**kw)


def test_greedy_verify_accepts_matching_prefix():
    logits = np.zeros((4, 10))
    for row, tok in enumerate([3, 5, 7, 9]):
        logits[row, tok] = 1.0
    s = Sampler()
    r = verify([3, 5, 1], [None] * 3, logits, s)
    assert (r.accepted, r.token, r.corrected) == (2, 7, True)
    r = verify([3, 5, 7], [None] * 3, logits, s)
    assert (r.accepted, r.token, r.corrected) == (3, 9, False)
    r = verify([], [], logits[:1], s)
    assert (r.accepted, r.token) == (0, 3)


def test_sampling_rule_gives_the_target_distribution_for_any_draft():
    """One position, analytic check: P(first emitted token) must equal p exactly."""
    p_logits = np.log(np.array([0.4, 0.3, 0.2, 0.1]))
    params = SamplingParams(temperature=1.0, seed=123)
    p = distribution(p_logits, params)
    q_cases = [np.array([0.1, 0.1, 0.1, 0.7]), np.array([0.25, 0.25, 0.25, 0.25]), np.array([0.0, 0.0, 1.0, 0.0])]
    n = 20000
    for qv in q_cases:
        s = Sampler(params)
        q = Dist(np.arange(4), qv)
        counts = np.zeros(4)
        for _ in range(n):
            d = s.draw(q)
            r = verify([d], [q], np.vstack([p_logits, p_logits]), s)
            counts[d if r.accepted else r.token] += 1
        expected = np.array([p.prob(i) for i in range(4)]) * n
        assert sps.chisquare(counts, expected).pvalue > 0.01, (qv, counts)


def test_sampling_is_reproducible_per_seed():
    logits = np.random.default_rng(1).standard_normal(100)
    a = [Sampler(SamplingParams(temperature=0.8, seed=7)).pick(logits) for _ in range(3)]
    b = [Sampler(SamplingParams(temperature=0.8, seed=7)).pick(logits) for _ in range(3)]
    assert a == b
