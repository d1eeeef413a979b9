"""The race: target alone, then speculative, same prompt and settings, one after the other.

One implementation for the CLI (`tandem race`), the app's Race view and the benchmark:
run both, compare outputs (identical, or where they part and whether that is a near-tie),
and state the result honestly. The headline is wall-clock (prompt in, last token out:
what the user waited), with the decode-only ratio beside it; when nothing was drafted, the
machine was busy, the difference is inside run-to-run noise or the speculative run replayed
an answer stored for this very prompt, the headline says so first instead of a speedup
(`RaceResult.kind` tells the view which, so that only a measured gain shows as one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..decoding.events import Event, RunStats
from ..decoding.quality import Divergence
from . import cpu_share

if TYPE_CHECKING:  # pragma: no cover
    from ..decoding.engine import Engine, GenerationResult
    from ..decoding.request import GenerationRequest
    from ..decoding.cancel import CancelToken

SIDE_WORDS = {"target": "the target-alone run", "speculative": "the speculative run"}  # in the verdict's words
NOISE = 0.03  # single runs on a desktop differ by a few percent: closer than this is "the same"
MEMORY_SOURCE = "suffix:history"  # RunStats.accepted_by's key for tokens drafted from stored answers
MEMORY_SHARE = 0.5  # more of the accepted draft tokens than this from memory, of this very prompt: a replay
KINDS = ("faster", "slower", "same", "busy", "replayed", "stopped")  # what a verdict says first


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
    kind: str = ""  # one of KINDS (set by `race`): only "faster" and "slower" are a measured speedup
    remembered: bool = False  # the answer memory held an answer to this prompt before the speculative run

    @property
    def identical(self) -> bool:
        return self.comparison.identical

    @property
    def about_the_same(self) -> bool:
        """Nothing drafted, or a gap inside the noise: the view shows no speedup."""
        return about_the_same(self.target.stats, self.speculative.stats)

    @property
    def measured(self) -> bool:
        """The headline is a speedup (or slowdown) speculation made, not busy, noise, a replay or a stop."""
        return self.kind in ("faster", "slower")

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
            "kind": self.kind,
            "remembered": self.remembered,
        }


def ratios(base: RunStats, spec: RunStats) -> tuple[float, float]:
    """(wall-clock speedup, decode speedup) of `spec` over `base`; 0 where undefined."""
    wall = base.wall_s / spec.wall_s if spec.wall_s > 0 else 0.0
    decode = spec.decode_tokens_per_s / base.decode_tokens_per_s if base.decode_tokens_per_s > 0 else 0.0
    return wall, decode


def compare(engine: "Engine", prompt_tokens: list[int], base_tokens: list[int], spec_tokens: list[int],
            *, greedy: bool, images: Sequence[Any] = ()) -> Comparison:
    """Identical outputs, or (greedy) the first place they part and the target's margin there.
    One output being a prefix of the other (a stop hit earlier) counts as identical. `images`:
    the prompt's pictures (ImageSpans)."""
    if base_tokens == spec_tokens:
        return Comparison(True, None)
    if not greedy:
        return Comparison(False, None)
    pictures = {"images": images} if images else {}  # (a split target's child reads none)
    div = engine.first_divergence(prompt_tokens, base_tokens, spec_tokens, **pictures)  # in the child for a split target
    return Comparison(div is None, div)


def about_the_same(base: RunStats, spec: RunStats, *, noise: float = NOISE) -> bool:
    """No real difference: nothing was drafted, or the wall-clock gap is inside the noise."""
    return spec.drafted == 0 or abs(ratios(base, spec)[0] - 1.0) < noise


@dataclass(frozen=True)
class RaceVerdict:
    kind: str  # one of KINDS
    headline: str  # what it says first, then ": " and why
    detail: str  # the figures behind it


def verdict(base: RunStats, spec: RunStats, *, noise: float = NOISE,
            others_cpu: dict[str, float | None] | None = None, remembered: bool = False) -> tuple[str, str]:
    """(headline, detail) for a race: see `judge`."""
    v = judge(base, spec, noise=noise, others_cpu=others_cpu, remembered=remembered)
    return v.headline, v.detail


def judge(base: RunStats, spec: RunStats, *, noise: float = NOISE,
          others_cpu: dict[str, float | None] | None = None, remembered: bool = False) -> RaceVerdict:
    """The race's verdict, wall-clock first. What makes the figure no measure of speculation
    is said before it: nothing drafted, a stop, a busy machine (`others_cpu`: the share of the
    CPU other programs took, by side), a replay (`remembered`: the answer memory held an answer
    to this prompt, and most accepted tokens came from it), a gap inside the noise."""
    wall, decode = ratios(base, spec)
    detail = (f"wall-clock {base.wall_s:.2f} s vs {spec.wall_s:.2f} s ({wall:.2f}x); "
              f"decode {base.decode_tokens_per_s:.1f} vs {spec.decode_tokens_per_s:.1f} tok/s ({decode:.2f}x)")
    load = cpu_share.others_took({SIDE_WORDS[side]: share for side, share in (others_cpu or {}).items()})
    if spec.drafted == 0:
        busy = f" — the machine was busy ({load})" if load else ""
        return RaceVerdict("same", f"About the same: nothing was drafted — {_why_nothing(spec)}{busy}", detail)
    if spec.finish_reason == "cancelled" or base.finish_reason == "cancelled":
        return RaceVerdict("stopped", "Stopped before the end: no speed comparison", detail)
    detail += f"; acceptance {spec.acceptance_rate:.0%} ({spec.accepted}/{spec.drafted})"
    replay = _replay_words(spec) if remembered else ""
    if load:
        return RaceVerdict("busy", f"The machine was busy: {_ratio_words(wall)} by the clock, but other programs took "
                       f"{load}, so these single runs say more about the load than about speculation: race again "
                       "when it is quiet" + (f" ({replay})" if replay else ""), detail)
    if replay:
        return RaceVerdict("replayed", f"Replayed from memory: {_ratio_words(wall)} because {replay}; "
                       "--no-history-draft (in the app: Settings → Suffix draft memory → Clear) races without it", detail)
    if abs(wall - 1.0) < noise:
        return RaceVerdict("same", f"About the same: {wall:.2f}x is within run-to-run noise", detail)
    if wall > 1.0:
        return RaceVerdict("faster", f"{wall:.2f}x faster (wall-clock)", detail)
    return RaceVerdict("slower", f"{1.0 / wall:.2f}x slower (wall-clock): speculation does not pay here", detail)


