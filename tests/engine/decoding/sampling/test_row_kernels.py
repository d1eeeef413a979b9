"""The C row kernels (engine/decoding/sampling/_row_kernels.c) compute what their numpy definitions say.

LazyDist's exactness (distribution.py) rests on three facts checked here against plain numpy in float64:
the exp is accurate everywhere a float32 logit can be (and 0 below the normal range), the
block sums are the row's sums, `pick` is numpy's searchsorted over the cumulative sums (with
a token taken out), and `mass_above` is the top-p test's mass. Bad buffers raise, never crash.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.decoding.sampling import _row_kernels as K

BLOCK = 1024


def _prepare(x: np.ndarray, shift: float = 0.0, block: int = BLOCK) -> tuple[np.ndarray, np.ndarray]:
    e = np.empty(x.shape[0], dtype=np.float32)
    cum = np.empty(-(-x.shape[0] // block), dtype=np.float64)
    K.prepare(x, e, cum, block, shift)
    return e, cum


def test_exp_is_within_two_ulp_of_float64_over_the_whole_normal_range():
    x = np.linspace(-87.3, 88.0, 3_000_001).astype(np.float32)  # LazyDist shifts a row whose top is over 80
    e, _ = _prepare(x)
    ref = np.exp(x.astype(np.float64))
    ulp = np.spacing(ref.astype(np.float32)).astype(np.float64)
    err = np.abs(e - ref) / ulp
    assert float(err.max()) <= 2.0, float(x[int(err.argmax())])
    assert np.all(np.diff(e[::1000]) >= 0)  # monotone where it matters: a larger logit never weighs less


def test_exp_of_minus_infinity_and_of_subnormal_results_is_zero_and_a_nan_weighs_nothing():
    x = np.array([-np.inf, -1e30, -200.0, -90.0, -87.34, np.nan, 0.0], dtype=np.float32)
    e, cum = _prepare(x)
    assert e.tolist() == [0.0] * 6 + [1.0]  # a broken model's NaN logit is never drawn
    assert cum.tolist() == [1.0]


@pytest.mark.parametrize("n", [1, 15, 16, 17, 1023, 1024, 1025, 3000, 151_936])
def test_block_sums_are_the_rows_sums_and_the_shift_divides(n):
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    e, cum = _prepare(x, shift=2.5)
    ref = np.exp((x - np.float32(2.5)).astype(np.float64))  # the shift is a float32 subtraction
    assert float((np.abs(e - ref) / np.spacing(ref.astype(np.float32))).max()) <= 2.0
    sums = [e[i : i + BLOCK].sum(dtype=np.float64) for i in range(0, n, BLOCK)]
    np.testing.assert_allclose(cum, np.cumsum(sums), rtol=1e-6)


def _numpy_pick(e: np.ndarray, cum: np.ndarray, u: float, exclude: int) -> int:
    """LazyDist's proposal as numpy wrote it: searchsorted over the block sums, then over the
    block's float64 cumulative sum (the excluded token counted as 0)."""
    blk = min(int(np.searchsorted(cum, u, side="right")), cum.shape[0] - 1)
    lo = float(cum[blk - 1]) if blk else 0.0
    seg = e[blk * BLOCK : (blk + 1) * BLOCK].astype(np.float64)
    if blk * BLOCK <= exclude < (blk + 1) * BLOCK:
        seg[exclude - blk * BLOCK] = 0.0
    inner = np.cumsum(seg)
    mass = float(cum[blk]) - lo
    r = (u - lo) * (float(inner[-1]) / mass) if mass > 0.0 else 0.0
    return blk * BLOCK + min(int(np.searchsorted(inner, r, side="right")), seg.shape[0] - 1)


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 5000), seed=st.integers(0, 2**32 - 1), frac=st.floats(0.0, 1.0), excl=st.floats(0.0, 1.0),
       ties=st.booleans())
def test_pick_is_numpys_searchsorted_over_the_cumulative_sums(n, seed, frac, excl, ties):
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 1, size=n).astype(np.float32) if ties else (rng.standard_normal(n) * 2).astype(np.float32)
    x[rng.integers(0, n, size=max(1, n // 50))] = -np.inf  # tokens a grammar or a logit bias removed
    e, cum = _prepare(x)
    exclude = int(excl * n) if excl < 0.5 else -1
    u = frac * float(cum[-1])
    assert K.pick(e, cum, BLOCK, u, exclude) == _numpy_pick(e, cum, u, exclude)


def test_pick_lands_on_every_edge_exactly():
    x = np.zeros(2048 + 5, dtype=np.float32)  # every e is 1: cum = 1024, 2048, 2053
    e, cum = _prepare(x)
    assert cum.tolist() == [1024.0, 2048.0, 2053.0]
    assert K.pick(e, cum, BLOCK, 0.0, -1) == 0
    assert K.pick(e, cum, BLOCK, 0.5, -1) == 0
    assert K.pick(e, cum, BLOCK, 1.0, -1) == 1  # side="right": a running sum equal to u is passed
    assert K.pick(e, cum, BLOCK, 1024.0, -1) == 1024
    assert K.pick(e, cum, BLOCK, 2053.0, -1) == 2052  # past the end: the last token of the last block
    assert K.pick(e, cum, BLOCK, 0.5, 0) == 1  # excluded: the running sum starts at token 1


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 5000), seed=st.integers(0, 2**32 - 1), q=st.floats(0.0, 1.0), ties=st.booleans())
def test_mass_above_is_the_masked_sum_and_the_ties_before(n, seed, q, ties):
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 1, size=n).astype(np.float32) if ties else (rng.standard_normal(n)).astype(np.float32)
    e, _ = _prepare(x)
    token = min(int(q * n), n - 1)
    t = float(e[token])
    above, count = K.mass_above(e, t, token, BLOCK)
    e64 = e.astype(np.float64)
    assert abs(above - e64[e64 > t].sum()) <= (BLOCK / K.LANES) * 2.0**-24 * e64.sum()  # LazyDist's slack, halved
    assert count == int(np.count_nonzero(e[:token] == e[token]))


