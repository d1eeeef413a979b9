"""Request bodies of the OpenAI-compatible endpoints, validated with pydantic.

Unknown fields are accepted and ignored (clients send many); fields Tandem cannot honour
(the legacy `functions`) are refused with a message saying so rather than silently dropped.
Pictures come as `image_url` parts (data: URIs; the server fetches nothing): each becomes a
media marker in the message's text and a checked picture beside it. Tools come in OpenAI's shape (`tools`, `tool_choice`, tool messages,
assistant messages with `tool_calls`). Tandem's own extensions: `lookahead`, `draft`, `provenance`,
`parse_special_in_content` (chat), plus llama.cpp's `top_k` and `min_p`.
"""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from ...decoding.sampling.logit_controls import Penalties
from ...decoding.drafting.lookahead import parse_lookahead
from ...documents.images import MEDIA_MARKER, ImageError, ImageInput, image_from_url

DraftChoice = Literal["model", "lookup", "mtp", "suffix", "none"]


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class _Generation(BaseModel):
    """Settings common to chat and text completions."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    max_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=0)
    min_p: float | None = Field(None, ge=0.0, lt=1.0)
    seed: int | None = None
    stop: Union[str, list[str], None] = None
    n: int | None = Field(None, ge=1, le=16)  # choices, generated one after another
    stream: bool = False
    stream_options: StreamOptions | None = None
    logit_bias: dict[str, float] | None = None
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    repeat_penalty: float | None = Field(None, gt=0.0, le=10.0)  # llama.cpp's
    repeat_last_n: int | None = Field(None, ge=1, le=4096)  # llama.cpp's (default 64)
    # Structured output: OpenAI's response_format; llama.cpp's grammar (GBNF) and json_schema
    response_format: Any = None
    grammar: str | None = None
    json_schema: Any = None
    # Tandem's extensions
    lookahead: Union[int, str, None] = None
    draft: DraftChoice | None = None
    provenance: bool = False

    @field_validator("lookahead", mode="before")
    @classmethod
    def _lookahead(cls, v: Any) -> Any:
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise ValueError(f"must be an integer 0..16 or \"auto\", got {v!r}")
        try:
            parse_lookahead(v)  # the engine's own rule, one place
        except ValueError as e:
            raise ValueError(str(e).removeprefix("lookahead ")) from None
        return v.strip().lower() if isinstance(v, str) and v.strip().lower() == "auto" else int(v)

    @field_validator("response_format")
    @classmethod
    def _format(cls, v: Any) -> Any:
        """text, json_object (any JSON object; llama.cpp's optional `schema`) or json_schema."""
        if v is None:
            return None
        if not isinstance(v, dict):
            raise ValueError(f"must be an object with a 'type', got {type(v).__name__}")
        kind = v.get("type")
        if kind not in ("text", "json_object", "json_schema"):
            raise ValueError(f"type must be 'text', 'json_object' or 'json_schema', got {kind!r}")
        if kind == "json_schema":
            spec = v.get("json_schema")
            if not isinstance(spec, dict) or not isinstance(spec.get("schema", {}), dict):
                raise ValueError("json_schema must be an object holding the 'schema' (a JSON schema object)")
        return v

    def constraint(self) -> tuple[str, Any] | None:
        """(what the output must match: "grammar" or "json_schema", its GBNF text or schema), or
        None for free text. Compiling (grammar.py) happens in the engine's request."""
        fmt = self.response_format or {}
        given = [name for name, v in (("grammar", self.grammar), ("json_schema", self.json_schema),
                                      ("response_format", fmt.get("type") not in (None, "text") or None)) if v]
        if len(given) > 1:
            raise ValueError(f"give one of grammar, json_schema and response_format, not {' and '.join(given)}")
        if self.grammar is not None:
            return "grammar", self.grammar
        if self.json_schema is not None:
            return "json_schema", self.json_schema
        if fmt.get("type") == "json_object":
            return "json_schema", fmt.get("schema", {"type": "object"})
        if fmt.get("type") == "json_schema":  # OpenAI: no schema means any JSON value
            return "json_schema", fmt["json_schema"].get("schema", {})
        return None

    @field_validator("logit_bias")
    @classmethod
    def _bias(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        for tok, bias in (v or {}).items():
            if not tok.strip().isdigit():
                raise ValueError(f"keys are token ids (integers as strings), got {tok!r}")
            if not -100.0 <= bias <= 100.0:
                raise ValueError(f"biases are in -100..100, got {bias} for token {tok}")
        return v

    @property
    def token_bias(self) -> dict[int, float] | None:
        return {int(k): float(b) for k, b in self.logit_bias.items()} if self.logit_bias else None

    def penalties(self) -> Penalties | None:
        """The penalties asked for (llama.cpp's meaning, over the last repeat_last_n tokens), or None."""
        p = Penalties(repeat=1.0 if self.repeat_penalty is None else self.repeat_penalty,
                      frequency=self.frequency_penalty or 0.0, presence=self.presence_penalty or 0.0,
                      last_n=self.repeat_last_n or 64)
        return p if p.active else None

    @property
    def stop_list(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else [s for s in self.stop if s]

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class FunctionCall(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    arguments: Union[str, dict[str, Any]] = "{}"


class MessageToolCall(BaseModel):
    """A call in an assistant message of the history (arguments: JSON text, as the API sends)."""

    model_config = ConfigDict(extra="allow")
    id: str = ""
    type: Literal["function"] = "function"
    function: FunctionCall


def schema_type(schema: Any) -> Any:
    """The JSON type a tool's schema describes: its `type`, "object" when it only lists
    `properties` or `required`, "object" for an empty schema (no parameters); what is not a
    schema object is named by its Python type."""
    if not isinstance(schema, dict):
        return type(schema).__name__
    if not schema:
        return "object"
    return schema.get("type", "object" if ("properties" in schema or "required" in schema) else None)


class FunctionDef(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str = Field(min_length=1, max_length=64)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None

    @model_validator(mode="after")
    def _object_parameters(self) -> "FunctionDef":
        """A call's arguments are a JSON object, so its parameters schema must describe one
        (OpenAI refuses any other type too); anything else would lose what the model wrote."""
        p = self.parameters
        if not p:  # omitted or {}: no parameters
            return self
        kind = schema_type(p)
        if kind != "object":
            raise ValueError(f"the parameters of tool {self.name!r} must be a JSON schema of type 'object' "
                             f"(a call's arguments are an object), got type {kind!r}")
        return self


class Tool(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(BaseModel):
    name: str


class NamedToolChoice(BaseModel):
    type: Literal["function"]
    function: NamedFunction


ToolChoice = Union[Literal["none", "auto", "required"], NamedToolChoice]


def split_pictures(content: list[Any]) -> tuple[list[Any], list[ImageInput]]:
    """A message's content parts with each `image_url` part replaced by a text part holding the
    media marker, and the pictures in order; a picture that cannot be taken leaves its refusal
    in its place, for the content's validator to report (so the error names `content`)."""
    parts: list[Any] = []
    images: list[ImageInput] = []
    for j, part in enumerate(content):
        if isinstance(part, dict) and part.get("type") == "image_url":
            url = part.get("image_url")
            try:
                images.append(image_from_url(url.get("url") if isinstance(url, dict) else url, f"content[{j}]"))
                part = {"type": "text", "text": MEDIA_MARKER}
            except ImageError as e:
                part = {"type": _REFUSED, "why": f"part {j} (image_url): {e}"}
        parts.append(part)
    return parts, images


_REFUSED = "tandem.refused_picture"


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[MessageToolCall] | None = None
    tool_call_id: str | None = None
    _images: list[ImageInput] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _pictures(cls, data: Any, handler: Any) -> "ChatMessage":
        """`image_url` parts: a media marker where each was, the picture kept beside the text."""
        images: list[ImageInput] = []
        if isinstance(data, dict) and isinstance(data.get("content"), list):
            parts, images = split_pictures(data["content"])
            data = {**data, "content": parts}
        message = handler(data)
        message._images = images
        return message

    @field_validator("content", mode="before")
    @classmethod
    def _text(cls, v: Any) -> str:
        """A string, null, or a list of text parts (joined); anything else is refused."""
        if v is None or isinstance(v, str):
            return v or ""
        if isinstance(v, list):
            texts = []
            for part in v:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                if kind == _REFUSED:
                    raise ValueError(part["why"])
                if kind != "text" or not isinstance(part.get("text"), str):
                    raise ValueError(f"only text and image_url parts are supported, got a {kind!r} part")
                texts.append(part["text"])
            return "".join(texts)
        raise ValueError(f"must be a string or a list of text parts, got {type(v).__name__}")

    def as_engine_message(self) -> dict[str, Any]:
        """The message the chat template expects ('developer' is 'system'; calls and call ids kept)."""
        out: dict[str, Any] = {"role": "system" if self.role == "developer" else self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [c.model_dump(exclude_none=True) for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        name = (self.model_extra or {}).get("name")
        if isinstance(name, str):
            out["name"] = name
        return out


class ChatCompletionRequest(_Generation):
    messages: list[ChatMessage]
    max_completion_tokens: int | None = Field(None, ge=1)
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    functions: Any = None
    function_call: Any = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    # Tandem's: read control-token text inside messages (`<|im_end|>`) as control tokens, as
    # raw llama.cpp prompts do. Unsafe (message text can forge turns); off, it stays text.
    parse_special_in_content: bool = Field(False, strict=True)

    @model_validator(mode="after")
    def _top_needs_logprobs(self) -> "ChatCompletionRequest":
        if self.top_logprobs is not None and not self.logprobs:
            raise ValueError("top_logprobs needs logprobs: true")
        return self

    @property
    def logprobs_top(self) -> int | None:
        """None: no log-probabilities; n: each token's and its n best alternatives."""
        return (self.top_logprobs or 0) if self.logprobs else None

    @field_validator("messages")
    @classmethod
    def _not_empty(cls, v: list[ChatMessage]) -> list[ChatMessage]:
        if not v:
            raise ValueError("must hold at least one message")
        return v

    @field_validator("functions", "function_call")
    @classmethod
    def _no_functions(cls, v: Any) -> Any:
        if v:
            raise ValueError("the legacy 'functions' and 'function_call' are not supported: send 'tools' and "
                             "'tool_choice'")
        return None

    @model_validator(mode="after")
    def _choice_names_a_tool(self) -> "ChatCompletionRequest":
        choice = self.tool_choice
        if choice in ("required",) or isinstance(choice, NamedToolChoice):
            if not self.tools:
                raise ValueError("tool_choice 'required' or a named function needs tools")
        if isinstance(choice, NamedToolChoice) and choice.function.name not in self.tool_names:
            raise ValueError(f"tool_choice names {choice.function.name!r}, which is not among the tools")
        return self

    @property
    def tool_names(self) -> list[str]:
        return [t.function.name for t in self.tools or []]

    def offered_tools(self) -> list[dict[str, Any]] | None:
        """The tools to offer the model (OpenAI's dicts), or None: none sent, or tool_choice 'none'."""
        if not self.tools or self.tool_choice == "none":
            return None
        return [t.model_dump(exclude_none=True) for t in self.tools]

    @property
    def forced_tool(self) -> str | None:
        """None (the model chooses), '' (tool_choice 'required': any tool) or the named function."""
        if isinstance(self.tool_choice, NamedToolChoice):
            return self.tool_choice.function.name
        return "" if self.tool_choice == "required" else None

    @property
    def token_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    def engine_messages(self) -> list[dict[str, Any]]:
        return [m.as_engine_message() for m in self.messages]

    def images(self) -> tuple[ImageInput, ...]:
        """The pictures of every message, in the order their markers stand in the prompt."""
        return tuple(im for m in self.messages for im in m._images)


MAX_PROMPTS = 64  # choices of one /v1/completions request (prompts x n), generated one after another
_PROMPT_SHAPES = "a string, a list of strings, a list of token ids, or a list of token-id lists"


class CompletionRequest(_Generation):
    """`prompt` in any of OpenAI's four shapes, read into a list of texts and token-id lists
    (one choice each, n each with `n`); `suffix`: fill in between each prompt and it."""

    prompt: list[Union[str, list[int]]]
    echo: bool = False
    suffix: str | None = None
    best_of: int | None = None
    logprobs: int | None = Field(None, ge=0, le=5)  # the text API's: alternatives per token
    # Never read from a body: Ollama's `raw: true` sets it (the client formatted the prompt
    # itself). Otherwise control-token text in a prompt is text, as in chat messages.
    _markup: bool = PrivateAttr(False)

    @property
    def logprobs_top(self) -> int | None:
        return self.logprobs

    @property
    def prompt_is_markup(self) -> bool:
        """Control-token text in the prompt (`<|fim_prefix|>`) is the token it names."""
        return self._markup

    def with_markup(self) -> "CompletionRequest":
        """This request, its prompt's control-token text read as control tokens."""
        self._markup = True
        return self

    @field_validator("prompt", mode="before")
    @classmethod
    def _prompts(cls, v: Any) -> list[Union[str, list[int]]]:
        if isinstance(v, str):
            return [v]
        if isinstance(v, list) and v and all(_is_token(x) for x in v):
            v = [v]
        if not isinstance(v, list) or not v:
            raise ValueError(f"must be {_PROMPT_SHAPES}" + ("" if isinstance(v, list) else f", got {type(v).__name__}"))
        scalars = [x for x in v if isinstance(x, (int, float))]  # bool is an int
        odd = next((x for x in scalars if not (_is_token(x) and x >= 0)), scalars[0] if scalars else None)
        if odd is not None:  # a token-id list with something else in it
            raise ValueError(f"{odd!r} is not a token id (a token-id prompt holds only integers >= 0)")
        for i, x in enumerate(v):
            if isinstance(x, list):
                if not x:
                    raise ValueError(f"prompt {i} is an empty token list")
                bad = next((t for t in x if not _is_token(t) or t < 0), None)
                if bad is not None:
                    raise ValueError(f"prompt {i}: {bad!r} is not a token id (a token-id prompt holds only integers >= 0)")
            elif not isinstance(x, str):
                raise ValueError(f"prompt {i} is {type(x).__name__}; a prompt is {_PROMPT_SHAPES}")
        return v

    @model_validator(mode="after")
    def _not_too_many(self) -> "CompletionRequest":
        if len(self.prompt) * (self.n or 1) > MAX_PROMPTS:
            raise ValueError(f"{len(self.prompt)} prompts x n={self.n or 1} is more than {MAX_PROMPTS} choices "
                             "per request: split the request")
        return self

    @field_validator("echo")
    @classmethod
    def _no_echo(cls, v: bool) -> bool:
        if v:
            raise ValueError("echo is not supported by this server")
        return v

    @field_validator("best_of")
    @classmethod
    def _no_best_of(cls, v: int | None) -> int | None:
        if v not in (None, 1):
            raise ValueError(f"only best_of=1 is supported, got {v}")
        return v

    @property
    def token_limit(self) -> int | None:
        return self.max_tokens


MAX_EMBEDDING_INPUTS = 2048  # OpenAI's limit on inputs per request
_INPUT_SHAPES = "a string, a list of strings, a list of token ids, or a list of token-id lists"


def _is_token(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _token_list(v: list[Any], where: str) -> list[int]:
    if not v:
        raise ValueError(f"{where} is an empty token list: nothing to embed")
    bad = next((x for x in v if not _is_token(x) or x < 0), None)
    if bad is not None:
        raise ValueError(f"{where}: {bad!r} is not a token id (a list of token ids holds only integers >= 0)")
    return v


class EmbeddingRequest(BaseModel):
    """`POST /v1/embeddings`: `input` in any of OpenAI's four shapes, read into a list of
    texts and token-id lists (one embedding each)."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    input: list[Union[str, list[int]]]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(None, ge=1)
    user: str | None = None

    @field_validator("input", mode="before")
    @classmethod
    def _inputs(cls, v: Any) -> list[Union[str, list[int]]]:
        if isinstance(v, str):
            v = [v]
        elif isinstance(v, list) and v and all(_is_token(x) for x in v):
            v = [v]
        if not isinstance(v, list):
            raise ValueError(f"must be {_INPUT_SHAPES}")
        if not v:
            raise ValueError("is an empty list: nothing to embed")
        if len(v) > MAX_EMBEDDING_INPUTS:
            raise ValueError(f"has {len(v)} inputs; at most {MAX_EMBEDDING_INPUTS} per request")
        out: list[Union[str, list[int]]] = []
        for i, x in enumerate(v):
            if isinstance(x, str):
                if not x:
                    raise ValueError(f"input {i} is an empty string: nothing to embed")
                out.append(x)
            elif isinstance(x, list):
                out.append(_token_list(x, f"input {i}"))
            else:
                raise ValueError(f"input {i} is {type(x).__name__}; input must be {_INPUT_SHAPES}")
        return out
