"""`POST /v1/messages`: Anthropic's Messages API over the chat-completions path.

`system` (a string or text blocks), messages of content blocks (text, tool_use,
tool_result), custom `tools` (`input_schema`) and `tool_choice` (auto, any, tool, none),
`stop_sequences`, `max_tokens` (required, as Anthropic's), sampling (temperature, top_p,
top_k), `output_config.format` (a JSON schema the answer must match), and streams with
Anthropic's events (message_start, content_block_start / _delta (text_delta,
input_json_delta) / _stop, message_delta with the stop reason, message_stop). The key may
come as `x-api-key` or as a Bearer token; `anthropic-version` is accepted whatever it says.
Errors have Anthropic's shape; `/v1/messages/count_tokens` counts a request's prompt. Tandem's speculation fields (`draft`, `lookahead`,
`provenance`) are accepted; bodies carry `timings`.
"""

from __future__ import annotations

import hmac
import json
import uuid
from typing import Any, Callable, Union

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse

from ..answer import SHUTDOWN_GRACE_S, AnswerCore, CallArgs, CallStart, End, Failed, Text
from ..error_shapes import anthropic_error
from ..errors import ApiError
from ..schemas import ChatCompletionRequest, schema_type
from ..wire import dumps, provenance_items, timings, usage
from .library import FolderAnswers, asked_sources
from .translate import content_of, data_uri, extensions, image_part, provenance, read_body, validate

CHAT_NAMES = {  # the chat request's fields as this API names them, for errors met after translation
    "response_format": "output_config.format.schema", "stop": "stop_sequences",
    "tools[i].function.parameters": "tools[i].input_schema", "tools[i].function": "tools[i]"}


class AnthropicRequest(BaseModel):
    """The fields of a Messages request Tandem reads (others, such as metadata, are ignored)."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    max_tokens: int = Field(ge=1)
    messages: list[dict[str, Any]] = Field(min_length=1)
    system: Union[str, list[dict[str, Any]], None] = None
    stop_sequences: list[str] | None = None
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=0)
    tools: list[dict[str, Any]] | None = None
    tool_choice: dict[str, Any] | None = None
    output_config: dict[str, Any] | None = None  # its `format`: structured output (a JSON schema)
    stream: bool = False

    def response_format(self) -> dict[str, Any] | None:
        """`output_config.format` ({"type": "json_schema", "schema": ...}) as the chat API's."""
        fmt = (self.output_config or {}).get("format")
        if not fmt:
            return None
        if not isinstance(fmt, dict) or fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
            raise _bad("output_config.format", "must be {\"type\": \"json_schema\", \"schema\": {...}}")
        return {"type": "json_schema", "json_schema": {"name": "output", "schema": fmt["schema"]}}


def _bad(where: str, message: str) -> ApiError:
    return ApiError(400, f"{where}: {message}", param=where, code="invalid_value")


def _blocks_text(content: Any, where: str) -> str:
    """Text blocks (or a string) as one text; other blocks are refused."""
    if isinstance(content, str) or content is None:
        return content or ""
    if not isinstance(content, list):
        raise _bad(where, "must be a string or a list of content blocks")
    out = []
    for j, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else type(block).__name__
        if kind != "text":
            raise _bad(f"{where}[{j}]", f"only text blocks are supported here, got a {kind!r} block")
        out.append(_text(block, f"{where}[{j}]"))
    return "\n".join(out)


def _text(block: dict[str, Any], where: str) -> str:
    """A text block's text (one without a 'text' string is malformed, not unsupported)."""
    text = block.get("text")
    if not isinstance(text, str):
        got = "none" if text is None else type(text).__name__
        raise _bad(f"{where}.text", f"a text block needs a 'text' string, got {got}")
    return text


def _image_url(block: dict[str, Any], where: str) -> Any:
    """An image block's picture as a URL: base64 sources as data: URIs (url sources are refused
    as the chat API refuses them: the server fetches nothing)."""
    source = block.get("source")
    kind = source.get("type") if isinstance(source, dict) else None
    if kind == "base64" and isinstance(source.get("data"), str):
        return data_uri(source.get("media_type"), source["data"])
    if kind == "url":
        return source.get("url")
    raise _bad(f"{where}.source", "an image block needs a base64 source {\"type\": \"base64\", \"media_type\", \"data\"}")


