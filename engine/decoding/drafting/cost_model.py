"""Auto's cost model: what drafting and verifying cost on this machine, and what it pays.

The standard model for speculative decoding: with per-token acceptance probability alpha,
drafting k tokens yields on average E(k) = (1 - alpha^(k+1)) / (1 - alpha) tokens per step,
and a step costs k draft steps plus one target pass over k + 1 tokens. Every term is
*measured* on this machine during generation (a CPU verifies 8 tokens at about 4x the cost
of one; a GPU almost for free). `TextAcceptance` lowers the trust in a drafter's stated
confidence where one text proves worse than the calibration across texts.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Protocol, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from ...llamacpp.context import Context

MAX_LOOKAHEAD = 16
CONF_BUCKETS = 20  # a drafter's stated confidence, in buckets of 0.05
# Before a wider pass is measured, each token past the first is priced at this share of a
# one-token pass: above what CPUs measured (8 tokens at about 4x one, 2 at 1.7x), so that
# Auto's first answer drafts only where a gain survives a steep curve; the steps it then
# drafts measure the real curve, which replaces the prior at once.
PRIOR_SLOPE = 0.5
READ_CHUNK_MIN = 16  # tokens a model draft reads between two target steps while it catches up, at least


class OfferedProposal(Protocol):
    """What a step's offered proposal tells the acceptance measure (drafter_api.Proposal, not imported)."""

    tokens: list[int]
    confidence: list[float] | None


def conf_bucket(c: float) -> int:
    """The calibration bucket of a stated confidence."""
    return min(CONF_BUCKETS - 1, max(0, int(c * CONF_BUCKETS)))


def tried(confidence: "Sequence[float] | None", drafted: int, accepted: int) -> Iterator[tuple[float, bool]]:
    """The tokens of a verified proposal that were tried, with whether each held: token i
    was tried only if all before it were accepted."""
    for i, c in enumerate((confidence or [])[: min(drafted, accepted + 1)]):
        yield c, i < accepted


def expected_tokens(k: int, alpha: float) -> float:
    """Mean tokens emitted by a step that drafts k tokens (accepted prefix + one target token)."""
    if k <= 0:
        return 1.0
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def non_decreasing(points: dict[int, tuple[float, int]]) -> dict[int, float]:
    """Per batch size, the closest times (weighted by sample counts) that never fall as the
    batch grows: pool-adjacent-violators. A pass over more tokens does the work of a narrower
    one and more, on any backend; a wider size that looks cheaper was measured in a quieter
    moment. On a machine shared with other programs one such sample (a 7-token pass timed at
    1.05x a one-token pass, against 2.7x for 3 tokens) made Auto verify 6 lookup tokens a step
    at 48% acceptance, three times slower than target alone."""
    blocks: list[list] = []  # [mean, weight, sizes]
    for n in sorted(points):
        t, w = points[n]
        blocks.append([t, max(1, w), [n]])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (t1, w1, n1), (t2, w2, n2) = blocks[-2], blocks.pop()
            blocks[-1] = [(t1 * w1 + t2 * w2) / (w1 + w2), w1 + w2, n1 + n2]
    return {n: t for t, _, sizes in blocks for n in sizes}


@dataclass
class Prediction:
    k: int
    tokens_per_step: float
    seconds_per_step: float
    speedup: float  # vs plain target decoding, by the same cost model


