"""Tandem's engine: exact speculative decoding over llama.cpp, headless and Qt-free.

Quick use::

    import engine
    engine.setup("target.gguf")                       # load the target once
    out = engine.generate("def fib(n):", draft_model="draft.gguf", lookahead=5)
    print(out.text, out.stats.acceptance_rate)
    for ev in engine.stream("Hello", draft_model="lookup", lookahead="auto"):
        ...

`import engine` stays light: the public names below are imported on first use, so commands
that never run a model (`tandem models`, `pull`, `check`, `doctor` without llama.cpp) do not
load libllama.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any, Iterator

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

if TYPE_CHECKING:
    from .decoding.engine import Engine, GenerationResult
    from .decoding.events import Event

__version__ = "0.1.0"

# Public name -> the module that defines it, imported on first access. One line per name.
_LAZY: dict[str, str] = {
    "Engine": ".decoding.engine",
    "GenerationResult": ".decoding.engine_api",
    "Model": ".llamacpp.llama",
    "Fixed": ".decoding.drafting.lookahead",
    "Auto": ".decoding.drafting.lookahead",
    "CostModel": ".decoding.drafting.cost_model",
    "SamplingParams": ".decoding.sampling.sampler",
    "CancelToken": ".decoding.cancel",
    "check_pair": ".models.compat",
    "Verdict": ".models.compat",
    "Event": ".decoding.events",
    "TokenEvent": ".decoding.events",
    "StepEvent": ".decoding.events",
    "PrefillEvent": ".decoding.events",
    "DraftReadEvent": ".decoding.events",
    "DoneEvent": ".decoding.events",
    "RunStats": ".decoding.events",
    "GenerationRequest": ".decoding.request",
    "RuntimeParams": ".llamacpp.runtime",
    "race": ".measure.racing",
    "RaceResult": ".measure.racing",
    "LiveLookahead": ".decoding.drafting.lookahead",
    "EngineClosedError": ".decoding.decoder",
    "RemoteEngine": ".serving.remote_engine",
    "RemoteWorkerLost": ".serving.remote_engine",
    "Library": ".library",  # a folder of documents indexed for questions (`tandem ask`)
}


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use; `engine.<submodule>` works as before."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    elif importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


_default: Engine | None = None


def setup(target: str, **kw: object) -> Engine:
    """Load the target model used by `generate` and `stream` (replacing any earlier one).

    With `rpc=["HOST:PORT", ...]` the target is split over those workers in a child process
    (`RemoteEngine`): a worker lost mid-answer raises `RemoteWorkerLost` here instead of
    ending this process, as llama.cpp would in-process."""
    from .decoding.engine import Engine

    global _default
    if _default is not None:
        _default.close()
    _default = None
    if kw.get("rpc"):
        from .serving.remote_engine import RemoteEngine

        _default = RemoteEngine(target, **kw)  # type: ignore[arg-type,assignment]
    else:
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
    "setup", "generate", "stream", *_LAZY,
    "TandemError", "ModelFileError", "ModelLoadError", "IncompatiblePairError", "PromptError", "DecodeError",
    "StoreError", "Cancelled", "UnsupportedModelError",
]
