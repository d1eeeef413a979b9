"""The race: target alone, then speculative, same prompt and settings, one after the other.

One implementation for the CLI (`tandem race`), the app's Race view and the benchmark:
run both, compare outputs (identical, or where they part and whether that is a near-tie),
and state the result honestly. The headline is wall-clock (prompt in, last token out:
what the user waited), with the decode-only ratio beside it; when nothing was drafted or
the difference is inside run-to-run noise, the headline says so instead of a speedup.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from ..decoding.events import Event, RunStats
from ..decoding.quality import Divergence
from . import cpu_share

if TYPE_CHECKING:  # pragma: no cover
    from ..decoding.engine import Engine, GenerationResult
    from ..decoding.settings import GenerationRequest
    from ..decoding.cancel import CancelToken

SIDE_WORDS = {"target": "the target-alone run", "speculative": "the speculative run"}  # in the verdict's words
NOISE = 0.03  # single runs on a desktop differ by a few percent: closer than this is "the same"


@dataclass
class Comparison:
    identical: bool
    divergence: Divergence | None  # greedy only: where the outputs part, with the target's margin


@dataclass
class RaceResult:
    target: "GenerationResult"
    speculative: "GenerationResult"
    wall_speedup: float  # target wall-clock / speculative wall-clock
    decode_speedup: float  # speculative decode tok/s / target decode tok/s
    comparison: Comparison
    headline: str
    detail: str
    others_cpu: dict[str, float | None] = field(default_factory=dict)  # share of the CPU other programs took, per side

    @property
    def identical(self) -> bool:
        return self.comparison.identical

    @property
    def about_the_same(self) -> bool:
        """Nothing drafted, or a gap inside the noise: the view shows no speedup."""
        return about_the_same(self.target.stats, self.speculative.stats)

    @property
    def divergence(self) -> Divergence | None:
        return self.comparison.divergence

    def to_dict(self) -> dict[str, Any]:
        div = self.comparison.divergence
        return {
            "target": {"text": self.target.text, "tokens": self.target.tokens, "stats": self.target.stats.to_dict()},
            "speculative": {"text": self.speculative.text, "tokens": self.speculative.tokens,
                            "stats": self.speculative.stats.to_dict()},
            "speedup": self.decode_speedup,
            "wall_speedup": self.wall_speedup,
            "identical": self.comparison.identical,
            "divergence": None if div is None else div.__dict__,
            "headline": self.headline,
            "detail": self.detail,
            "others_cpu": self.others_cpu,
        }


def ratios(base: RunStats, spec: RunStats) -> tuple[float, float]:
    """(wall-clock speedup, decode speedup) of `spec` over `base`; 0 where undefined."""
    wall = base.wall_s / spec.wall_s if spec.wall_s > 0 else 0.0
    decode = spec.decode_tokens_per_s / base.decode_tokens_per_s if base.decode_tokens_per_s > 0 else 0.0
    return wall, decode


def compare(engine: "Engine", prompt_tokens: list[int], base_tokens: list[int], spec_tokens: list[int],
            *, greedy: bool) -> Comparison:
    """Identical outputs, or (greedy) the first place they part and the target's margin there.
    One output being a prefix of the other (a stop hit earlier) counts as identical."""
    if base_tokens == spec_tokens:
        return Comparison(True, None)
    if not greedy:
        return Comparison(False, None)
    div = engine.first_divergence(prompt_tokens, base_tokens, spec_tokens)  # in the child for a split target
    return Comparison(div is None, div)


def about_the_same(base: RunStats, spec: RunStats, *, noise: float = NOISE) -> bool:
    """No real difference: nothing was drafted, or the wall-clock gap is inside the noise."""
    return spec.drafted == 0 or abs(ratios(base, spec)[0] - 1.0) < noise


def verdict(base: RunStats, spec: RunStats, *, noise: float = NOISE,
            others_cpu: dict[str, float | None] | None = None) -> tuple[str, str]:
    """(headline, detail) for a race: wall-clock first; 'about the same' when it is; and
    when other programs kept the machine busy (`others_cpu`: their share by side), the
    headline's reason says so."""
    headline, detail = _verdict(base, spec, noise)
    busy = cpu_share.busy_words({SIDE_WORDS[side]: share for side, share in (others_cpu or {}).items()})
    if busy:
        big, sep, why = headline.partition(": ")
        headline = f"{big}: {why} — {busy}" if sep else f"{big}: {busy}"
    return headline, detail


