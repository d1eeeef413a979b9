"""Tandem's engine: exact speculative decoding over llama.cpp, headless and Qt-free.

Quick use::

    import engine
    engine.setup("target.gguf")                       # load the target once
    out = engine.generate("def fib(n):", draft_model="draft.gguf", lookahead=5)
    print(out.text, out.stats.acceptance_rate)
    for ev in engine.stream("Hello", draft_model="lookup", lookahead="auto"):
        ...
"""

from __future__ import annotations

from typing import Iterator

from .api import Engine, GenerationResult
from .race import RaceResult, race
from .settings import GenerationRequest, RuntimeParams
from .compat import Verdict, check_pair
from .errors import (
    Cancelled,
    DecodeError,
    IncompatiblePairError,
    ModelFileError,
    ModelLoadError,
    PromptError,
    StoreError,
    TandemError,
    UnsupportedModelError,
)
from .events import DoneEvent, Event, PrefillEvent, RunStats, StepEvent, TokenEvent
from .llama import Model
from .lookahead import Auto, CostModel, Fixed, LiveLookahead
from .sampling import SamplingParams
from .speculative import CancelToken, EngineClosedError

__version__ = "0.1.0"

_default: Engine | None = None


def setup(target: str, **kw: object) -> Engine:
    """Load the target model used by `generate` and `stream` (replacing any earlier one)."""
    global _default
    if _default is not None:
        _default.close()
    _default = None
    _default = Engine(target, **kw)  # type: ignore[arg-type]
    return _default


def _engine() -> Engine:
    if _default is None:
        raise TandemError("no target model: call engine.setup('path/to/target.gguf') first")
    return _default


def generate(prompt: object, **kw: object) -> GenerationResult:
    """Generate with the target from `setup`; see `Engine.stream` for the options."""
    return _engine().generate(prompt, **kw)  # type: ignore[arg-type]


def stream(prompt: object, **kw: object) -> Iterator[Event]:
    return _engine().stream(prompt, **kw)  # type: ignore[arg-type]


__all__ = [
    "GenerationRequest", "RuntimeParams", "race", "RaceResult", "LiveLookahead", "EngineClosedError",
    "Engine", "GenerationResult", "setup", "generate", "stream", "Model", "Fixed", "Auto", "CostModel",
    "SamplingParams", "CancelToken", "check_pair", "Verdict", "Event", "TokenEvent", "StepEvent",
    "PrefillEvent", "DoneEvent", "RunStats", "TandemError", "ModelFileError", "ModelLoadError",
    "IncompatiblePairError", "PromptError", "DecodeError", "StoreError", "Cancelled", "UnsupportedModelError",
]
