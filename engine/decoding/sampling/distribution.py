"""The target's next-token distribution over one logits row under the sampling parameters, in
one module: llama.cpp's filters (top-k, top-p, min-p on the raw distribution, then the
temperature), the probabilities the p/q rule reads, and drawing from it (and from the residual
after a rejection). sampler.py holds the seeded stream and the acceptance rule; params.py the
parameters.

`distribution` is the reference, in float64. `LazyDist` is the same distribution over a large
row computed only as far as a draw or the p/q rule needs (`Sampler.dist` makes one per row).
Exact by construction: drawing is rejection sampling from the raw softmax, the explicit form
(`sparse`) is built with the same float32 values and the same membership tests, and every
shortcut (a sorted prefix instead of a full sort, one token's probability without the
explicit form, the residual after a one-hot draft) gives what the full construction gives.
The passes over the whole row (exp with the proposal's block sums, the top-p mass test) are
one C loop each (_row_kernels.c, built by `pip install -e .`): numpy took six passes.
Imports: numpy, _row_kernels (kernels.py says how to build them when missing), finite.py
(the NaN guard) and params.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .finite import check_top
from .params import SamplingParams

try:
    from . import _row_kernels
except ImportError as exc:  # a checkout used without the set-up's `pip install -e .`: one line, not two tracebacks
    from .kernels import RowKernelsMissing, missing_message

    raise RowKernelsMissing(missing_message(exc)) from None


@dataclass
class Dist:
    """A sparse probability distribution over token ids (ids unique, probs sum to 1)."""

    ids: np.ndarray  # int64
    probs: np.ndarray  # float64

    def prob(self, token: int) -> float:
        hit = np.nonzero(self.ids == token)[0]
        return float(self.probs[hit[0]]) if hit.size else 0.0

    @classmethod
    def one_hot(cls, token: int) -> "Dist":
        return cls(np.array([token], dtype=np.int64), np.array([1.0]))

    def sample(self, rng: np.random.Generator) -> int:
        """One token, drawn in proportion to `probs`."""
        return int(self.ids[choose(self.probs, rng)])

    def sample_without(self, token: int, rng: np.random.Generator) -> int | None:
        """A shortcut draw from this distribution without `token` (None: none here; the caller
        builds the residual explicitly)."""
        return None


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max())
    return z / z.sum()


def distribution(logits: np.ndarray, params: SamplingParams) -> Dist:
    """The filtered, temperature-scaled distribution the target samples from."""
    logits = np.asarray(logits, dtype=np.float64)
    n = logits.shape[0]
    if params.top_k and params.top_k < n:
        ids = np.argpartition(-logits, params.top_k - 1)[: params.top_k]
    else:
        ids = np.arange(n)
    lg = logits[ids]
    p = _softmax(lg)
    if params.top_p < 1.0:
        keep = _top_p_keep(p, params.top_p)
        ids, lg, p = ids[keep], lg[keep], p[keep]
        p = p / p.sum()
    if params.min_p > 0.0:
        keep = p >= params.min_p * p.max()
        ids, lg = ids[keep], lg[keep]
    t = params.temperature if params.temperature > 0 else 1.0
    # shift before dividing: a tiny temperature then sends the others to -inf, never inf - inf = NaN
    with np.errstate(over="ignore", divide="ignore"):
        probs = _softmax((lg - lg.max()) / t)
    return Dist(ids.astype(np.int64), probs)


def _top_p_keep(p: np.ndarray, top_p: float) -> np.ndarray:
    """Indices of the smallest set of most likely tokens with mass >= top_p.

    Sorting 152k probabilities costs milliseconds per token; the nucleus is almost always
    small, so sort the top M first and widen M only when its mass falls short. Exact.
    """
    n = p.shape[0]
    m = 64
    while True:
        if m >= n:
            order = np.argsort(-p, kind="stable")
        else:
            part = np.argpartition(-p, m - 1)[:m]
            order = part[np.argsort(-p[part], kind="stable")]
        cum = np.cumsum(p[order])
        if cum[-1] >= top_p or m >= n:
            cut = int(np.searchsorted(cum, top_p)) + 1
            return order[: min(cut, order.shape[0])]
        m *= 8


def choose(probs: np.ndarray, rng: np.random.Generator) -> int:
    """An index drawn in proportion to `probs` (need not sum to 1): one uniform, one search."""
    c = np.cumsum(probs)
    return int(min(np.searchsorted(c, rng.random() * c[-1], side="right"), probs.shape[0] - 1))


class LazyDist(Dist):
    """The target's filtered distribution over one logits row, computed only as far as needed.

    Drawing needs no sort: a token is proposed from the raw softmax (one C pass writes e and
    the block sums) and accepted by the filters and the temperature (rejection sampling,
    exact): a token outside top-p or min-p is redrawn, and the temperature keeps a token with
    probability (e/B)^(1/T - 1), where B bounds every e. `ids`/`probs`/`prob()` build the sparse
    form (the speculative p/q rule and the tests read it) with the same float32 values, the
    same normaliser and the same membership test, so a drawn token always has the
    probability the sparse form gives it (with no filter at T != 1 the weights e^(1/T) come
    from a float32 log and exp: within 3 (|ln w| + 2) 2^-24 of a weight w, a few parts per
    million where the mass is). Top-k, T > 1 and tiny temperatures use the sparse form for
    drawing too.
    """

    BLOCK = 1024
    TRIES = 32  # then draw from the sparse form: still exact (a mixture of exact draws)
    UNSHIFTED_MAX = 80.0  # exp(x) of float32 logits up to this needs no max shift (exp(88.7) overflows)

    def __init__(self, logits: np.ndarray, params: SamplingParams):  # noqa: D107 - fields are lazy
        raw = np.asarray(logits)
        x = np.ascontiguousarray(raw, dtype=np.float32)
        self.params = params
        top = int(x.argmax())
        m = float(x[top])
        check_top(m)  # NaN or +inf (argmax lands on them): a damaged model, said before any kernel runs
        # exp(x) needs no max shift while the top logit is in [0, 80]: nothing overflows, and
        # nothing underflows that the shifted form would keep. e is owned (the logits view dies
        # at the next decode); the kernel writes it and the blocks' running sums in one pass.
        self._e = np.empty(x.shape[0], dtype=np.float32)
        # the raw softmax's cumulative mass by block of BLOCK tokens (each block's float32 lane
        # sum, accumulated in float64): the proposal's block masses, by definition
        self._cum = np.empty(-(-x.shape[0] // self.BLOCK), dtype=np.float64)
        _row_kernels.prepare(x, self._e, self._cum, self.BLOCK, 0.0 if 0.0 <= m <= self.UNSHIFTED_MAX else m)
        # a bound on every e for the temperature's acceptance: the top's e plus a margin for
        # exp's few-ulp error (any constant bound keeps the draw exact)
        self._bound = float(self._e[top]) * (1.0 + 1e-5)
        self._top = top  # the logits' argmax: on a real model's row, most draws land on it
        self._e_top: int | None = None  # the first index of the largest e, computed when needed
        self._sparse: Dist | None = None
        self._dense = False  # the sparse form lists every token in id order
        self._tempered_w: tuple[np.ndarray, float] | None = None  # with no filter: `_tempered()`
        self._emax: float | None = None
        self._simple = bool(params.top_k) or params.temperature > 1.0 or params.temperature < 0.05
        self._x = np.array(raw, dtype=np.float64) if self._simple else None  # `distribution` reads the logits

    @property  # type: ignore[override]
    def ids(self) -> np.ndarray:
        return self.sparse().ids

    @property  # type: ignore[override]
    def probs(self) -> np.ndarray:
        return self.sparse().probs

    def prob(self, token: int) -> float:
        if not 0 <= token < self._e.shape[0]:  # not in this vocabulary (a drafter's own token)
            return 0.0
        if self._sparse is None and self._keeps_all():
            return self._dense_prob(token)
        d = self.sparse()
        if self._dense:  # every token, in id order: no search
            return float(d.probs[token])
        return d.prob(token)

    def _keeps_all(self) -> bool:
        """No filter drops a token (top-p 1, no min-p): the server's default among others."""
        return not self._simple and self.params.top_p >= 1.0 and self.params.min_p <= 0.0

    def _tempered(self) -> tuple[np.ndarray, float]:
        """Every token's weight with no filter, (e / e_top)^(1/T), and their total: at T 1 e
        itself and the proposal's own total (no pass); else one kernel pass over e. The p/q
        rule reads one token of it, the explicit form all of it."""
        if self._tempered_w is None:
            if self.params.temperature == 1.0:
                self._tempered_w = (self._e, self._total())
            else:
                w = np.empty(self._e.shape[0], dtype=np.float32)
                top = float(self._e[self._top])
                total = _row_kernels.tempered(self._e, w, top, 1.0 / self.params.temperature, self.BLOCK)
                self._tempered_w = (w, total)
        return self._tempered_w

    def _dense_prob(self, token: int) -> float:
        """p(token) as the explicit form gives it (the same weight over the same total),
        without building that form."""
        w, total = self._tempered()
        return float(w[token]) / total

    def _min_p_floor(self) -> float:
        """min-p's cut on e (min-p times the largest e), or 0 when min-p is off."""
        if self.params.min_p <= 0.0:
            return 0.0
        if self._emax is None:
            self._emax = float(self._e.max())
        return self.params.min_p * self._emax

    def sparse(self) -> Dist:
        """The explicit distribution: `distribution`'s filters, decided as `sample` decides."""
        if self._sparse is None:
            p, e = self.params, self._e
            if self._simple:
                self._sparse = distribution(self._x, p)
            else:
                if p.top_p < 1.0:
                    order, before, cut = self._nucleus_prefix()
                    # near the cut, decide each token by `sample`'s own test (float32 sums);
                    # a token whose float64 mass-before is farther from the cut than any
                    # float32 sum of the row can err gets its verdict
                    goal, slack = self._goal_and_slack()
                    lo = max(0, cut - 3)
                    cut = lo + sum(1 for i in range(lo, min(cut + 3, order.shape[0]))
                                   if (before[i] < goal if abs(before[i] - goal) > slack else self._in_nucleus(int(order[i]))))
                    order = order[:max(cut, 1)]
                elif p.min_p <= 0.0:  # every token, in id order (the server's default: T 1, no filter)
                    self._dense = True
                    tw, total = self._tempered()
                    w = tw.astype(np.float64) / total
                    self._sparse = Dist(np.arange(e.shape[0], dtype=np.int64), w)
                    return self._sparse
                else:
                    order = np.arange(e.shape[0])
                if p.min_p > 0.0:
                    order = order[e[order] >= self._min_p_floor()]
                w = (e[order].astype(np.float64) / self._bound) ** (1.0 / p.temperature)
                self._sparse = Dist(order.astype(np.int64), w / w.sum())
        return self._sparse

    def _goal_and_slack(self) -> tuple[float, float]:
        """top-p's cut on the mass before a token, and how far `_in_nucleus`'s mass can be
        from its float64 value: a verdict farther out stands. The kernels sum each block in
        float32 lanes of BLOCK / LANES values (each within (BLOCK / LANES) * 2^-24 of its
        lane's mass) and the blocks in double; the goal reads the same total on both sides;
        twice that bound covers the double sums and et * ties."""
        z = self._total()
        return self.params.top_p * z, 2.0 * (self.BLOCK / _row_kernels.LANES) * 2.0 ** -24 * z

    def _nucleus_prefix(self) -> tuple[np.ndarray, np.ndarray, int]:
        """The most likely tokens in the order a stable sort of the whole row gives them (ties
        by id), far enough to hold the top-p cut with 3 to spare (or all the tokens that
        could be inside: the prefix's mass passes the cut by more than the slack, so every
        token after it is outside), and the cut by the sorted cumulative mass. Sorting 152k
        values costs ~15 ms a row, and a real model's nucleus is a handful of tokens: sort
        only those above a threshold, lowered until the cut fits. Everything above the
        threshold comes before everything below it, so the prefix, its float64 cumulative
        sums and the cut are those of the full sort, exactly."""
        e = self._e
        goal, slack = self._goal_and_slack()
        top = float(e[self._top])
        for shrink in (2.0 ** -10, 2.0 ** -24, 2.0 ** -60, None):  # None: the whole row
            if shrink is None:
                idx = np.arange(e.shape[0])
            else:
                idx = np.flatnonzero(e > top * shrink)
                if float(e[idx].sum(dtype=np.float64)) < goal:
                    continue
            order = idx[np.argsort(-e[idx], kind="stable")]
            before = np.cumsum(e[order], dtype=np.float64) - e[order]
            cut = int(np.searchsorted(before, goal, side="left"))
            mass = float(before[-1]) + float(e[order[-1]])  # the prefix's, as the sort sums it
            if shrink is None or cut + 3 <= order.shape[0] or mass - goal > slack:
                return order, before, cut
        raise AssertionError("unreachable: the whole row always returns")

    def _total(self) -> float:
        return float(self._cum[-1])

    def _in_nucleus(self, token: int) -> bool:
        """Is `token` among the most likely tokens whose mass before it is under top-p (ties
        ordered by id, as a stable sort orders them)?"""
        e = self._e
        if token == self._top:
            # the first of the largest e has nothing above it and no tie before it: inside,
            # whatever top-p is (one argmax pass instead of the mask's two)
            if self._e_top is None:
                self._e_top = int(e.argmax())
            if token == self._e_top:
                return True
        et = float(e[token])
        above, ties = _row_kernels.mass_above(e, et, token, self.BLOCK)  # one pass: e > et summed, ties before
        return above + et * ties < self.params.top_p * self._total()

    def sample(self, rng: np.random.Generator) -> int:
        """One token, distributed exactly as `sparse()` says."""
        if not self._simple:
            tok = self.try_sample(rng)
            if tok is not None:
                return tok
        d = self.sparse()
        return int(d.ids[choose(d.probs, rng)])

    def sample_without(self, token: int, rng: np.random.Generator) -> int | None:
        """A draw from this distribution without `token`: norm(max(0, p - q)) for a one-hot q
        at `token` (a greedy draft, prompt lookup), the correction after its rejection. A
        filtered p already has its explicit form (the p/q rule read it): draw from it without
        the token. Unfiltered, draw by rejection with the token taken out of its block instead
        of building p over the whole vocabulary (~2 ms at 152k tokens). None: neither way
        applies or succeeded; the caller builds the residual explicitly."""
        if self._simple:
            return None
        if self._sparse is not None and not self._dense:
            d = self._sparse
            r = np.where(d.ids == token, 0.0, d.probs)
            total = float(r.sum())
            if total <= 0.0:  # p is all on that token: rejection had probability 0; fall back to p
                return self.sample(rng)
            return int(d.ids[choose(r / total, rng)])
        return self.try_sample(rng, exclude=token)

    def try_sample(self, rng: np.random.Generator, exclude: int | None = None) -> int | None:
        """A draw by rejection from the raw softmax, or None after TRIES proposals failed (the
        caller then draws from the explicit form: a mixture of exact draws is exact).

        Proposal: a block with probability (its sum) / (all blocks' sums), then a token in it
        by the block's own float64 prefix sums, so a token's proposal mass is e / total up to
        the float32 rounding of its block's sum. `exclude`: draw from this distribution
        without that token (the residual after a one-hot draft was rejected); its block's
        mass is recomputed in float64 without it, so rounding leaves it no phantom mass."""
        p = self.params
        e, cum = self._e, self._cum
        if exclude is not None and not 0 <= exclude < e.shape[0]:
            exclude = None  # not a token of this row: nothing to take out
        if exclude is not None:
            b = self.BLOCK
            xblk = exclude // b
            xseg = e[xblk * b : (xblk + 1) * b].astype(np.float64)
            xseg[exclude - xblk * b] = 0.0
            masses = np.diff(cum, prepend=0.0)
            masses[xblk] = np.cumsum(xseg)[-1]  # `pick` sums the block the same way
            cum = np.cumsum(masses)
        z, bound, floor = float(cum[-1]), self._bound, self._min_p_floor()
        if z <= 0.0:
            return None
        cool = 1.0 / p.temperature - 1.0
        skip = -1 if exclude is None else exclude
        for _ in range(self.TRIES):
            tok = _row_kernels.pick(e, cum, self.BLOCK, rng.random() * z, skip)
            et = float(e[tok])
            if tok == exclude or et <= 0.0 or et < floor:
                continue
            if cool > 0.0 and rng.random() >= (et / bound) ** cool:
                continue
            if p.top_p < 1.0 and not self._in_nucleus(tok):
                continue
            return tok
        return None


def residual_sample(p: Dist, q: Dist, rng: np.random.Generator) -> int:
    """A draw from norm(max(0, p - q)): the correction after a rejection."""
    if q.ids.shape[0] == 1 and q.probs[0] == 1.0:
        t = p.sample_without(int(q.ids[0]), rng)  # a one-hot draft: p without that token
        if t is not None:
            return t
    n = int(max(p.ids.max(initial=0), q.ids.max(initial=0))) + 1
    r = np.zeros(n)
    r[p.ids] += p.probs
    r[q.ids] -= q.probs
    np.maximum(r, 0.0, out=r)
    total = r.sum()
    if total <= 0.0:  # p == q exactly: rejection had probability 0; fall back to p
        return p.sample(rng)
    support = np.nonzero(r)[0]
    return int(support[choose(r[support] / total, rng)])
