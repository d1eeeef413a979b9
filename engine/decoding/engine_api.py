"""What every engine offers, in-process (`Engine`) or in a child process (`RemoteEngine`).

The server, the app, the race, the benchmark and `engine.setup` take a `BaseEngine` and
never ask which kind they hold. The request checks and `generate` (collecting `stream`)
live here once; each engine supplies how it tokenises, streams and closes. Each engine
owns one `GenerationQueue` (`queue`): the only thing that runs generations one at a time.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from ..errors import EmbeddingsUnsupported, TandemError
from .events import DoneEvent, Event, RunStats, StepEvent, TokenEvent
from .request import GenerationRequest, Prompt

if TYPE_CHECKING:
    from .cancel import CancelToken
    from .queue import GenerationQueue
    from .quality import Divergence
    from ..llamacpp.runtime import RuntimeParams


@dataclass
class GenerationResult:
    text: str
    tokens: list[int]
    stats: RunStats
    token_events: list[TokenEvent] = field(default_factory=list)
    step_events: list[StepEvent] = field(default_factory=list)


class BaseEngine(ABC):
    """One loaded target and its drafters, one generation at a time (`queue`)."""

    runtime: RuntimeParams
    queue: GenerationQueue
    target: Any  # a `Model`, or a stand-in with the same vocabulary calls (RemoteTarget)
    rpc: Any  # the RPC workers the target is split over (`describe()`, `endpoints`), or None
    calibration: bool  # measured pass costs are loaded from and saved to the calibration store

    @property
    def n_ctx(self) -> int:
        return self.runtime.n_ctx

    @property
    def n_batch(self) -> int:
        return self.runtime.n_batch

    @property
    @abstractmethod
    def closed(self) -> bool: ...

    @abstractmethod
    def tokens_for(self, prompt: Prompt, *, chat: bool = False, system: str | None = None,
                   limit: int | None = None, tools: Sequence[Mapping[str, Any]] | None = None,
                   parse_special: bool = False, media: bool = False) -> list[int]:
        """Prompt tokens: text (raw or through the chat template), chat messages, or token ids;
        with `limit`, counting stops with `PromptTooLong` once the prompt cannot fit; `tools`
        (OpenAI's list) are offered to the model through its chat template. Control-token
        text in messages or a raw text stays text unless `parse_special` (see `content_guard`).
        `media`: media markers become IMAGE_SLOT entries, for a picture's tokens."""

    @abstractmethod
    def decoder(self, draft_model: Any = None, on_progress: Callable[[float], bool] | None = None) -> Any:
        """Prepare (load once) the drafter for a draft choice."""

    @abstractmethod
    def stream(self, prompt: Prompt | GenerationRequest, *, cancel: CancelToken | None = None,
               **options: Any) -> Iterator[Event]:
        """Yield `PrefillEvent`, `TokenEvent`, `StepEvent` and finally a `DoneEvent`."""

    @abstractmethod
    def forget_prompts(self) -> None:
        """Empty the decoders' KV caches (not the prompt cache: see `GenerationRequest.prompt_cache`)."""

    @abstractmethod
    def calibration_key(self) -> str:
        """The key this target's measured pass costs persist under."""

    @abstractmethod
    def first_divergence(self, prompt: Sequence[int], reference: Sequence[int], other: Sequence[int]) -> Divergence | None:
        """Where two outputs of this target part, with the target's own margin there."""

    @abstractmethod
    def close(self) -> None:
        """Stop a running generation and free everything; safe from any thread, more than once."""

    def embedding_tokens(self, text: str, *, limit: int | None = None) -> list[int]:
        """An embedding input's tokens (`Engine` has them; other engines refuse)."""
        raise EmbeddingsUnsupported(self.embeddings_refusal())

    def embed(self, inputs: Sequence[Sequence[int]], *, cancel: CancelToken | None = None) -> list[Any]:
        """One normalised mean-pooled vector per token list (`Engine` has them; other engines refuse)."""
        raise EmbeddingsUnsupported(self.embeddings_refusal())

    def embeddings_refusal(self) -> str | None:
        """Why this engine cannot embed, or None when it can."""
        return ("embeddings are not available from a target split over RPC workers (it runs in a child "
                "process): serve it without --rpc to use /v1/embeddings")

    def request(self, prompt: Prompt | GenerationRequest, **options: Any) -> GenerationRequest:
        """A `GenerationRequest` from a prompt and `generate`'s keywords (or one as given)."""
        if isinstance(prompt, GenerationRequest):
            if options:
                raise TandemError(f"pass options inside the GenerationRequest, not beside it: {sorted(options)}")
            return prompt
        try:
            return GenerationRequest.from_options(prompt, **options)
        except TypeError as e:  # an unknown keyword
            raise TandemError(str(e).replace("from_options()", "generate()")) from None

    def generate(self, prompt: Prompt | GenerationRequest, *, cancel: CancelToken | None = None,
                 on_event: Callable[[Event], None] | None = None, **options: Any) -> GenerationResult:
        """Run to completion; returns text, tokens, stats and the token/step events.
        `on_event` sees every event as it happens (the race streams both panes from it).
        The stream is read to its end, not left at its `DoneEvent`: what follows it (the prompt
        cache keeping this prompt's state) would never run in a generator left suspended."""
        toks: list[TokenEvent] = []
        steps: list[StepEvent] = []
        result: GenerationResult | None = None
        for ev in self.stream(prompt, cancel=cancel, **options):
            if on_event is not None:
                on_event(ev)
            if isinstance(ev, TokenEvent):
                toks.append(ev)
            elif isinstance(ev, StepEvent):
                steps.append(ev)
            elif isinstance(ev, DoneEvent):
                result = GenerationResult(ev.text, ev.tokens, ev.stats, toks, steps)
        if result is None:
            raise TandemError("generation ended without a result")  # pragma: no cover
        return result

    def __enter__(self) -> "BaseEngine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