def to_messages(req: AnthropicRequest) -> list[dict[str, Any]]:
    """The chat messages: the system text first, a tool_use block as an assistant message's
    tool call, a tool_result block as a `tool` message naming the call (before the user's text)."""
    messages: list[dict[str, Any]] = []
    if req.system:
        messages.append({"role": "system", "content": _blocks_text(req.system, "system")})
    names: dict[str, str] = {}
    for i, m in enumerate(req.messages):
        where = f"messages[{i}]"
        role = m.get("role")
        if role not in ("user", "assistant"):
            raise _bad(f"{where}.role", f"must be 'user' or 'assistant', got {role!r}")
        content = m.get("content")
        if isinstance(content, str):
            messages.append({"role": role, "content": content})
            continue
        if not isinstance(content, list):
            raise _bad(f"{where}.content", "must be a string or a list of content blocks")
        texts, calls, results = [], [], []
        for j, block in enumerate(content):
            at = f"{where}.content[{j}]"
            kind = block.get("type") if isinstance(block, dict) else type(block).__name__
            if kind == "text":
                texts.append(_text(block, at))
            elif kind == "image" and role == "user":
                texts.append(image_part(_image_url(block, at), f"{at}.source"))
            elif kind == "tool_use" and role == "assistant":
                if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                    raise _bad(at, "a tool_use block needs 'id' and 'name'")
                names[block["id"]] = block["name"]
                calls.append({"id": block["id"], "type": "function", "function": {
                    "name": block["name"], "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False)}})
            elif kind == "tool_result" and role == "user":
                call_id = block.get("tool_use_id")
                if not isinstance(call_id, str):
                    raise _bad(at, "a tool_result block needs 'tool_use_id'")
                text = _blocks_text(block.get("content"), f"{at}.content")
                if block.get("is_error"):
                    text = f"Error: {text}"
                msg = {"role": "tool", "tool_call_id": call_id, "content": text}
                if call_id in names:
                    msg["name"] = names[call_id]
                results.append(msg)
            elif kind in ("thinking", "redacted_thinking") and role == "assistant":
                continue  # earlier reasoning: nothing this model can render
            else:
                raise _bad(at, f"{kind!r} blocks are not supported in {role} messages (text, tool_use in assistant "
                               "messages, image and tool_result in user messages)")
        messages.extend(results)
        if texts or calls or not results:
            msg = {"role": role, "content": content_of(texts, "\n")}
            if calls:
                msg["tool_calls"] = calls
            messages.append(msg)
    return messages


def chat_tools(req: AnthropicRequest) -> dict[str, Any]:
    """`tools` and `tool_choice` in the chat API's shape (custom tools only)."""
    out: dict[str, Any] = {}
    if req.tools:
        tools = []
        for i, t in enumerate(req.tools):
            if t.get("type") not in (None, "custom") or "input_schema" not in t:
                raise _bad(f"tools[{i}]", f"only custom tools (name, input_schema) are served here, got "
                                          f"{t.get('type') or 'a tool without input_schema'!r}")
            kind = schema_type(t["input_schema"])
            if kind != "object":
                raise _bad(f"tools[{i}].input_schema", "must be a JSON schema of type 'object' (a tool's input is an "
                                                       f"object), got {kind!r}")
            fn = {"name": t.get("name"), "parameters": t["input_schema"]}
            if t.get("description"):
                fn["description"] = t["description"]
            tools.append({"type": "function", "function": fn})
        out["tools"] = tools
    choice = req.tool_choice
    if choice:
        kind = choice.get("type")
        if kind not in ("auto", "any", "tool", "none"):
            raise _bad("tool_choice", f"type must be 'auto', 'any', 'tool' or 'none', got {kind!r}")
        out["tool_choice"] = ({"type": "function", "function": {"name": choice.get("name")}} if kind == "tool"
                              else {"any": "required"}.get(kind, kind))
        if choice.get("disable_parallel_tool_use"):
            out["parallel_tool_calls"] = False
    return out


def stop_reason(finish: str, stopped_by: str) -> str:
    if finish == "tool_calls":
        return "tool_use"
    if finish == "length":
        return "max_tokens"
    return "stop_sequence" if stopped_by == "stop_string" else "end_turn"


def matched_stop(reason: str, stops: list[str] | None) -> str | None:
    """The stop sequence that ended the answer: known when the request gave exactly one."""
    return stops[0] if reason == "stop_sequence" and stops and len(stops) == 1 else None


def anthropic_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """Anthropic's counts: `input_tokens` are the prompt tokens read now, the rest came from
    the cache (`cache_read_input_tokens`), as Anthropic splits them."""
    cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
    return {"input_tokens": usage.get("prompt_tokens", 0) - cached, "output_tokens": usage.get("completion_tokens", 0),
            "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0}


def tool_input(arguments: str) -> Any:
    try:
        return json.loads(arguments or "{}")
    except ValueError:  # a forced call cut short by max_tokens: its text as written
        return {"_partial_arguments": arguments}


class Messages:
    """The Messages endpoint of one served engine (and the served folder, when there is one)."""

    def __init__(self, core: AnswerCore, library: FolderAnswers | None = None):
        self.core, self.library = core, library

    def chat_request(self, req: AnthropicRequest, raw: dict[str, Any]) -> ChatCompletionRequest:
        tools, output = chat_tools(req), req.response_format()
        if output is not None and tools.get("tool_choice") not in (None, "auto", "none"):
            raise _bad("tool_choice", "a forced tool call (type 'any' or 'tool') cannot be combined with "
                                      "output_config.format: give one")
        fields = {"model": req.model, "messages": to_messages(req), "max_tokens": req.max_tokens,
                  "temperature": req.temperature, "top_p": req.top_p, "top_k": req.top_k,
                  "stop": req.stop_sequences, "response_format": output, **tools,
                  **{k: raw[k] for k in ("min_p", "seed") if k in raw}, **extensions(raw)}
        return validate(ChatCompletionRequest, {k: v for k, v in fields.items() if v is not None})

    async def create(self, request: Request) -> Any:
        raw = await read_body(request)
        req = validate(AnthropicRequest, raw)
        self.core.check_model(req.model)
        chat = self.chat_request(req, raw)
        mid = "msg_" + uuid.uuid4().hex[:24]
        model = req.model or self.core.served.id
        sources = await asked_sources(self.library, self.core, chat)
        answering = await self.core.begin(chat)
        if req.stream:  # message_start tells the prompt's size, as Anthropic's does
            events = answering.choice(0).events()
            return EventSourceResponse(self.sse(events, chat, mid, model, req.stop_sequences,
                                                answering.prompt_sizes[0], sources), sep="\n",
                                       shutdown_grace_period=SHUTDOWN_GRACE_S)
        a = await answering.choice(0).whole(request)
        text = a.content or ""
        reason = stop_reason(a.finish, a.outcome.stats.stopped_by)
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text or not a.calls else []
        content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": tool_input(c.arguments)}
                    for c in a.calls]
        body = {"id": mid, "type": "message", "role": "assistant", "model": model, "content": content,
                "stop_reason": reason, "stop_sequence": matched_stop(reason, req.stop_sequences),
                "usage": anthropic_usage(usage(a.outcome)), "timings": timings(a.outcome)}
        if chat.provenance:
            body["provenance"] = provenance_items(a.tokens)
        if sources is not None:
            body["sources"] = sources
        return body

    async def count_tokens(self, request: Request) -> dict[str, Any]:
        """`/v1/messages/count_tokens`: the prompt's tokens as the request would be rendered."""
        raw = await read_body(request)
        req = validate(AnthropicRequest, {"max_tokens": 1, **raw})  # no answer: no limit needed
        self.core.check_model(req.model)
        return {"input_tokens": await self.core.count(self.chat_request(req, raw))}

    async def sse(self, events: Any, chat: ChatCompletionRequest, mid: str, model: str, stops: list[str] | None,
                  n_prompt: int = 0, sources: list[dict[str, Any]] | None = None):
        """Anthropic's events; `message_start` counts the whole prompt as input, and
        `message_delta` splits it into what was read and what came from the cache (and carries
        the folder's sources, when the request asked the folder)."""

        def event(kind: str, **fields: Any) -> dict[str, str]:
            return {"event": kind, "data": dumps({"type": kind, **fields})}

        yield event("message_start", message={
            "id": mid, "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": None,
            "stop_sequence": None, "usage": {"input_tokens": n_prompt, "output_tokens": 0}})
        # One block is open at a time, as Anthropic's spec has it: each ends (content_block_stop)
        # before the next starts. The chat stream writes a call's pieces before anything after it.
        n_blocks = 0
        open_block: tuple[int, Any] | None = None  # (its index, "text" or the call's index)

        def close() -> list[dict[str, str]]:
            nonlocal open_block
            done, open_block = open_block, None
            return [event("content_block_stop", index=done[0])] if done is not None else []

        def start(key: Any, block: dict[str, Any]) -> list[dict[str, str]]:
            nonlocal open_block, n_blocks
            out = close()
            open_block, n_blocks = (n_blocks, key), n_blocks + 1
            return out + [event("content_block_start", index=open_block[0], content_block=block)]

        try:
            async for ev in events:
                if isinstance(ev, Text):
                    if open_block is None or open_block[1] != "text":
                        for e in start("text", {"type": "text", "text": ""}):
                            yield e
                    prov = provenance(chat, ev.tokens)
                    extra = {"provenance": prov} if prov is not None else {}
                    yield event("content_block_delta", index=open_block[0],
                                delta={"type": "text_delta", "text": ev.text}, **extra)
                elif isinstance(ev, CallStart):
                    for e in start(ev.index, {"type": "tool_use", "id": ev.id, "name": ev.name, "input": {}}):
                        yield e
                elif isinstance(ev, CallArgs) and open_block is not None and open_block[1] == ev.index:
                    yield event("content_block_delta", index=open_block[0],
                                delta={"type": "input_json_delta", "partial_json": ev.text})
                elif isinstance(ev, End):
                    for e in close():
                        yield e
                    reason = stop_reason(ev.finish, ev.outcome.stats.stopped_by)
                    yield event("message_delta", delta={"stop_reason": reason, "stop_sequence": matched_stop(reason, stops)},
                                usage=anthropic_usage(usage(ev.outcome)), timings=timings(ev.outcome),
                                **({"sources": sources} if sources is not None else {}))
                    yield event("message_stop")
                elif isinstance(ev, Failed):
                    yield event("error", error=anthropic_error(failed_status(ev), ev.message)["error"])
        finally:
            await events.aclose()  # a client gone: its generation stops


def failed_status(ev: Failed) -> int:
    """The status an error after the stream began stands for: the request's fault (400), the
    server stopping (503: overloaded_error, worth a retry) or the server's trouble (500)."""
    if ev.type == "invalid_request_error":
        return 400
    return 503 if ev.code in ("server_shutdown", "cancelled") else 500


def key_check(config: Any) -> Callable[[Request], Any]:
    """The API key as `x-api-key` (Anthropic's header) or a Bearer token; 401 (in Anthropic's
    shape, as every error on these paths: `error_shapes`)."""

    async def check(request: Request) -> None:
        key = config.api_key
        if not key:
            return
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        given = request.headers.get("x-api-key") or (token.strip() if scheme.lower() == "bearer" else "")
        if not hmac.compare_digest(given.encode(), key.encode()):
            raise ApiError(401, "missing or incorrect API key: send the header 'x-api-key: KEY' "
                                "(or 'Authorization: Bearer KEY')", code="invalid_api_key")

    return check


def anthropic_router(messages: Messages, config: Any) -> APIRouter:
    """The Messages endpoints; errors name this API's fields (`CHAT_NAMES`) in its shape (`error_shapes`)."""
    router = APIRouter(dependencies=[Depends(key_check(config))])

    @router.post("/v1/messages")
    async def create_message(request: Request) -> Any:
        try:
            return await messages.create(request)
        except ApiError as e:
            raise e.renamed(CHAT_NAMES)

    @router.post("/v1/messages/count_tokens")
    async def count_tokens(request: Request) -> Any:
        try:
            return await messages.count_tokens(request)
        except ApiError as e:
            raise e.renamed(CHAT_NAMES)

    return router
