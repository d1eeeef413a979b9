"""Sampling parameters, the target's next-token distribution, and the exact acceptance rule.

Greedy: a draft token is accepted while it equals the target's argmax; the first mismatch
is replaced by the target's own argmax. Sampling: the rule of Leviathan et al. (2023) and
Chen et al. (2023): accept draft token x with probability min(1, p(x)/q(x)); on rejection
draw from norm(max(0, p - q)); when every draft is accepted, draw a bonus token from the
target's next distribution. The emitted sequence is then distributed exactly as the
target's own sampling would be, whatever the draft proposes.

Filters follow llama.cpp's order (top-k, top-p, min-p on the raw distribution, then
temperature), so settings mean what they mean in llama.cpp.
"""

from __future__ import annotations

import math
import numbers
import threading
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..errors import TandemError

SEED_MAX = 2**64 - 1  # numpy's generators take any non-negative int; llama.cpp-style seeds fit in 64 bits


class SamplingParamError(TandemError):
    """A sampling parameter is of the wrong type, not finite, or out of its range."""


def _real(name: str, value: object) -> float:
    """`value` as a finite float, or a SamplingParamError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise SamplingParamError(f"{name} must be a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise SamplingParamError(f"{name} must be a finite number, got {value!r}")
    return x


def _int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise SamplingParamError(f"{name} must be an integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class SamplingParams:
    """How the target picks tokens. temperature <= 0 means greedy (argmax).

    Every parameter is checked here, once, for every caller (CLI, API, app, bench): NaN or
    infinity would sample noise and poison the metrics log, so they never get past this.
    """

    temperature: float = 0.0
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1 = off
    min_p: float = 0.0  # 0 = off
    seed: int | None = None

    def __post_init__(self) -> None:
        temperature = _real("temperature", self.temperature)
        if temperature < 0:
            raise SamplingParamError(f"temperature must be >= 0 (0 = greedy), got {self.temperature!r}")
        top_k = _int("top-k", self.top_k)
        if top_k < 0:
            raise SamplingParamError(f"top-k must be >= 0 (0 = off), got {self.top_k!r}")
        top_p = _real("top-p", self.top_p)
        if not 0.0 < top_p <= 1.0:
            raise SamplingParamError(f"top-p must be in (0, 1], got {self.top_p!r}")
        min_p = _real("min-p", self.min_p)
        if not 0.0 <= min_p < 1.0:
            raise SamplingParamError(f"min-p must be in [0, 1), got {self.min_p!r}")
        seed = None if self.seed is None else _int("seed", self.seed)
        if seed is not None and not 0 <= seed <= SEED_MAX:
            raise SamplingParamError(f"seed must be in 0..{SEED_MAX} (or unset for a random one), got {self.seed!r}")
        # store plain Python numbers (numpy scalars, ints for floats) so to_dict() is clean JSON
        for name, v in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p), ("min_p", min_p), ("seed", seed)):
            object.__setattr__(self, name, v)

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "temperature": self.temperature,
            "top_k": self.top_k,
            "top_p": self.top_p,
            "min_p": self.min_p,
            "seed": self.seed,
        }


GREEDY = SamplingParams()


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


class Sampler:
    """Draws tokens with one seeded random stream, so a run is reproducible per seed."""

    def __init__(self, params: SamplingParams = GREEDY):
        self.params = params
        self.rng = np.random.default_rng(params.seed)

    @property
    def greedy(self) -> bool:
        return self.params.greedy

    def dist(self, logits: np.ndarray) -> Dist:
        """The distribution to draw from: lazy, so a plain draw sorts nothing (see LazyDist)."""
        return LazyDist(logits, self.params)

    def draw(self, d: Dist) -> int:
        if isinstance(d, LazyDist):
            return d.sample(self.rng)
        return int(d.ids[self._choice(d.probs)])

    def pick(self, logits: np.ndarray) -> int:
        """Next token from logits: argmax when greedy, else a draw."""
        if self.greedy:
            return int(np.argmax(logits))
        return self.draw(self.dist(logits))

    def _choice(self, probs: np.ndarray) -> int:
        c = np.cumsum(probs)
        u = self.rng.random() * c[-1]
        return int(min(np.searchsorted(c, u, side="right"), probs.shape[0] - 1))

    def residual_draw(self, p: Dist, q: Dist) -> int:
        """Draw from norm(max(0, p - q)): the correction after a rejection."""
        if isinstance(p, LazyDist) and not p._simple and q.ids.shape[0] == 1 and q.probs[0] == 1.0:
            # a one-hot draft (greedy, lookup): the residual is p without that token. A filtered
            # p already has its explicit form (the p/q rule read it): draw from it without the
            # token. Unfiltered, draw by rejection from p's proposal with the token taken out,
            # instead of building p over the whole vocabulary (~2 ms at 152k tokens).
            x = int(q.ids[0])
            if p._sparse is not None and not p._dense:
                d = p._sparse
                r = np.where(d.ids == x, 0.0, d.probs)
                total = float(r.sum())
                return int(d.ids[self._choice(r / total)]) if total > 0.0 else self.draw(p)
            t = p.try_sample(self.rng, exclude=x)
            if t is not None:
                return t
        n = int(max(p.ids.max(initial=0), q.ids.max(initial=0))) + 1
        r = np.zeros(n)
        r[p.ids] += p.probs
        r[q.ids] -= q.probs
        np.maximum(r, 0.0, out=r)
        total = r.sum()
        if total <= 0.0:  # p == q exactly: rejection had probability 0; fall back to p
            return self.draw(p)
        support = np.nonzero(r)[0]
        return int(support[self._choice(r[support] / total)])


@dataclass
class Verification:
    """Outcome of verifying one step's drafts against the target's logits."""

    accepted: int  # how many draft tokens were accepted (a prefix)
    token: int  # the token emitted after them: correction or bonus
    corrected: bool  # True: `token` replaces a rejected draft; False: bonus (all accepted)
    target_choices: list[int] = field(default_factory=list)  # greedy only: argmax per row


def verify(
    drafts: Sequence[int],
    draft_dists: Sequence[Dist | None],
    logits: np.ndarray,
    sampler: Sampler,
) -> Verification:
    """Accept a prefix of `drafts` using target `logits` rows (len(drafts) + 1 rows).

    Row i is the target's prediction after the context plus drafts[:i].
    """
    k = len(drafts)
    if logits.shape[0] != k + 1:
        raise ValueError(f"need {k + 1} logit rows for {k} drafts, got {logits.shape[0]}")
    if sampler.greedy:
        choices = [int(t) for t in np.argmax(logits, axis=1)]
        for i, d in enumerate(drafts):
            if d != choices[i]:
                return Verification(i, choices[i], True, choices)
        return Verification(k, choices[k], False, choices)
    for i, d in enumerate(drafts):
        p = sampler.dist(logits[i])
        q = draft_dists[i] if draft_dists and draft_dists[i] is not None else Dist.one_hot(d)
        px, qx = p.prob(d), q.prob(d)
        if qx <= 0.0:
            raise ValueError(f"draft token {d} has zero draft probability")
        if sampler.rng.random() < min(1.0, px / qx):
            continue
        return Verification(i, sampler.residual_draw(p, q), True)
    return Verification(k, sampler.draw(sampler.dist(logits[k])), False)


_SCRATCH = threading.local()


def _scratch(n: int, dtype: type = np.float32) -> np.ndarray:
    """A work buffer of n values, one per thread and dtype, reused: the nucleus test needs a
    mask the size of the vocabulary, and a fresh 600 KB array per test (152k tokens) costs a
    page fault per 4 KB on first touch, ~300 us per draw in a VM. Nothing keeps it past a call."""
    key = np.dtype(dtype).name
    buf = getattr(_SCRATCH, key, None)
    if buf is None or buf.shape[0] < n:
        buf = np.empty(n, dtype=dtype)
        setattr(_SCRATCH, key, buf)
    return buf[:n]


class LazyDist(Dist):
    """The target's filtered distribution over one logits row, computed only as far as needed.

    Drawing needs no sort: a token is proposed from the raw softmax (one exp pass, block sums
    by BLAS) and accepted by the filters and the temperature (rejection sampling, exact): a
    token outside top-p or min-p is redrawn, and the temperature keeps a token with
    probability (e/B)^(1/T - 1), where B bounds every e. `ids`/`probs`/`prob()` build the sparse
    form (the speculative p/q rule and the tests read it) with the same float32 values, the
    same normaliser and the same membership test, so a drawn token always has the
    probability the sparse form gives it. Top-k, T > 1 and tiny temperatures use the sparse
    form for drawing too.
    """

    BLOCK = 1024
    TRIES = 32  # then draw from the sparse form: still exact (a mixture of exact draws)
    UNSHIFTED_MAX = 80.0  # exp(x) of float32 logits up to this needs no max shift (exp(88.7) overflows)
    _ONES = np.ones(BLOCK, dtype=np.float32)

    def __init__(self, logits: np.ndarray, params: SamplingParams):  # noqa: D107 - fields are lazy
        raw = np.asarray(logits)
        x = raw if raw.dtype == np.float32 else raw.astype(np.float32)
        self.params = params
        top = int(x.argmax())
        m = float(x[top])
        # exp(x) needs no max shift (a pass) while the top logit is in [0, 80]: nothing
        # overflows, and nothing underflows that the shifted form would keep. Owned either
        # way: the logits view dies at the next decode.
        self._e = np.exp(x) if 0.0 <= m <= self.UNSHIFTED_MAX else np.exp(x - np.float32(m))
        # a bound on every e for the temperature's acceptance: the top's e plus a margin for
        # a vectorised exp's few-ulp error (any constant bound keeps the draw exact)
        self._bound = float(self._e[top]) * (1.0 + 1e-5)
        self._top = top  # the logits' argmax: on a real model's row, most draws land on it
        self._e_top: int | None = None  # the first index of the largest e, computed when needed
        self._sparse: Dist | None = None
        self._dense = False  # the sparse form lists every token in id order
        self._dense_total: float | None = None  # with no filter: the sum of every token's weight
        self._dense_w: dict[int, float] | None = None  # with no filter: weights read so far
        self._cum: np.ndarray | None = None
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
        if self._sparse is None and self._keeps_all():
            return self._dense_prob(token)
        d = self.sparse()
        if self._dense:  # every token, in id order: no search
            return float(d.probs[token])
        return d.prob(token)

    def _keeps_all(self) -> bool:
        """No filter drops a token (top-p 1, no min-p): the server's default among others."""
        return not self._simple and self.params.top_p >= 1.0 and self.params.min_p <= 0.0

    def _dense_weights(self, out: np.ndarray) -> np.ndarray:
        """Every token's weight e^(1/T) (scaled by the bound), in float64, into `out`."""
        t = self.params.temperature
        if t == 1.0:
            np.copyto(out, self._e)
        else:
            np.divide(self._e, self._bound, out=out)
            np.power(out, 1.0 / t, out=out)
        return out

    def _dense_prob(self, token: int) -> float:
        """p(token) as the explicit form would give it (the same float64 operations on the same
        values), without building that form: the p/q rule reads one token of a 152k-token row."""
        if self._dense_w is None or token not in self._dense_w:
            w = self._dense_weights(_scratch(self._e.shape[0], np.float64))
            if self._dense_total is None:
                self._dense_total = float(w.sum())
            self._dense_w = self._dense_w or {}
            self._dense_w[token] = float(w[token])
        return self._dense_w[token] / self._dense_total

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
                    # float32 sum of the row can err (n * 2^-24 of the total) gets its verdict
                    goal, slack = p.top_p * self._total(), e.shape[0] * 2.0 ** -24 * self._total()
                    lo = max(0, cut - 3)
                    cut = lo + sum(1 for i in range(lo, min(cut + 3, order.shape[0]))
                                   if (before[i] < goal if abs(before[i] - goal) > slack else self._in_nucleus(int(order[i]))))
                    order = order[:max(cut, 1)]
                elif p.min_p <= 0.0:  # every token, in id order (the server's default: T 1, no filter)
                    self._dense = True
                    w = self._dense_weights(np.empty(e.shape[0], dtype=np.float64))
                    if self._dense_total is None:
                        self._dense_total = float(w.sum())
                    w /= self._dense_total
                    self._sparse = Dist(np.arange(e.shape[0], dtype=np.int64), w)
                    return self._sparse
                else:
                    order = np.arange(e.shape[0])
                if p.min_p > 0.0:
                    order = order[e[order] >= self._min_p_floor()]
                w = (e[order].astype(np.float64) / self._bound) ** (1.0 / p.temperature)
                self._sparse = Dist(order.astype(np.int64), w / w.sum())
        return self._sparse

    def _nucleus_prefix(self) -> tuple[np.ndarray, np.ndarray, int]:
        """The most likely tokens in the order a stable sort of the whole row gives them (ties
        by id), far enough to hold the top-p cut with 3 to spare, and the cut by the sorted
        cumulative mass. Sorting 152k values costs ~15 ms a row, and a real model's nucleus is
        a handful of tokens: sort only those above a threshold, lowered until the cut fits.
        Everything above the threshold comes before everything below it, so the prefix, its
        float64 cumulative sums and the cut are those of the full sort, exactly."""
        e, goal = self._e, self.params.top_p * self._total()
        top = float(e[self._top])
        for shrink in (2.0 ** -10, 2.0 ** -24, 2.0 ** -60):
            idx = np.flatnonzero(e > top * shrink)
            if float(e[idx].sum(dtype=np.float64)) < goal:
                continue
            order = idx[np.argsort(-e[idx], kind="stable")]
            before = np.cumsum(e[order], dtype=np.float64) - e[order]
            cut = int(np.searchsorted(before, goal, side="left"))
            if cut + 3 <= order.shape[0]:
                return order, before, cut
        order = np.argsort(-e, kind="stable")
        before = np.cumsum(e[order], dtype=np.float64) - e[order]
        return order, before, int(np.searchsorted(before, goal, side="left"))

    def _blocks(self) -> np.ndarray:
        """Cumulative mass of the raw softmax per block of BLOCK tokens (float32 BLAS sums,
        accumulated in float64): the proposal's block masses, by definition."""
        if self._cum is None:
            e, b = self._e, self.BLOCK
            nb = e.shape[0] // b
            sums = np.empty(nb + 1, dtype=np.float64)
            sums[:nb] = e[: nb * b].reshape(nb, b) @ self._ONES
            sums[nb] = e[nb * b :].sum(dtype=np.float64)
            self._cum = np.cumsum(sums)
        return self._cum

    def _total(self) -> float:
        return float(self._blocks()[-1])

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
        et = e[token]
        mask = _scratch(e.shape[0])
        np.greater(e, et, out=mask)  # 1.0 / 0.0
        above = float(np.dot(e, mask))  # BLAS: 2x the float32 sum's speed
        ties = mask[:token]
        np.equal(e[:token], et, out=ties)
        above += float(et) * int(np.count_nonzero(ties))
        return above < self.params.top_p * self._total()

    def sample(self, rng: np.random.Generator) -> int:
        """One token, distributed exactly as `sparse()` says."""
        if not self._simple:
            tok = self.try_sample(rng)
            if tok is not None:
                return tok
        d = self.sparse()
        c = np.cumsum(d.probs)
        return int(d.ids[min(int(np.searchsorted(c, rng.random() * c[-1], side="right")), c.shape[0] - 1)])

    def try_sample(self, rng: np.random.Generator, exclude: int | None = None) -> int | None:
        """A draw by rejection from the raw softmax, or None after TRIES proposals failed (the
        caller then draws from the explicit form: a mixture of exact draws is exact).

        Proposal: a block with probability (its sum) / (all blocks' sums), then a token in it
        by the block's own float64 prefix sums, so a token's proposal mass is e / total up to
        the float32 rounding of its block's sum. `exclude`: draw from this distribution
        without that token (the residual after a one-hot draft was rejected); its block's
        mass is recomputed in float64 without it, so rounding leaves it no phantom mass."""
        p = self.params
        e, cum, b = self._e, self._blocks(), self.BLOCK
        xblk, xinner = -1, None
        if exclude is not None:
            xblk = exclude // b
            xseg = e[xblk * b : (xblk + 1) * b].astype(np.float64)
            xseg[exclude - xblk * b] = 0.0
            xinner = np.cumsum(xseg)
            masses = np.diff(cum, prepend=0.0)
            masses[xblk] = xinner[-1]
            cum = np.cumsum(masses)
        z, bound, floor = float(cum[-1]), self._bound, self._min_p_floor()
        if z <= 0.0:
            return None
        cool = 1.0 / p.temperature - 1.0
        for _ in range(self.TRIES):
            u = rng.random() * z
            blk = min(int(np.searchsorted(cum, u, side="right")), cum.shape[0] - 1)
            lo = float(cum[blk - 1]) if blk else 0.0
            seg = e[blk * b : (blk + 1) * b]
            inner = xinner if blk == xblk else np.cumsum(seg, dtype=np.float64)
            mass = float(cum[blk]) - lo
            r = (u - lo) * (float(inner[-1]) / mass) if mass > 0.0 else 0.0
            j = min(int(np.searchsorted(inner, r, side="right")), seg.shape[0] - 1)
            tok, et = blk * b + j, float(seg[j])
            if tok == exclude or et <= 0.0 or et < floor:
                continue
            if cool > 0.0 and rng.random() >= (et / bound) ** cool:
                continue
            if p.top_p < 1.0 and not self._in_nucleus(tok):
                continue
            return tok
        return None
