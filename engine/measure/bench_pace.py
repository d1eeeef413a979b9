"""How long a benchmark will take, before it starts: generations counted, and a speed from
the last benchmark of the model here, Auto's calibration or the hardware estimate."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence


@dataclass(frozen=True)
class Estimate:
    """What a benchmark will cost before it starts: generations and, given a speed, time."""

    generations: int  # measured runs: prompts x configurations x repetitions
    warmup: int  # one warm-up generation per configuration
    seconds: float | None  # None when no speed is known
    basis: str  # where the speed came from, in words

    def text(self) -> str:
        """"about 126 generations (+7 warm-up), ~13 min on this machine"."""
        head = f"about {self.generations} generation{'' if self.generations == 1 else 's'}" + (f" (+{self.warmup} warm-up)" if self.warmup else "")
        if self.seconds is None:
            return head
        m = self.seconds / 60
        when = f"~{self.seconds:.0f} s" if self.seconds < 90 else (f"~{m:.0f} min" if m < 90 else f"~{m / 60:.1f} h")
        return f"{head}, {when} on this machine"


def estimate(n_prompts: int, configs: Sequence[Any], *, repeat: int, max_tokens: int,
             token_s: float | None, basis: str = "", warmup: bool = True) -> Estimate:
    """Every generation at target-alone speed for the full `max_tokens` (the configurations
    that win are faster, the ones that lose are slower; runs that stop early take less)."""
    runs = n_prompts * len(configs) * repeat
    warm = len(configs) if warmup and n_prompts else 0
    seconds = (runs + warm) * max_tokens * token_s if token_s else None
    return Estimate(runs, warm, seconds, basis)


def _pace_key(engine: Any) -> str:
    return engine.calibration_key() + "|bench"  # beside Auto's costs for the same model and machine


def target_token_seconds(engine: Any) -> tuple[float, str] | None:
    """Seconds per generation token for a loaded engine, best source first: the pace of the
    last benchmark of this model on this machine (prefill, drafting and checks included),
    Auto's calibrated cost model (target alone), else the hardware bandwidth estimate."""
    from ..llamacpp import ggml_devices
    from ..models import calibration, hardware

    vk = engine.calibration_key()  # the key Auto persists its measurements under
    pace = (calibration.load(_pace_key(engine)) or {}).get("s_per_token")
    if isinstance(pace, (int, float)) and pace > 0:
        return float(pace), "the pace of your last benchmark of this model here"
    t1 = ((calibration.load(vk) or {}).get("verify_s") or {}).get("1")
    if isinstance(t1, (int, float)) and t1 > 0:
        return float(t1), "calibrated cost model, target alone: speculative modes that lose here take longer"
    try:
        size = Path(engine.target.path).stat().st_size
    except OSError:
        return None
    bw = hardware.ram_bandwidth(ggml_devices.probe())
    return 1.0 / hardware.expected_tok_s(size, bw), f"uncalibrated: hardware bandwidth estimate ({bw.basis})"


def record_pace(engine: Any, seconds: float, generations: int, max_tokens: int) -> None:
    """Keep what a benchmark really took per token of its budget, for the next estimate."""
    from ..models import calibration

    if generations > 0 and max_tokens > 0 and seconds > 0:
        calibration.save({_pace_key(engine): {"s_per_token": seconds / (generations * max_tokens)}})
