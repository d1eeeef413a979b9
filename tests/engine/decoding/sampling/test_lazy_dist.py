"""The sampler's lazy distribution draws exactly what `distribution` describes.

`Sampler.draw` proposes from the raw softmax and accepts by top-p, min-p and temperature
(rejection sampling, no sort); these tests compare its draws with the reference filters of
`distribution` on a vocabulary wider than one block, with tied logits at the top-p cut.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine.decoding.sampling.distribution import LazyDist
from engine.decoding.sampling.sampler import Dist, Sampler, SamplingParams, distribution

CHI2_DF19_P001 = 43.82  # chi-square critical value, 19 degrees of freedom, p = 0.001


def _logits(n: int = 2600, levels: int = 20, seed: int = 0) -> np.ndarray:
    """Tokens on `levels` logit values (many ties, as zeroed output rows give), shuffled."""
    rng = np.random.default_rng(seed)
    values = np.linspace(0.0, -3.0, levels).astype(np.float32)
    return values[rng.integers(0, levels, size=n)]


@pytest.mark.parametrize("params", [
    SamplingParams(temperature=0.7, top_p=0.9),
    SamplingParams(temperature=1.0, top_p=0.5, min_p=0.3),
    SamplingParams(temperature=0.4),
])
def test_draws_follow_the_reference_distribution(params):
    logits = _logits()
    ref = distribution(logits.astype(np.float64), params)
    lazy = LazyDist(logits, params)
    assert set(lazy.ids.tolist()) == set(ref.ids.tolist())  # the same tokens, ties cut by id
    sparse = dict(zip(lazy.ids.tolist(), lazy.probs.tolist()))
    for t, p in zip(ref.ids.tolist(), ref.probs.tolist()):
        assert sparse[t] == pytest.approx(p, rel=1e-5)
    sampler = Sampler(SamplingParams(params.temperature, top_p=params.top_p, min_p=params.min_p, seed=7))
    n_draws = 12000
    draws = np.array([sampler.draw(LazyDist(logits, params)) for _ in range(n_draws)])
    kept = set(ref.ids.tolist())
    assert all(int(t) in kept for t in np.unique(draws))
    # per logit level (tokens of one level are equally likely): counts against expectations
    level_of = {v: i for i, v in enumerate(np.unique(logits))}
    expected = np.zeros(len(level_of))
    for t, p in zip(ref.ids.tolist(), ref.probs.tolist()):
        expected[level_of[logits[t]]] += p * n_draws
    observed = np.bincount([level_of[logits[t]] for t in draws], minlength=len(level_of))
    used = expected > 0
    assert observed[~used].sum() == 0
    chi2 = float((((observed - expected) ** 2)[used] / expected[used]).sum())
    assert chi2 < CHI2_DF19_P001, f"chi-square {chi2:.1f} over {int(used.sum())} levels"


def test_a_drawn_token_has_the_probability_the_sparse_form_gives_it():
    params = SamplingParams(temperature=0.7, top_p=0.9)
    sampler = Sampler(SamplingParams(0.7, top_p=0.9, seed=3))
    rng = np.random.default_rng(1)
    for _ in range(200):
        d = LazyDist((rng.standard_normal(3000) * 0.2).astype(np.float32), params)
        assert d.prob(sampler.draw(d)) > 0.0


def test_top_k_and_hot_temperatures_use_the_reference_filters():
    logits = _logits(seed=2)
    for params in (SamplingParams(temperature=0.8, top_k=5), SamplingParams(temperature=1.5, top_p=0.8)):
        lazy, ref = LazyDist(logits, params), distribution(logits.astype(np.float64), params)
        assert lazy.ids.tolist() == ref.ids.tolist()
        assert np.allclose(lazy.probs, ref.probs)


@pytest.mark.parametrize("offset", [-7.0, 40.0, 95.0])
def test_draws_are_exact_whether_or_not_the_logits_are_shifted_by_their_max(offset):
    """exp(x) is taken unshifted while the top logit is in [0, 80] (a pass saved) and shifted
    outside it (no overflow, no underflow): both must draw the reference distribution, and
    a block of the vocabulary must be chosen by its mass, a token in it by its own."""
    logits = _logits(seed=5) + np.float32(offset)
    params = SamplingParams(temperature=0.7, top_p=0.9)
    ref = distribution(logits.astype(np.float64), params)
    lazy = LazyDist(logits, params)
    sparse = dict(zip(lazy.ids.tolist(), lazy.probs.tolist()))
    assert set(sparse) == set(ref.ids.tolist())
    for t, p in zip(ref.ids.tolist(), ref.probs.tolist()):
        assert sparse[t] == pytest.approx(p, rel=1e-5)
    sampler = Sampler(SamplingParams(0.7, top_p=0.9, seed=11))
    n_draws = 8000
    draws = np.array([sampler.draw(LazyDist(logits, params)) for _ in range(n_draws)])
    expected = np.zeros(logits.shape[0])
    expected[ref.ids] = ref.probs * n_draws
    assert set(np.unique(draws).tolist()) <= set(ref.ids.tolist())
    # per block of the proposal (2600 tokens = 3 blocks of 1024): the block choice is exact
    blocks = np.arange(logits.shape[0]) // LazyDist.BLOCK
    observed_b = np.bincount(blocks[draws], minlength=blocks.max() + 1)
    expected_b = np.bincount(blocks, weights=expected, minlength=blocks.max() + 1)
    chi2 = float(((observed_b - expected_b) ** 2 / expected_b).sum())
    assert chi2 < 13.82, f"block chi-square {chi2:.1f}"  # 2 degrees of freedom, p = 0.001


def _tied_rows():
    """Random rows with ties, and rows built so that ties decide: three tied tops holding
    nearly all the mass under top-p 0.3 (only the first is inside), and a pair tied across
    the cut after one big token (the first of the pair is inside, the second is not)."""
    rng = np.random.default_rng(0)
    for seed in range(4):
        x = (rng.standard_normal(3000) * (0.5 + seed)).astype(np.float32)
        x[[7, 900, 2500]] = x.max()
        x[[40, 41]] = x[1234]
        yield x, 0.5 + 0.1 * seed
    x = np.full(3000, -20.0, dtype=np.float32)
    x[[7, 900, 2500]] = 5.0
    yield x, 0.3
    x = np.full(3000, -20.0, dtype=np.float32)
    x[3], x[[40, 41]] = 5.0, 4.0  # masses ~0.58, 0.21, 0.21: the cut at 0.7 falls between 40 and 41
    yield x, 0.7


@pytest.mark.parametrize("x,top_p", list(_tied_rows()))
def test_the_nucleus_test_matches_its_definition_for_every_token_ties_included(x, top_p):
    """`_in_nucleus` (the top's shortcut, the reused mask) against the definition, token by
    token: mass strictly above plus the ties ordered before it, under top-p of the total."""
    lazy = LazyDist(x, SamplingParams(0.7, top_p=top_p))
    e = lazy._e.astype(np.float64)
    z = lazy._total()
    for t in range(x.shape[0]):
        above = e[e > e[t]].sum() + e[t] * np.count_nonzero(e[:t] == e[t])
        assert lazy._in_nucleus(t) == (above < lazy.params.top_p * z), t


def _full_sort_sparse(lazy: LazyDist) -> tuple[list[int], list[float]]:
    """The explicit form as it was built before the prefix: sort the whole row, cut by the
    float64 cumulative mass, decide the tokens near the cut by `sample`'s own test."""
    e, p = lazy._e, lazy.params
    order = np.argsort(-e, kind="stable")
    before = np.cumsum(e[order], dtype=np.float64) - e[order]
    cut = int(np.searchsorted(before, p.top_p * lazy._total(), side="left"))
    lo = max(0, cut - 3)
    cut = lo + sum(1 for t in order[lo : cut + 3] if lazy._in_nucleus(int(t)))
    order = order[:max(cut, 1)]
    if p.min_p > 0.0:
        order = order[e[order] >= lazy._min_p_floor()]
    w = (e[order].astype(np.float64) / lazy._bound) ** (1.0 / p.temperature)
    return order.tolist(), (w / w.sum()).tolist()


def _rows():
    rng = np.random.default_rng(3)
    for scale in (0.05, 1.0, 4.0, 12.0):  # nearly flat to a few tokens holding everything
        yield (rng.standard_normal(20000) * scale).astype(np.float32)
    yield _logits(n=20000, levels=30)  # many ties, some across the cut
    peaked = (rng.standard_normal(20000)).astype(np.float32)
    peaked[[11, 4000]] = [15.0, 14.0]
    yield peaked
    yield from _one_token_rows()


def _one_token_rows():
    """A real model's most common row: one token holds (nearly) everything, the rest lie
    below 2^-60 of it, so no threshold's prefix holds 3 tokens past the cut."""
    rng = np.random.default_rng(4)
    for second in (None, 20.0, 29.0):  # alone; a runner-up far below; one at e^-1 of the top
        x = (rng.standard_normal(20000) - 40.0).astype(np.float32)
        x[777] = 30.0
        if second is not None:
            x[5000] = second
        yield x


@pytest.mark.parametrize("params", [SamplingParams(0.7, top_p=0.9), SamplingParams(1.0, top_p=0.5),
                                    SamplingParams(0.6, top_p=0.95, min_p=0.01), SamplingParams(0.9, top_p=0.99)])
def test_the_explicit_form_is_what_sorting_the_whole_row_gives(params):
    """The nucleus found from a sorted prefix (and its float64 verdicts away from the cut) is
    the one a sort of all 20,000 tokens gives, token for token and probability for probability."""
    for x in _rows():
        lazy = LazyDist(x, params)
        ids, probs = _full_sort_sparse(LazyDist(x, params))
        assert lazy.ids.tolist() == ids
        assert lazy.probs.tolist() == probs


@pytest.mark.parametrize("top_p", [0.9, 0.999])
def test_a_row_one_token_dominates_is_never_sorted_whole(top_p, monkeypatch):
    """When the prefix's mass passes the cut by more than rounding can err, nothing after it
    can be inside: the prefix is the nucleus, without sorting the row (18 ms at 152k tokens;
    2 of 80 verification steps on the default target's rows fell there)."""
    sorted_sizes = []
    real_argsort = np.argsort

    def recording_argsort(a, *args, **kwargs):
        sorted_sizes.append(np.shape(a)[0])
        return real_argsort(a, *args, **kwargs)

    for x in _one_token_rows():
        params = SamplingParams(0.7, top_p=top_p)
        expected = _full_sort_sparse(LazyDist(x, params))
        sorted_sizes.clear()
        monkeypatch.setattr(np, "argsort", recording_argsort)
        lazy = LazyDist(x, params)
        got = (lazy.ids.tolist(), lazy.probs.tolist())
        monkeypatch.setattr(np, "argsort", real_argsort)
        assert got == expected
        assert sorted_sizes and max(sorted_sizes) < 100, sorted_sizes


@pytest.mark.parametrize("temperature", [1.0, 0.7, 1.6])
def test_with_no_filter_one_token_probability_is_the_explicit_forms(temperature):
    params = SamplingParams(temperature)
    for x in _rows():
        fast = LazyDist(x, params)
        picks = [0, int(x.argmax()), 1234, x.shape[0] - 1]
        got = [fast.prob(t) for t in picks]  # before any explicit form exists
        assert fast._sparse is None or temperature > 1.0
        explicit = LazyDist(x, params)
        assert got == [float(explicit.probs[t]) for t in picks]


@pytest.mark.parametrize("params", [SamplingParams(0.7, top_p=0.9), SamplingParams(1.0), SamplingParams(0.8)])
def test_the_residual_after_a_one_hot_draft_is_p_without_that_token(params):
    """norm(max(0, p - one_hot(x))) = p without x: drawn by rejection with x taken out of its
    block (no filter) or from the explicit form (filters), never x, in p's proportions."""
    x = np.full(3000, -4.0, dtype=np.float32)
    x[:6] = [3.0, 2.5, 2.4, 2.0, 1.5, 1.0]  # the rejected draft (0) holds most of the mass
    ref = distribution(x, params)
    rest = {int(t): float(q) for t, q in zip(ref.ids, ref.probs) if t != 0}
    norm = sum(rest.values())
    sampler = Sampler(SamplingParams(params.temperature, top_p=params.top_p, seed=5))
    n = 20000
    counts: dict[int, int] = {}
    for _ in range(n):
        lazy = sampler.dist(x)
        lazy.prob(0)  # as the p/q rule does first
        t = sampler.residual_draw(lazy, Dist.one_hot(0))
        counts[t] = counts.get(t, 0) + 1
    assert 0 not in counts and set(counts) <= set(rest)
    top = sorted(rest, key=rest.get, reverse=True)[:5]
    observed = np.array([counts.get(t, 0) for t in top] + [n - sum(counts.get(t, 0) for t in top)])
    expected = np.array([rest[t] / norm * n for t in top] + [n * (1 - sum(rest[t] for t in top) / norm)])
    keep = expected > 5
    chi2 = float((((observed - expected) ** 2)[keep] / expected[keep]).sum())
    assert chi2 < 20.5, (chi2, observed, expected)  # 5 degrees of freedom, p = 0.001


@pytest.mark.parametrize("params", [SamplingParams(0.7, top_p=0.9), SamplingParams(1.0), SamplingParams(0.8, min_p=0.05)])
def test_a_token_outside_the_vocabulary_has_probability_zero_and_its_residual_is_p(params):
    """A drafter may propose an id the target does not have: p is 0 there, the draft is
    rejected, and the residual norm(max(0, p - q)) is p itself."""
    x = _logits(n=3000)
    sampler = Sampler(SamplingParams(params.temperature, top_p=params.top_p, min_p=params.min_p, seed=2))
    lazy = sampler.dist(x)
    assert lazy.prob(3000) == 0.0 and lazy.prob(-1) == 0.0
    kept = set(distribution(x.astype(np.float64), params).ids.tolist())
    assert all(sampler.residual_draw(sampler.dist(x), Dist.one_hot(3007)) in kept for _ in range(50))