class CostModel:
    """Measured timings of one target/drafter pair, updated after every step.

    verify time per batch size n (exponentially weighted, interpolated between measured
    sizes), draft time per proposed token, and the acceptance probability alpha. It lives
    as long as the pair is loaded, so each generation starts from what the last one learned.
    """

    RECENT_S = 20.0  # compare costs measured at about the same time (load changes)
    CONF_BUCKETS = CONF_BUCKETS
    CONF_PRIOR = 4.0  # weight of a drafter's stated confidence before measurements

    def __init__(self, *, decay: float = 0.85, alpha_prior: float = 0.6, prior_weight: float = 2.0, window: int = 9):
        self._lock = threading.Lock()
        self.decay = decay
        # Medians of recent (time-stamped) samples, not running means: on a shared machine
        # one step that waited for the CPU must not convince Auto that plain decoding is
        # slow, and costs measured minutes apart under different load must not be compared.
        self._verify: dict[int, deque[tuple[float, float]]] = {}
        # Wider passes also as multiples of a one-token pass measured at about the same time.
        # Load moves both alike, so a whole window of ratios stays comparable, where the
        # absolute times of a size Auto drafts rarely are its last few samples, taken minutes
        # apart under other load (and stored so for the next process: one benchmark left a
        # pass over 2 tokens at 3.9x one token, which costs 1.7x measured back to back).
        self._ratio: dict[int, deque[float]] = {}
        self._draft: deque[tuple[float, float]] = deque(maxlen=window)
        self._read: deque[tuple[float, float]] = deque(maxlen=window)  # a model draft reading context: s per token
        self._target_read: deque[tuple[float, float]] = deque(maxlen=window)  # the target's prefill: s per token
        self._window = window
        self.draft_ratio_prior: float = 0.3  # draft step / target step before measuring
        self._acc_s = alpha_prior * prior_weight
        self._acc_f = (1.0 - alpha_prior) * prior_weight
        self._prior = (alpha_prior * prior_weight, (1.0 - alpha_prior) * prior_weight)
        self.steps_observed = 0
        self.free_drafter = False  # proposals cost ~nothing (prompt lookup): Auto trims by confidence
        self.draft_load_s = 0.0  # a draft model loaded when first needed: what its load would cost now
        # Acceptance by the drafter's own confidence, in 20 buckets: a drafter that says 0.9
        # may be right 70% of the time. Counts, with the stated confidence as a weak prior.
        self._conf_hits = [0.0] * self.CONF_BUCKETS
        self._conf_total = [0.0] * self.CONF_BUCKETS
        # The rest of a shared pass this generation's rows join (parallel slots, set by their
        # scheduler around each slot's planning): its rows, and the tokens they are expected
        # to give. Auto then prices a draft by what it adds to the whole pass's time against
        # what it adds to the whole pass's tokens, so it drafts less as the slots fill.
        self.load = BatchLoad()

    # -- observations --------------------------------------------------------------------
    # A pass over n tokens never costs more than this many times n one-token passes (it could be
    # split into them); a sample above that is a stall (the machine paused the process), not a cost.
    # Kept, one such sample would stand for its batch size until Auto drafts that size again, which
    # a cost that high forbids: measured, a 3.3 s stall of one 3-token pass stopped every 2-token
    # draft for the rest of a benchmark (and was stored for the next).
    STALL = 2.0

    def observe_verify(self, n: int, seconds: float) -> None:
        with self._lock:
            self._add_verify(n, seconds, time.monotonic())

    @classmethod
    def stalled(cls, n: int, seconds: float, one: float) -> bool:
        """`seconds` for n tokens (a pass, or n draft tokens) is a stall against one-token passes of `one`."""
        return seconds > cls.STALL * n * one

    def _add_verify(self, n: int, seconds: float, when: float) -> None:
        one = self._verify.get(1)
        if n > 1 and one:
            v1 = self._estimate(one)
            if self.stalled(n, seconds, v1):
                return
            self._ratio.setdefault(n, deque(maxlen=self._window)).append(seconds / v1)
        self._verify.setdefault(n, deque(maxlen=self._window)).append((when, seconds))

    def observe_draft(self, drafted: int, seconds: float) -> None:
        if drafted <= 0:
            return
        with self._lock:
            self._draft.append((time.monotonic(), seconds / drafted))

    def observe_draft_read(self, tokens: int, seconds: float) -> None:
        """A model draft read `tokens` of context it had not seen (its prompt), in `seconds`."""
        if tokens <= 0:
            return
        with self._lock:
            self._read.append((time.monotonic(), seconds / tokens))

    READ_SAMPLE_MIN = 64  # a prefill chunk shorter than this is mostly a call's fixed cost, not reading

    def observe_target_read(self, tokens: int, seconds: float) -> None:
        """The target read `tokens` of a prompt in one batch (a prefill chunk), in `seconds`:
        what reading a token costs it, the yardstick of a model draft's reading before that
        is measured."""
        if tokens < self.READ_SAMPLE_MIN or seconds <= 0:
            return
        with self._lock:
            self._target_read.append((time.monotonic(), seconds / tokens))

    def _estimate(self, samples: deque[tuple[float, float]]) -> float:
        now = time.monotonic()
        recent = [v for t, v in samples if now - t <= self.RECENT_S]
        return statistics.median(recent or [v for _, v in list(samples)[-3:]])

    @property
    def verify_s(self) -> dict[int, float]:
        """Estimated seconds for a target pass over n tokens, per measured n: a one-token pass
        as measured lately, wider ones as their typical multiple of it, never less than a
        narrower pass (see `non_decreasing`)."""
        with self._lock:
            one = self._verify.get(1)
            v1 = self._estimate(one) if one else None
            out: dict[int, tuple[float, int]] = {}
            for n, v in self._verify.items():
                ratios = self._ratio.get(n)
                if not v:
                    continue
                if n > 1 and ratios and v1:
                    out[n] = (v1 * statistics.median(ratios), len(ratios))
                else:
                    out[n] = (self._estimate(v), len(v))
            return non_decreasing(out)

    @property
    def draft_token_s(self) -> float | None:
        with self._lock:
            return self._estimate(self._draft) if self._draft else None

    @property
    def draft_read_token_s(self) -> float | None:
        with self._lock:
            return self._estimate(self._read) if self._read else None

    @property
    def target_read_token_s(self) -> float | None:
        with self._lock:
            return self._estimate(self._target_read) if self._target_read else None

    def age_of_plain(self) -> float:
        """Seconds since target-alone decoding (n = 1) was last measured."""
        with self._lock:
            v = self._verify.get(1)
            return time.monotonic() - v[-1][0] if v else float("inf")

    def observe_acceptance(self, drafted: int, accepted: int, confidence: "list[float] | None" = None) -> None:
        if drafted <= 0:
            return
        if confidence:
            with self._lock:
                for c, held in tried(confidence, drafted, accepted):
                    b = conf_bucket(c)
                    self._conf_total[b] += 1
                    self._conf_hits[b] += 1 if held else 0
        with self._lock:
            ps, pf = self._prior
            # Decay towards the prior so alpha follows the text (copying vs free writing).
            self._acc_s = self.decay * self._acc_s + (1 - self.decay) * ps + accepted
            self._acc_f = self.decay * self._acc_f + (1 - self.decay) * pf + (1 if accepted < drafted else 0)
            self.steps_observed += 1

    # -- estimates -----------------------------------------------------------------------
    @property
    def alpha(self) -> float:
        return self._acc_s / (self._acc_s + self._acc_f)

    def calibrated_confidence(self, c: float) -> float:
        """The measured acceptance rate of tokens the drafter gave confidence `c` (all texts)."""
        b = conf_bucket(c)
        return (self._conf_hits[b] + self.CONF_PRIOR * c) / (self._conf_total[b] + self.CONF_PRIOR)

    # -- persistence (engine/models/calibration.py keys it by machine and model) ---------------
    def export_costs(self, min_samples: int = 1) -> dict:
        """Verify times per batch size (those measured at least `min_samples` times) and the
        draft token time, as medians."""
        with self._lock:
            sizes = {n for n, v in self._verify.items() if len(v) >= min_samples}
        return {"verify_s": {str(n): t for n, t in self.verify_s.items() if n in sizes},
                "draft_token_s": self.draft_token_s}

    CONF_KEEP = 40.0  # a persisted bucket counts as at most this many tokens: new text still moves it

    def export_confidence(self) -> dict:
        """Acceptance per confidence bucket (hits, totals), for the next process of this pair."""
        with self._lock:
            scale = [min(1.0, self.CONF_KEEP / t) if t > 0 else 0.0 for t in self._conf_total]
            return {"hits": [round(h * s, 3) for h, s in zip(self._conf_hits, scale)],
                    "total": [round(t * s, 3) for t, s in zip(self._conf_total, scale)]}

    def import_confidence(self, data: dict) -> None:
        """Seed the confidence buckets measured by an earlier process (ignored when this model
        has measured its own already, or when the data is malformed)."""
        hits, total = data.get("hits"), data.get("total")
        n = self.CONF_BUCKETS
        if not (isinstance(hits, list) and isinstance(total, list) and len(hits) == n == len(total)):
            return
        try:
            pairs = [(float(h), float(t)) for h, t in zip(hits, total)]
        except (TypeError, ValueError):
            return
        if any(not (0 <= h <= t <= self.CONF_KEEP) for h, t in pairs):  # NaN fails too
            return
        with self._lock:
            if any(self._conf_total):
                return
            self._conf_hits = [h for h, _ in pairs]
            self._conf_total = [t for _, t in pairs]

    def import_costs(self, data: dict) -> None:
        """Seed the estimates from an earlier process. Seeded samples count as old: the
        first real steps (recent samples) take over as soon as they exist."""
        old = time.monotonic() - 10 * self.RECENT_S
        with self._lock:
            # one-token passes first: they are the yardstick a stored stall is recognised by
            for n_i, t_f in sorted((int(n), float(t)) for n, t in (data.get("verify_s") or {}).items()):
                if n_i >= 1 and t_f > 0 and not self._verify.get(n_i):
                    self._add_verify(n_i, t_f, old)
            d = data.get("draft_token_s")
            if d and not self._draft:
                self._draft.append((old, float(d)))

    CALIBRATED_SIZES = 3  # batch sizes measured, one token included...
    CALIBRATED_SAMPLES = 3  # ...each at least this many times

    @property
    def calibrated(self) -> bool:
        """Enough of the verify curve was measured (by steps, or seeded and confirmed by them) to
        be worth storing for the next process: a one-token pass and two wider ones, each
        several times."""
        with self._lock:
            sizes = [n for n, v in self._verify.items() if len(v) >= self.CALIBRATED_SAMPLES]
        return 1 in sizes and len(sizes) >= self.CALIBRATED_SIZES

    def snapshot(self) -> "Costs":
        """The current estimates, computed once; predictions then are plain arithmetic
        (Auto asks 2 x 17 of them every step)."""
        return Costs(sorted(self.verify_s.items()), self.draft_token_s, self.draft_ratio_prior, self.alpha,
                     self.draft_read_token_s, self.target_read_token_s, self.load)

    @contextmanager
    def loaded(self, load: "BatchLoad") -> Iterator[None]:
        """Plan under `load` (what the other slots put in the same pass), then alone again."""
        self.load = load
        try:
            yield
        finally:
            self.load = BatchLoad()

    def verify_time(self, n: int) -> float:
        """Seconds for a target pass over n tokens, interpolated between measured sizes."""
        return self.snapshot().verify_time(n)

    def draft_time(self, k: int) -> float:
        return self.snapshot().draft_time(k)

    def predict(self, k: int, alpha: float | None = None) -> Prediction:
        return self.snapshot().predict(k, alpha)

    def best(self, max_k: int = MAX_LOOKAHEAD, alpha: float | None = None) -> Prediction:
        return self.snapshot().best(max_k, alpha)


