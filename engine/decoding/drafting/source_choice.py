"""Which drafter drafts this step, when several can: the one with the most expected accepted
tokens per second, from each one's measured acceptance and cost.

A model draft costs draft-model time per token and is right with the cost model's measured
alpha; prompt lookup and the suffix draft cost next to nothing and are right as often as their
stated confidences (which follow the match each found) times what that source has measured
(`SourceTrust`). The choice is made before the model samples anything, from what earlier
steps measured, so a sampled draft's tokens stay drawn from the draft's own q: exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from .cost_model import Costs, expected_tokens

MODEL = -1  # `Pick.index` of the model draft (a free candidate's index is >= 0)
PLAIN = -2  # no draft this step


class SourceTrust:
    """How well each free source's proposals have held: accepted tokens against the summed
    stated confidence of the tokens the target tried. A request starts from what the engine
    has measured across requests (weighted like `SEED` tried tokens), so a source that failed
    on this text is trusted less at once, and one that failed for weeks starts trusted less."""

    PRIOR = 2.0  # tokens' worth of "the stated confidence is right" before anything is measured
    SEED = 4.0  # tokens' worth of the engine's history at the start of a request
    KEEP = 200.0  # the engine's history counts as at most this many tokens: new text still moves it

    def __init__(self) -> None:
        self._engine: dict[str, list[float]] = {}  # source -> [hits, stated], across requests
        self._request: dict[str, list[float]] = {}  # the same, this request only

    def begin(self) -> None:
        """A new request: its own counts start empty (the engine's stay)."""
        self._request = {}

    def factor(self, source: str) -> float:
        """Measured accepted tokens per stated confidence (1.0: the source is as sure as it says)."""
        eh, es = self._engine.get(source, (0.0, 0.0))
        seeded = (eh + self.PRIOR) / (es + self.PRIOR)
        rh, rs = self._request.get(source, (0.0, 0.0))
        return (rh + self.SEED * seeded) / (rs + self.SEED)

    def chances(self, source: str, confidence: Sequence[float]) -> list[float]:
        """Per token of a proposal, the chance that it and every token before it are accepted."""
        out, path, f = [], 1.0, self.factor(source)
        for c in confidence:
            path *= min(0.99, max(0.0, c) * f)
            out.append(path)
        return out

    def observe(self, source: str, confidence: Sequence[float], drafted: int, accepted: int) -> None:
        """A verified proposal of `source`: token i was tried only if all before it held."""
        if drafted <= 0:
            return
        stated = float(sum(confidence[: min(drafted, accepted + 1)]))
        for counts in (self._engine, self._request):
            h, s = counts.setdefault(source, [0.0, 0.0])
            h, s = h + accepted, s + stated
            if counts is self._engine and s > self.KEEP:
                h, s = h * self.KEEP / s, self.KEEP
            counts[source] = [h, s]


@dataclass(frozen=True)
class Pick:
    index: int  # a free candidate's index, MODEL or PLAIN
    k: int  # tokens to draft (the model) or to verify (a free proposal)
    tokens_per_s: float  # predicted, by the cost model


class SourceChooser:
    """Auto's choice among a model draft of `model_k` tokens (0: Auto would not draft with the
    model now) and free proposals, each given as its tokens' chances (`SourceTrust.chances`).
    `allows(source)`: whether a free source may be offered this step (Auto's set-aside)."""

    def __init__(self, costs: Costs, room: int, min_gain: float = 1.02,
                 allows: Callable[[str], bool] = lambda source: True):
        self.costs = costs
        self.room = room  # the most tokens a proposal may have this step
        self.min_gain = min_gain  # a free draft must beat plain decoding by this much
        self.allows = allows

    # Rates are the whole pass's (`Costs.rate` over `Costs.pass_time`): alone, this sequence's
    # tokens per second; in a pass shared with other slots (`Costs.load`), everyone's, so a
    # proposal must pay for the time its rows add to the others' pass too. Priced alone, free
    # proposals were verified in full batches where a row costs about a token of another slot
    # (a 2-core CPU: lookup at 4 clients gave 0.92x the aggregate of no draft).

    def model_rate(self, k: int) -> float:
        c = self.costs
        return c.rate(expected_tokens(k, c.alpha), c.draft_time(k) + c.pass_time(k + 1))

    def free_best(self, chances: Sequence[float]) -> tuple[int, float]:
        """The number of a free proposal's tokens with the best expected tokens per second."""
        c = self.costs
        best_k, best_rate, expect = 0, 0.0, 1.0
        for i, p in enumerate(chances[: self.room], 1):
            expect += p
            rate = c.rate(expect, c.pass_time(i + 1))
            if rate > best_rate:
                best_k, best_rate = i, rate
        return best_k, best_rate

    def pick(self, model_k: int, free: Sequence[Sequence[float]]) -> Pick:
        """The model draft when Auto asked for one (it already weighed it against plain decoding,
        or probes), unless a free proposal promises more tokens per second; without a model
        draft, the best free proposal when it beats plain decoding by `min_gain`."""
        plain = self.min_gain * self.costs.rate(1.0, self.costs.pass_time(1))
        best = Pick(MODEL, model_k, self.model_rate(model_k)) if model_k > 0 else Pick(PLAIN, 0, plain)
        bar = max(best.tokens_per_s, plain)
        for i, chances in enumerate(free):
            k, rate = self.free_best(chances)
            if k > 0 and rate > bar:
                best, bar = Pick(i, k, rate), rate
        return best


__all__ = ["MODEL", "PLAIN", "Pick", "SourceChooser", "SourceTrust"]