def _verdict(base: RunStats, spec: RunStats, noise: float) -> tuple[str, str]:
    wall, decode = ratios(base, spec)
    detail = (f"wall-clock {base.wall_s:.2f} s vs {spec.wall_s:.2f} s ({wall:.2f}x); "
              f"decode {base.decode_tokens_per_s:.1f} vs {spec.decode_tokens_per_s:.1f} tok/s ({decode:.2f}x)")
    if spec.drafted == 0:
        if spec.lookahead.startswith("auto") and spec.mode == "lookup":  # its proposals cost nothing to make
            why = ("Auto checked none of prompt lookup's proposals: it found no copy, or none it expected "
                   "to hold long enough to pay for the wider target pass; a fixed lookahead tries them anyway")
        elif spec.lookahead.startswith("auto"):
            why = "Auto judged that drafting does not pay on this machine (the draft costs more than it saves)"
        elif spec.mode == "lookup":
            why = "prompt lookup found nothing in the prompt to copy"
        else:
            why = "the lookahead was 0"
        return f"About the same: nothing was drafted — {why}", detail
    if spec.finish_reason == "cancelled" or base.finish_reason == "cancelled":
        return "Stopped before the end: no speed comparison", detail
    if abs(wall - 1.0) < noise:
        return f"About the same: {wall:.2f}x is within run-to-run noise", detail + f"; acceptance {spec.acceptance_rate:.0%}"
    detail += f"; acceptance {spec.acceptance_rate:.0%} ({spec.accepted}/{spec.drafted})"
    if wall > 1.0:
        return f"{wall:.2f}x faster (wall-clock)", detail
    return f"{1.0 / wall:.2f}x slower (wall-clock): speculation does not pay here", detail


def race(
    engine: "Engine",
    request: "GenerationRequest",
    *,
    on_event: Callable[[str, Event], None] | None = None,
    cancel: "CancelToken | None" = None,
) -> RaceResult | None:
    """Run `request` with no draft ("target" side), then as asked ("speculative" side), each
    from an empty KV cache: each draft choice keeps its own target context, so a prompt the
    chat had just answered with the pair's draft was cached on the speculative side only
    (seen in the app: first token 2.37 s against 0.46 s, "1.23x faster" at 1.01x decode).

    `on_event(side, event)` sees every event as it happens (the app streams both panes
    from it). Returns None when cancelled before both sides finished."""
    from ..decoding.drafting.choice import DraftChoice, DraftKind

    if DraftChoice.parse(request.draft).kind is DraftKind.NONE:
        from ..errors import TandemError

        raise TandemError("a race needs a draft: a draft model or 'lookup'")
    results: dict[str, "GenerationResult"] = {}
    others: dict[str, float | None] = {}
    for side, req in (("target", request.with_(draft=None, lookahead=0)), ("speculative", request)):
        if cancel is not None and cancel.cancelled:
            return None
        engine.forget_prompts()  # both sides read the whole prompt: a prefix cached by an earlier answer must not count for one
        before = cpu_share.sample()
        res = _collect(engine, req, side, on_event, cancel)
        others[side] = cpu_share.others_share(before, cpu_share.sample())
        results[side] = res
        if res.stats.finish_reason == "cancelled":
            return None
    base, spec = results["target"], results["speculative"]
    prompt_tokens = engine.tokens_for(request.prompt, chat=request.chat, system=request.system)
    cmp = compare(engine, prompt_tokens, base.tokens, spec.tokens, greedy=request.sampling.greedy)
    wall, decode = ratios(base.stats, spec.stats)
    headline, detail = verdict(base.stats, spec.stats, others_cpu=others)
    return RaceResult(base, spec, wall, decode, cmp, headline, detail, others)


def _collect(engine: "Engine", req: "GenerationRequest", side: str, on_event: Callable[[str, Event], None] | None,
             cancel: "CancelToken | None") -> "GenerationResult":
    forward = (lambda ev: on_event(side, ev)) if on_event is not None else None
    return engine.generate(req.with_(tag=req.tag or "race"), cancel=cancel, on_event=forward)