@pytest.mark.parametrize("call", [
    lambda: K.prepare(np.zeros(4, np.float64), np.empty(4, np.float32), np.empty(1), BLOCK, 0.0),
    lambda: K.prepare(np.zeros(4, np.float32), np.empty(3, np.float32), np.empty(1), BLOCK, 0.0),
    lambda: K.prepare(np.zeros(4, np.float32), np.empty(4, np.float32), np.empty(2), BLOCK, 0.0),
    lambda: K.prepare(np.zeros(4, np.float32), np.zeros(4, np.float32)[::-1].copy().reshape(2, 2), np.empty(1), BLOCK, 0.0),
    lambda: K.prepare(np.zeros(4, np.float32), np.empty(4, np.float32), np.empty(1), 0, 0.0),
    lambda: K.prepare(np.zeros(8, np.float32)[::2], np.empty(4, np.float32), np.empty(1), BLOCK, 0.0),
    lambda: K.prepare(np.zeros(4, np.float32), np.zeros(4, np.float32), np.empty(1), BLOCK, "x"),
    lambda: K.pick(np.zeros(0, np.float32), np.empty(0), BLOCK, 0.0, -1),
    lambda: K.pick(np.zeros(4, np.float32), np.empty(2), BLOCK, 0.0, -1),
    lambda: K.mass_above(np.zeros(4, np.int32), 0.0, 0, BLOCK),
    lambda: K.mass_above(np.zeros(4, np.float32), 0.0, 0),
    lambda: K.mass_above(np.zeros(4, np.float32), 0.0, 0, 0),
])
def test_bad_buffers_and_arguments_raise_a_clear_error(call):
    with pytest.raises((TypeError, ValueError, BufferError)):
        call()


def test_a_read_only_output_is_refused():
    e = np.empty(4, np.float32)
    e.flags.writeable = False
    with pytest.raises((TypeError, ValueError, BufferError)):
        K.prepare(np.zeros(4, np.float32), e, np.empty(1), BLOCK, 0.0)


@pytest.mark.parametrize("power", [1 / 0.7, 1 / 0.4, 1 / 1.5, 20.0])
def test_tempered_weights_are_e_over_the_top_to_the_power(power):
    """(e / top)^power by log and exp in float32: within 3 x (|ln w| + 2) x 2^-24 of np.power in
    float64 (the float32 log of a small ratio carries its ulp into the power; the weights that
    carry the mass are the accurate ones), 0 where e is 0, and the total is their sum."""
    rng = np.random.default_rng(int(power * 10))
    x = (rng.standard_normal(50_000) * 6).astype(np.float32)
    x[:5] = [-np.inf, -200.0, -90.0, 0.0, 3.0]
    e, _ = _prepare(x)
    w = np.empty_like(e)
    top = float(e.max())
    total = K.tempered(e, w, top, power, BLOCK)
    ref = (e.astype(np.float64) / top) ** power
    live = ref > 1e-30
    allowed = 3 * (np.abs(np.log(ref[live])) + 2) * 2.0**-24  # relative
    assert np.all(np.abs(w[live] - ref[live]) <= allowed * ref[live])
    assert w[:3].tolist() == [0.0, 0.0, 0.0]
    assert total == pytest.approx(ref.sum(), rel=1e-5)
    assert total == pytest.approx(w.sum(dtype=np.float64), rel=1e-6)


@pytest.mark.parametrize("call", [
    lambda: K.tempered(np.ones(4, np.float32), np.empty(3, np.float32), 1.0, 2.0, BLOCK),
    lambda: K.tempered(np.ones(4, np.float32), np.empty(4, np.float32), 0.0, 2.0, BLOCK),
    lambda: K.tempered(np.ones(4, np.float64), np.empty(4, np.float32), 1.0, 2.0, BLOCK),
    lambda: K.tempered(np.ones(4, np.float32), np.empty(4, np.float32), 1.0, 2.0),
    lambda: K.tempered(np.ones(4, np.float32), np.empty(4, np.float32), 1.0, 2.0, 0),
])
def test_tempered_refuses_bad_arguments(call):
    with pytest.raises((TypeError, ValueError, BufferError)):
        call()
