"""Other APIs answered through the chat-completions path.

The Responses, Ollama and Anthropic endpoints each translate their request into a
`ChatCompletionRequest` (or a `CompletionRequest`) and hand it to `Completions.generate`,
which runs it exactly as it runs `/v1/chat/completions`: the same checks, queue place,
prompt rendering, tool offer and parsing, grammar, speculation and cancellation. Nothing
about generating is repeated here. What comes back is read as plain data: the OpenAI body
of a whole answer, or the OpenAI stream read as neutral events (`Text`, `CallStart`,
`CallArgs`, then `End` or `Failed`) that each API writes in its own wire format.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any, AsyncIterator, Union

from fastapi import Request
from pydantic import BaseModel, ValidationError

from . import json_body
from .errors import ApiError, validation_message
from .generation import Completions
from .schemas import ChatCompletionRequest, CompletionRequest, StreamOptions
from .tool_use import ToolUse

OpenAIRequest = Union[ChatCompletionRequest, CompletionRequest]
EXTENSIONS = ("draft", "lookahead", "provenance")  # Tandem's own fields, accepted by every API


@dataclass
class Text:
    """A piece of the answer's text (with its tokens' provenance when the request asked)."""

    text: str
    provenance: list[dict[str, Any]] | None = None


@dataclass
class CallStart:
    """A tool call begins: its position among the answer's calls, id and function name."""

    index: int
    id: str
    name: str


@dataclass
class CallArgs:
    """A piece of a tool call's arguments (JSON text)."""

    index: int
    text: str


@dataclass
class End:
    """The answer is complete: OpenAI's finish reason ('stop', 'length', 'tool_calls'),
    usage and timings (Tandem's speculation figures)."""

    finish: str
    usage: dict[str, Any]
    timings: dict[str, Any]
    provenance: list[dict[str, Any]] | None = None  # tokens that wrote no text (a call's closing tag)


@dataclass
class Failed:
    """The generation failed or was cut short after the stream began: OpenAI's error fields."""

    message: str
    type: str = "server_error"
    code: str | None = None


Event = Union[Text, CallStart, CallArgs, End, Failed]


async def read_body(request: Request) -> dict[str, Any]:
    """The request's JSON object (read by `json_body`, the depth limit included), or a 400 saying
    what is wrong with it."""
    try:
        return json_body.parse_object(await request.body())
    except json_body.BodyError as e:
        raise ApiError(400, str(e))


def validate(model: type[BaseModel], data: Any) -> Any:
    """`model` read from `data`, or a 400 naming the first offending field."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        message, param = validation_message(e.errors()[0])
        raise ApiError(400, message, param=param, code="invalid_value")


def extensions(source: dict[str, Any]) -> dict[str, Any]:
    """Tandem's speculation fields present in `source` (draft, lookahead, provenance)."""
    return {k: source[k] for k in EXTENSIONS if source.get(k) is not None}


def now_iso() -> str:
    """The current UTC time as RFC 3339 with nanosecond-style precision, as Ollama writes it."""
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int((t % 1) * 1e9):09d}Z"


@dataclass
class Answer:
    """A whole answer read from an OpenAI body."""

    text: str
    calls: list[dict[str, Any]]  # {"id", "name", "arguments"} (arguments: JSON text)
    finish: str
    usage: dict[str, Any]
    timings: dict[str, Any]
    provenance: list[dict[str, Any]] | None = None

    @property
    def stopped_by(self) -> str:
        return str(self.timings.get("stopped_by", ""))


class Via:
    """Runs translated requests on one served engine's `Completions` (the chat endpoint's path)."""

    def __init__(self, completions: Completions):
        self.completions = completions

    @property
    def served(self) -> Any:
        return self.completions.served

    def check_model(self, name: str | None) -> None:
        self.completions.check_model(name)

    async def answer(self, request: Request, req: OpenAIRequest) -> Answer:
        """The whole answer of a non-streaming request (ApiError on any failure)."""
        resp = await self.completions.generate(request, req, _kind(req))
        body = json.loads(resp.body)
        choice = body["choices"][0]
        message = choice.get("message")
        text = (message.get("content") or "") if message is not None else choice.get("text", "")
        calls = [{"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                 for c in (message or {}).get("tool_calls") or []]
        return Answer(text, calls, choice["finish_reason"], body["usage"], body.get("timings", {}),
                      choice.get("provenance"))

    async def count(self, req: ChatCompletionRequest) -> int:
        """The prompt tokens of a chat request as it would be rendered (with its tools), counted
        in a place of the queue's limit as `generate` counts them."""
        c = self.completions
        tools = ToolUse(req, c.eng.target.chat_template)
        job = c.admit("count_tokens", uuid.uuid4().hex[:24])
        try:
            return len(await c.prompt_tokens(req.engine_messages(), True, tools.tools, req.parse_special_in_content))
        finally:
            c.queue.finish(job)

    async def stream(self, request: Request, req: OpenAIRequest) -> AsyncIterator[Event]:
        """Start a streaming request (ApiError here if it is refused before it starts) and
        return its events; closing the iterator early cancels the generation."""
        req.stream = True
        req.stream_options = StreamOptions(include_usage=True)  # the usage chunk ends every stream
        resp = await self.completions.generate(request, req, _kind(req))
        return _events(resp.body_iterator)


def _kind(req: OpenAIRequest) -> str:
    return "chat" if isinstance(req, ChatCompletionRequest) else "text"


async def _events(chunks: Any) -> AsyncIterator[Event]:
    """The OpenAI stream (`{"data": json}` items) read as neutral events."""
    finish: str | None = None
    timings: dict[str, Any] = {}
    usage: dict[str, Any] = {}
    tail: list[dict[str, Any]] | None = None
    try:
        async for item in chunks:
            data = item["data"]
            if data == "[DONE]":
                break
            obj = json.loads(data)
            if "error" in obj:
                err = obj["error"]
                yield Failed(err.get("message", "the generation failed"), err.get("type", "server_error"), err.get("code"))
                return
            if not obj.get("choices"):  # the usage chunk
                usage, timings = obj.get("usage", usage), obj.get("timings", timings)
                continue
            choice = obj["choices"][0]
            prov = choice.get("provenance")
            delta = choice.get("delta")
            text = delta.get("content") if delta is not None else choice.get("text")
            if text:
                yield Text(text, prov)
                prov = None
            for tc in (delta or {}).get("tool_calls") or []:
                fn = tc.get("function") or {}
                if tc.get("id"):
                    yield CallStart(tc["index"], tc["id"], fn.get("name", ""))
                if fn.get("arguments"):
                    yield CallArgs(tc["index"], fn["arguments"])
            if choice.get("finish_reason"):
                finish, timings, tail = choice["finish_reason"], obj.get("timings", timings), prov
        if finish is None:
            yield Failed("the generation was cancelled before it finished (the server is stopping)", code="cancelled")
            return
        yield End(finish, usage, timings, tail)
    finally:
        await chunks.aclose()  # a client that went away stops its generation at the next step