@dataclass(frozen=True)
class BatchLoad:
    """What else a target pass carries: `rows` of other sequences (their pending tokens and drafts)
    expected to give `tokens` output tokens; empty: a generation alone. Prompt rows read in the same
    pass are no load: that reading is done whatever a slot drafts (counted as verify rows, 40 of them
    made each draft row beside them look nearly free; measured after: within the noise, §19 of
    docs/benchmarks.md)."""

    rows: int = 0
    tokens: float = 0.0


@dataclass
class Costs:
    """Frozen cost estimates: measured verify times per batch size, draft time, alpha, and
    the load of the pass they are asked about (`BatchLoad`: none for a generation alone)."""

    verify_pts: list[tuple[int, float]]
    draft_token_s: float | None
    draft_ratio_prior: float
    alpha: float
    draft_read_token_s: float | None = None  # a model draft reading context, per token (None: not measured)
    target_read_token_s: float | None = None  # the target reading a prompt in batches, per token (None: not measured)
    load: BatchLoad = BatchLoad()

    def verify_time(self, n: int) -> float:
        pts = self.verify_pts
        if not pts:
            return 1.0 + PRIOR_SLOPE * (n - 1)  # unit cost
        lo = hi = None
        prev = None
        for m, t in pts:
            if m == n:
                return t
            if m < n:
                prev, lo = lo, (m, t)
            elif hi is None:
                hi = (m, t)
        if lo and hi:
            (m0, t0), (m1, t1) = lo, hi
            return t0 + (t1 - t0) * (n - m0) / (m1 - m0)
        if hi:  # below the smallest measured size
            return hi[1]
        # above the largest measured size: the last measured slope, never decreasing, never
        # steeper than the prior's: a token added to a pass costs less the wider the pass, and a
        # store of 1 and 2 tokens priced 17 at 16x one (6-7x measured; benchmarks.md §21)
        assert lo is not None
        slope = PRIOR_SLOPE * (pts[0][1] if pts[0][0] == 1 else lo[1])
        slope = min(slope, max((lo[1] - prev[1]) / (lo[0] - prev[0]), 0.0)) if prev else slope
        return lo[1] + slope * (n - lo[0])

    def draft_time(self, k: int) -> float:
        if k <= 0:
            return 0.0
        per = self.draft_token_s
        if per is None:
            per = self.draft_ratio_prior * self.verify_time(1)
        return k * per

    def draft_read_time(self, n: int) -> float:
        """Seconds for a model draft to read n tokens it has not seen. Before measuring: the
        target's per-token cost reading the prompt (else in a 16-token pass) times the draft's
        relative cost."""
        if n <= 0:
            return 0.0
        per = self.draft_read_token_s
        if per is None:
            target = self.target_read_token_s if self.target_read_token_s is not None else self.verify_time(16) / 16
            per = self.draft_ratio_prior * target
        return n * per

    def read_chunk(self) -> int:
        """Tokens a model draft reads between two target steps while it catches up with the
        context: about one target step's worth (the stream slows by half, never stalls), at
        least READ_CHUNK_MIN."""
        per = self.draft_read_time(1)
        return max(READ_CHUNK_MIN, int(self.verify_time(1) / per)) if per > 0 else READ_CHUNK_MIN

    def catch_up_steps(self, unread: int) -> int:
        """Target steps a model draft's reading of `unread` tokens spans (none drafts)."""
        return -(-unread // self.read_chunk()) if unread > 0 else 0

    def predict(self, k: int, alpha: float | None = None) -> Prediction:
        """k drafts with acceptance `alpha`: this sequence's expected tokens, the pass's time and
        the speedup of the whole pass's tokens per second (with the load's) over no draft."""
        a = self.alpha if alpha is None else alpha
        e = expected_tokens(k, a)
        t = self.draft_time(k) + self.pass_time(k + 1)
        return Prediction(k, e, t, self.rate(e, t) / self.rate(1.0, self.pass_time(1)) if t > 0 else 0.0)

    def pass_time(self, rows: int) -> float:
        """Seconds for a pass carrying this sequence's `rows` beside the load's."""
        return self.verify_time(self.load.rows + rows)

    def rate(self, tokens: float, seconds: float) -> float:
        """The whole pass's tokens per second when this sequence expects `tokens` of it."""
        return (self.load.tokens + tokens) / seconds

    def best(self, max_k: int = MAX_LOOKAHEAD, alpha: float | None = None) -> Prediction:
        best = self.predict(0, alpha)
        for k in range(1, max_k + 1):
            p = self.predict(k, alpha)
            if p.speedup > best.speedup * 1.0001:
                best = p
        return best


class TextAcceptance:
    """What one text's proposals turned out to be worth, per confidence bucket.

    The cost model's buckets are learned across texts (and processes), but texts differ: a
    pointer that has copied 8 tokens of the prompt is nearly always right in a code edit and
    often wrong in a report that paraphrases its notes, and the code edits that taught the
    buckets may have run just before. So each generation counts its own hits per bucket,
    from verified tokens and, for free, from proposed tokens it did not verify (the target's
    next token says whether they were right), and trusts a bucket at most as much as the
    calibration does: a text can only lower it. Drafting a failing long proposal costs
    several plain steps; leaving a good one unverified costs a little speed.
    """

    PRIOR = 4.0  # tokens' worth of the calibration at the start of a text
    DOUBT = 0.5  # a fraction of a miss: a bucket this text has not tried is trusted a bit less

    def __init__(self, cost: CostModel):
        self.cost = cost
        self._hits = [0.0] * CONF_BUCKETS
        self._total = [0.0] * CONF_BUCKETS

    def observe(self, confidence: "Sequence[float] | None", drafted: int, accepted: int) -> None:
        """A verified proposal (its tried tokens)."""
        for c, held in tried(confidence, drafted, accepted):
            self.observe_one(c, held)

    def observe_step(self, offered: "OfferedProposal | None", verified: int, accepted: int, token: int | None) -> None:
        """One step: the first `verified` tokens of the proposal `offered` were verified; when
        every one of them held, the target's own `token` says for free whether the first
        unverified one was right."""
        conf = offered.confidence if offered is not None else None
        self.observe(conf, verified, accepted)
        if offered is not None and conf and accepted == verified < len(offered.tokens) and token is not None:
            self.observe_one(conf[verified], offered.tokens[verified] == token)

    def observe_one(self, confidence: float, accepted: bool) -> None:
        """One proposed token and whether the target wrote it."""
        b = conf_bucket(confidence)
        self._total[b] += 1
        self._hits[b] += 1 if accepted else 0

    def confidence(self, c: float) -> float:
        """The chance that a token of stated confidence `c` is accepted in this text."""
        g = self.cost.calibrated_confidence(c)
        b = conf_bucket(c)
        return min(g, (self._hits[b] + self.PRIOR * g) / (self._total[b] + self.PRIOR + self.DOUBT))


__all__ = ["CostModel", "Costs", "TextAcceptance", "Prediction", "expected_tokens", "tried", "conf_bucket", "MAX_LOOKAHEAD", "CONF_BUCKETS", "PRIOR_SLOPE", "READ_CHUNK_MIN"]
