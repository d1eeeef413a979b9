"""Settings as objects: what one generation asks for, and how a model is run.

`GenerationRequest` carries everything a generation needs (prompt, drafter choice,
lookahead, sampling, limits), so the CLI, the app, the benchmark and the server build one
object and pass it down instead of spelling out a dozen keyword arguments each.
`RuntimeParams` carries how models are run (context, batch, threads, GPU layers).
`engine.generate(prompt, draft_model=..., lookahead=...)` stays the public convenience:
it builds a request with `GenerationRequest.from_options`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Sequence, Union

from ..errors import PromptError, TandemError
from .lookahead import MAX_LOOKAHEAD, LiveLookahead, Lookahead, parse_lookahead
from .sampling import GREEDY, SamplingParams

if TYPE_CHECKING:  # pragma: no cover
    from .chat import Message
    from .drafters import Drafter
    from .llama import Model

DraftSpec = Union[str, "os.PathLike[str]", "Model", "Drafter", None]
Prompt = Union[str, Sequence["Message"], Sequence[int]]


@dataclass(frozen=True)
class RuntimeParams:
    """How models are loaded and run: one object for every constructor that needs it."""

    n_ctx: int = 4096
    n_batch: int = 512
    n_threads: int | None = None  # None: the physical cores this process may use
    n_gpu_layers: int | None = None  # None: all layers when llama.cpp can offload

    def __post_init__(self) -> None:
        for name, what in (("n_ctx", "the context size"), ("n_batch", "the batch size")):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 16:
                raise TandemError(f"{what} ({name}) must be an integer of at least 16 tokens, got {v!r}")
        if self.n_threads is not None and (not isinstance(self.n_threads, int) or self.n_threads < 1):
            raise TandemError(f"n_threads must be a positive integer, got {self.n_threads!r}")

    @property
    def threads(self) -> int:
        from ..models.hardware import physical_cores

        return self.n_threads or physical_cores()


def runtime_from(runtime: RuntimeParams | None = None, *, n_ctx: int | None = None, n_batch: int | None = None,
                 n_threads: int | None = None, n_gpu_layers: int | None = None) -> RuntimeParams:
    """`runtime` (or the defaults) with the loose keyword options an engine accepts laid over it."""
    rt = runtime or RuntimeParams()
    given = {k: v for k, v in (("n_ctx", n_ctx), ("n_batch", n_batch), ("n_threads", n_threads),
                               ("n_gpu_layers", n_gpu_layers)) if v is not None}
    return replace(rt, **given) if given else rt


def check_prompt(prompt: object) -> Prompt:
    """Accept a string, a list of chat messages, or a list of token ids; say what is wrong otherwise."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (bytes, bytearray)):
        raise PromptError("the prompt must be text (str), not bytes: decode it first")
    if isinstance(prompt, (list, tuple)):
        if not prompt:
            raise PromptError("the prompt is empty")
        if all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            return list(prompt)
        if all(isinstance(m, dict) for m in prompt):
            for i, m in enumerate(prompt):
                if m.get("role") not in ("system", "user", "assistant", "tool") or not isinstance(m.get("content"), str):
                    raise PromptError(
                        f"message {i} must be {{'role': 'system'|'user'|'assistant', 'content': str}}, got {m!r:.80}"
                    )
            return list(prompt)
        raise PromptError("a list prompt must hold chat messages (dicts with role and content) or token ids (ints)")
    raise PromptError(
        f"the prompt must be a str, a list of chat messages or a list of token ids, not {type(prompt).__name__}"
    )


@dataclass
class GenerationRequest:
    """One generation: prompt, drafter, lookahead, sampling and limits.

    `lookahead` may be an int 0..16, "auto", a `Lookahead`, or a `LiveLookahead` handle that
    another thread changes while the generation runs (the app's slider).
    """

    prompt: Prompt
    draft: DraftSpec = None
    lookahead: Any = 5
    max_tokens: int = 512
    sampling: SamplingParams = GREEDY
    stop: tuple[str, ...] = ()
    chat: bool = False
    system: str | None = None
    tag: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # free-form labels for the metrics log

    def __post_init__(self) -> None:
        self.prompt = check_prompt(self.prompt)
        if not isinstance(self.max_tokens, int) or isinstance(self.max_tokens, bool) or self.max_tokens < 1:
            raise TandemError(f"max_tokens must be an integer >= 1, got {self.max_tokens!r}")
        if not isinstance(self.lookahead, LiveLookahead):
            try:
                parse_lookahead(self.lookahead)  # validated whether or not a draft is given
            except (TypeError, ValueError) as e:
                raise TandemError(str(e)) from None
        if isinstance(self.stop, str):
            self.stop = (self.stop,)
        self.stop = tuple(self.stop or ())
        if not all(isinstance(s, str) for s in self.stop):
            raise TandemError("stop must be a list of strings")
        if not isinstance(self.sampling, SamplingParams):
            raise TandemError("sampling must be an engine.SamplingParams")

    @classmethod
    def from_options(
        cls,
        prompt: Prompt,
        *,
        draft_model: DraftSpec = None,
        lookahead: Any = 5,
        max_tokens: int = 512,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        min_p: float = 0.0,
        seed: int | None = None,
        stop: Sequence[str] = (),
        chat: bool = False,
        system: str | None = None,
        tag: str | None = None,
    ) -> "GenerationRequest":
        """The keyword form of `engine.generate` / `Engine.stream`."""
        sampling = SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, seed=seed)
        return cls(prompt, draft_model, lookahead, max_tokens, sampling, tuple(stop or ()), chat, system, tag)

    def live_lookahead(self) -> LiveLookahead:
        """The handle the decoder reads each step (created from `lookahead` unless given)."""
        if isinstance(self.lookahead, LiveLookahead):
            return self.lookahead
        return LiveLookahead(parse_lookahead(self.lookahead))

    def with_(self, **changes: Any) -> "GenerationRequest":
        """A copy with some fields changed (the race runs one request twice)."""
        return replace(self, **changes)


__all__ = ["RuntimeParams", "GenerationRequest", "check_prompt", "DraftSpec", "Prompt", "MAX_LOOKAHEAD", "Lookahead"]
