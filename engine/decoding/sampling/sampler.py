"""The sampler and the exact acceptance rule (the parameters: params.py; the distribution of a
row under them, its filters, probabilities and draws: distribution.py; both re-exported here,
the one place callers import them from).

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

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .distribution import Dist, LazyDist, distribution, residual_sample
from .finite import check_top
from .params import GREEDY, SEED_MAX, SamplingParamError, SamplingParams

__all__ = ["GREEDY", "SEED_MAX", "Dist", "LazyDist", "SamplingParamError", "SamplingParams", "Sampler",
           "Verification", "distribution", "verify"]


class Sampler:
    """Draws tokens with one seeded random stream, so a run is reproducible per seed."""

    def __init__(self, params: SamplingParams = GREEDY):
        self.params = params
        self.rng = np.random.default_rng(params.seed)

    @property
    def greedy(self) -> bool:
        return self.params.greedy

    def dist(self, logits: np.ndarray) -> Dist:
        """The distribution to draw from: lazy, so a plain draw sorts nothing (see distribution.py)."""
        return LazyDist(logits, self.params)

    def draw(self, d: Dist) -> int:
        return d.sample(self.rng)

    def pick(self, logits: np.ndarray) -> int:
        """Next token from logits: argmax when greedy, else a draw."""
        if self.greedy:
            t = int(np.argmax(logits))
            check_top(float(logits[t]))
            return t
        return self.draw(self.dist(logits))

    def residual_draw(self, p: Dist, q: Dist) -> int:
        """Draw from norm(max(0, p - q)): the correction after a rejection."""
        return residual_sample(p, q, self.rng)


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
        picked = np.argmax(logits, axis=1)
        check_top(float(logits[np.arange(k + 1), picked].max()))  # NaN wins argmax and max alike
        choices = [int(t) for t in picked]
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
