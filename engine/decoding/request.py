"""What one generation asks for: the one request type, built at each edge and passed down.

`GenerationRequest` carries everything a generation needs (prompt, drafter choice,
lookahead policy, sampling, limits). The CLI, the app's views, the benchmark and the server
build one and hand it down as is, to `Engine.stream` and on to `Decoder.run`. How models
are run is `runtime.RuntimeParams`. `engine.generate(prompt, draft_model=..., lookahead=...)`
stays the public convenience: it builds a request with `GenerationRequest.from_options`.
"""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence, Union

from ..documents.images import IMAGE_SLOT, ImageInput, check_images
from ..errors import PromptError, TandemError
from .sampling.logit_controls import Penalties, RowProcessors, check_logit_bias
from .drafting.choice import DraftSpec
from .drafting.lookahead import MAX_LOOKAHEAD, LiveLookahead, Lookahead, parse_lookahead
from .sampling.sampler import GREEDY, SamplingParams

if TYPE_CHECKING:  # pragma: no cover
    from .prompting.chat import Message

Prompt = Union[str, Sequence["Message"], Sequence[int]]


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

    `lookahead` may be given as an int 0..16, "auto", a `Lookahead` policy, or a
    `LiveLookahead` handle that another thread changes while the generation runs (the app's
    slider); it is parsed once, here, into a policy object (or kept as the live handle).
    """

    prompt: Prompt
    draft: DraftSpec = None
    lookahead: Any = 5  # after __post_init__: a Lookahead policy or a LiveLookahead
    max_tokens: int = 512
    sampling: SamplingParams = GREEDY
    stop: tuple[str, ...] = ()
    chat: bool = False
    system: str | None = None
    tag: str | None = None  # the task label in the metrics log
    # What changes the target's scores (and so the distribution verified against): see logit_controls
    logit_bias: Mapping[int, float] | None = None  # token id -> added to its logit (-100..100)
    penalties: Penalties | None = None  # repeat / frequency / presence, as llama.cpp applies them
    logprobs: int | None = None  # None: off; n >= 0: each token's log-probability and the n best alternatives
    # The constraint: GBNF grammar text, root rule `root` (see grammar.py); None: free text.
    # `json_schema` (a dict, or its JSON text) is compiled into `grammar` here, once.
    grammar: str | None = None
    json_schema: InitVar[Any] = None
    # True: control-token text inside chat messages (`<|im_end|>`) becomes control tokens, as
    # it once did; it lets message text end its turn and forge others. Off: it stays text.
    parse_special: bool = False
    # With `grammar`: regular expressions over the answer's bytes; the grammar applies only from
    # the first one written on (its first group's start), the answer is free before (lazy_grammar.py)
    grammar_triggers: tuple[str, ...] = ()
    # False: neither restore from nor add to the engine's prompt cache (prompt_cache.py): the race
    # and the bench time whole prompt reads, as a new conversation's first request pays them
    prompt_cache: bool = True
    # Pictures for a target with a projector, in the order of the prompt's media markers
    # (documents.images.MEDIA_MARKER; none: before the text of the last user message). Bytes or
    # ImageInput; checked here by size and format, decoded (pixel limit) when the engine reads them.
    images: tuple[ImageInput, ...] = ()
    # True when the policy was parsed here from an int or "auto": each run then gets a
    # fresh copy (Auto keeps per-run probe state); a policy object given is used as is.
    _parsed: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self, json_schema: Any = None) -> None:
        self.prompt = check_prompt(self.prompt)
        if not isinstance(self.max_tokens, int) or isinstance(self.max_tokens, bool) or self.max_tokens < 1:
            raise TandemError(f"max_tokens must be an integer >= 1, got {self.max_tokens!r}")
        if not isinstance(self.lookahead, (LiveLookahead, Lookahead)):
            try:
                self.lookahead = parse_lookahead(self.lookahead)
            except (TypeError, ValueError) as e:
                raise TandemError(str(e)) from None
            self._parsed = True
        self.stop = _stop_strings(self.stop)
        self.images = check_images(self.images)
        if self.images and not isinstance(self.prompt, str) and not _is_messages(self.prompt) \
                and self.prompt.count(IMAGE_SLOT) != len(self.images):  # type: ignore[union-attr]
            raise PromptError("images go with a text prompt, chat messages, or token ids with an "
                              "IMAGE_SLOT (-1) for each")
        if not isinstance(self.sampling, SamplingParams):
            raise TandemError(f"sampling must be an engine.SamplingParams, got {type(self.sampling).__name__}")
        self.logit_bias = check_logit_bias(self.logit_bias) or None
        if self.penalties is not None and not isinstance(self.penalties, Penalties):
            raise TandemError("penalties must be an engine.decoding.sampling.logit_controls.Penalties")
        if self.logprobs is not None and (isinstance(self.logprobs, bool) or not isinstance(self.logprobs, int)
                                          or not 0 <= self.logprobs <= 20):
            raise TandemError(f"logprobs must be an integer 0..20 (alternatives per token) or None, got {self.logprobs!r}")
        if json_schema is not None or self.grammar is not None:
            from .sampling.grammar import check_grammar, json_schema_grammar  # lazily: it loads llama.cpp
        if json_schema is not None:
            if self.grammar is not None:
                raise TandemError("give grammar or json_schema, not both")
            self.grammar = json_schema_grammar(json_schema)
        elif self.grammar is not None:
            self.grammar = check_grammar(self.grammar)
        if self.grammar_triggers:
            from .sampling.lazy_grammar import check_triggers

            if self.grammar is None:
                raise TandemError("grammar_triggers need a grammar to start")
            self.grammar_triggers = check_triggers(self.grammar_triggers)
        for name in ("chat", "parse_special"):
            if not isinstance(getattr(self, name), bool):
                raise TandemError(f"{name} must be True or False, got {getattr(self, name)!r}"[:200])
        for name in ("system", "tag"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TandemError(f"{name} must be a string or None, got {type(value).__name__}")

    def row_processors(self) -> RowProcessors:
        """What the decoder applies to this request's logits rows (empty: nothing to change)."""
        return RowProcessors.for_request(self.logit_bias, self.penalties)

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
        logit_bias: Mapping[int, float] | None = None,
        penalties: Penalties | None = None,
        logprobs: int | None = None,
        grammar: str | None = None,
        json_schema: Any = None,
        parse_special: bool = False,
        grammar_triggers: Sequence[str] = (),
        prompt_cache: bool = True,
        images: Sequence[Any] = (),
    ) -> "GenerationRequest":
        """The keyword form of `engine.generate` / `Engine.stream`."""
        sampling = SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, seed=seed)
        return cls(prompt, draft_model, lookahead, max_tokens, sampling, stop, chat, system, tag,  # type: ignore[arg-type]
                   logit_bias=logit_bias, penalties=penalties, logprobs=logprobs, grammar=grammar,
                   json_schema=json_schema, parse_special=parse_special, grammar_triggers=tuple(grammar_triggers),
                   prompt_cache=bool(prompt_cache), images=tuple(images or ()))

    def live_lookahead(self) -> LiveLookahead:
        """The handle the decoder reads each step: the one given, or a new one around this
        request's policy (a fresh copy of a policy parsed here, so runs do not share state)."""
        if isinstance(self.lookahead, LiveLookahead):
            return self.lookahead
        return LiveLookahead(self.lookahead.fresh() if self._parsed else self.lookahead)

    def with_(self, **changes: Any) -> "GenerationRequest":
        """A copy with some fields changed (the race runs one request twice)."""
        copy = replace(self, **changes)
        if "lookahead" not in changes:
            copy._parsed = self._parsed
        return copy


def _is_messages(prompt: Any) -> bool:
    return isinstance(prompt, list) and bool(prompt) and all(isinstance(m, dict) for m in prompt)


def _stop_strings(stop: Any) -> tuple[str, ...]:
    """`stop` as a tuple of strings, or a TandemError naming `stop` (not Python's 'int is not iterable')."""
    if stop is None:
        return ()
    if isinstance(stop, str):
        return (stop,)
    if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) for s in stop):
        shown = type(stop).__name__ if not isinstance(stop, (list, tuple)) else "a list holding " + ", ".join(
            sorted({type(s).__name__ for s in stop if not isinstance(s, str)}))
        raise TandemError(f"stop must be a string or a list of strings, got {shown}")
    return tuple(stop)


__all__ = ["GenerationRequest", "check_prompt", "DraftSpec", "Prompt", "MAX_LOOKAHEAD", "Lookahead"]