def _ratio_words(wall: float) -> str:
    return f"{wall:.2f}x faster" if wall >= 1.0 else f"{1.0 / wall:.2f}x slower"


def _why_nothing(spec: RunStats) -> str:
    if spec.lookahead.startswith("auto") and spec.mode == "lookup":  # its proposals cost nothing to make
        return ("Auto checked none of prompt lookup's proposals: it found no copy, or none it expected "
                "to hold long enough to pay for the wider target pass; a fixed lookahead tries them anyway")
    if spec.lookahead.startswith("auto"):
        return "Auto judged that drafting does not pay on this machine (the draft costs more than it saves)"
    if spec.mode == "lookup":
        return "prompt lookup found nothing in the prompt to copy"
    return "the lookahead was 0"


def _replay_words(spec: RunStats) -> str:
    """'' unless most accepted draft tokens came from stored answers; else how many."""
    n = spec.accepted_by.get(MEMORY_SOURCE, 0)
    if spec.accepted <= 0 or n <= MEMORY_SHARE * spec.accepted:
        return ""
    return (f"{n} of its {spec.accepted} accepted draft tokens were copied from an answer stored for this same "
            "prompt, a repeat rather than what speculation does for a new one")


def race(
    engine: "Engine",
    request: "GenerationRequest",
    *,
    on_event: Callable[[str, Event], None] | None = None,
    cancel: "CancelToken | None" = None,
) -> RaceResult | None:
    """Run `request` with no draft ("target" side), then as asked ("speculative" side), each
    from an empty KV cache: each draft choice keeps its own target context, so a prompt the
    chat had just answered with the draft would be cached on one side only (a race once read
    "1.23x faster" at 1.01x decode: docs/benchmarks.md, section 9).

    `on_event(side, event)` sees every event as it happens (the app streams both panes
    from it). Returns None when cancelled before both sides finished."""
    from ..decoding.drafting.choice import DraftChoice, DraftKind

    if DraftChoice.parse(request.draft).kind is DraftKind.NONE:
        from ..errors import TandemError

        raise TandemError("a race needs a draft: a draft model or 'lookup'")
    results: dict[str, "GenerationResult"] = {}
    others: dict[str, float | None] = {}
    prompt_tokens, images = engine.prompt_input(request) if request.images else (
        engine.tokens_for(request.prompt, chat=request.chat, system=request.system), [])
    remembered = False
    for side, req in (("target", request.with_(draft=None, lookahead=0)), ("speculative", request)):
        if cancel is not None and cancel.cancelled:
            return None
        engine.forget_prompts()  # both sides read the whole prompt: a prefix cached by an earlier answer must not count for one
        if side == "speculative":  # asked before it runs: the run stores its own answer when it ends
            remembered = _remembers(engine, prompt_tokens)
        before = cpu_share.sample()
        res = _collect(engine, req, side, on_event, cancel)
        others[side] = cpu_share.others_share(before, cpu_share.sample())
        results[side] = res
        if res.stats.finish_reason == "cancelled":
            return None
    base, spec = results["target"], results["speculative"]
    cmp = compare(engine, prompt_tokens, base.tokens, spec.tokens, greedy=request.sampling.greedy, images=images)
    wall, decode = ratios(base.stats, spec.stats)
    v = judge(base.stats, spec.stats, others_cpu=others, remembered=remembered)
    return RaceResult(base, spec, wall, decode, cmp, v.headline, v.detail, others, v.kind, remembered)


def _remembers(engine: "Engine", prompt_tokens: list[int]) -> bool:
    """The engine's answer memory holds an answer to this prompt (False where it cannot say:
    a target split over RPC workers)."""
    ask = getattr(engine, "remembers_prompt", None)
    return bool(ask(prompt_tokens)) if ask is not None else False


def _collect(engine: "Engine", req: "GenerationRequest", side: str, on_event: Callable[[str, Event], None] | None,
             cancel: "CancelToken | None") -> "GenerationResult":
    forward = (lambda ev: on_event(side, ev)) if on_event is not None else None
    # prompt_cache=False: the engine's prompt cache, shared by every draft choice, would serve
    # the second side the prompt the first side read
    return engine.generate(req.with_(tag=req.tag or "race", prompt_cache=False), cancel=cancel, on_event=forward)
