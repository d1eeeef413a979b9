"""`POST /v1/responses`: OpenAI's Responses API over the chat-completions path.

`input` (a text, or items: messages with text parts, `function_call` and
`function_call_output`), `instructions`, function `tools` and `tool_choice`,
`max_output_tokens`, sampling, `text.format` (structured output), and `previous_response_id`:
the server keeps the last `MAX_STORED` stored responses in memory (the oldest is forgotten
first; all are forgotten on restart), so a conversation can continue by id. Streams send the
documented events, `response.created` ... `response.completed`. Tandem's speculation fields
(`draft`, `lookahead`, `provenance`) are accepted; bodies carry `timings`.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from typing import Any, Callable, Literal, Union

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse

from ..answer import SHUTDOWN_GRACE_S, AnswerCore, CallArgs, CallStart, End, Failed, Text, Whole
from ..errors import ApiError
from ..schemas import ChatCompletionRequest
from ..wire import dumps, provenance_items, timings, usage
from .library import FolderAnswers, asked_sources
from .translate import content_of, extensions, image_part, provenance, read_body, validate

MAX_STORED = 256  # responses kept for previous_response_id (and GET), oldest forgotten first
CHAT_NAMES = {"response_format": "text.format.schema", "max_tokens": "max_output_tokens"}  # errors after translation


class ResponsesRequest(BaseModel):
    """The fields of a Responses request Tandem reads (others are accepted and ignored)."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    input: Union[str, list[dict[str, Any]]]
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: Union[Literal["none", "auto", "required"], dict[str, Any], None] = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    stream: bool = False
    previous_response_id: str | None = None
    store: bool = True
    text: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None


class ResponseStore:
    """The last `limit` responses by id: their body and the conversation they end."""

    def __init__(self, limit: int = MAX_STORED):
        self.limit = limit
        self._items: OrderedDict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, body: dict[str, Any], conversation: list[dict[str, Any]]) -> None:
        with self._lock:
            self._items[body["id"]] = (body, conversation)
            while len(self._items) > self.limit:
                self._items.popitem(last=False)

    def get(self, rid: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        with self._lock:
            return self._items.get(rid)

    def delete(self, rid: str) -> bool:
        with self._lock:
            return self._items.pop(rid, None) is not None


def not_found(rid: str, param: str | None = None) -> ApiError:
    return ApiError(404, f"no response with id '{rid}' is stored on this server (it keeps the last {MAX_STORED} "
                         "stored responses until it restarts)", param=param, code="response_not_found")


def _text_of(content: Any, where: str, pictures: bool = False) -> Any:
    """A message's text: a string, or text parts (input_text, output_text, text, refusal); with
    `pictures`, input_image parts too (data: URIs), giving the chat API's content parts."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise ApiError(400, f"{where}: must be a string or a list of content parts", param=where, code="invalid_value")
    out = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else type(part).__name__
        key = "refusal" if kind == "refusal" else "text"
        if kind in ("input_text", "output_text", "text", "refusal"):
            if not isinstance(part.get(key), str):
                raise ApiError(400, f"{where}[{j}].{key}: a {kind} part needs a {key!r} string",
                               param=f"{where}[{j}].{key}", code="invalid_value")
            out.append(part[key])
        elif kind == "input_image" and pictures:
            out.append(image_part(part.get("image_url"), f"{where}[{j}].image_url"))
        else:
            raise ApiError(400, f"{where}[{j}]: only text{' and input_image' if pictures else ''} parts are supported, "
                                f"got a {kind!r} part", param=f"{where}[{j}]", code="invalid_value")
    return content_of(out, "")


def to_messages(items: Union[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The chat messages that `input` stands for (function calls become an assistant message's
    `tool_calls`, their outputs `tool` messages naming the call)."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    messages: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        where = f"input[{i}]"
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "system", "developer", "assistant"):
                raise ApiError(400, f"{where}.role: must be 'user', 'system', 'developer' or 'assistant', got {role!r}",
                               param=f"{where}.role", code="invalid_value")
            messages.append({"role": role, "content": _text_of(item.get("content"), f"{where}.content", role == "user")})
        elif kind == "function_call":
            call_id, name = item.get("call_id") or item.get("id"), item.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise ApiError(400, f"{where}: a function_call item needs 'call_id' and 'name'", param=where,
                               code="invalid_value")
            names[call_id] = name
            call = {"id": call_id, "type": "function",
                    "function": {"name": name, "arguments": item.get("arguments") or "{}"}}
            if messages and messages[-1]["role"] == "assistant":
                messages[-1].setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if not isinstance(call_id, str):
                raise ApiError(400, f"{where}: a function_call_output item needs 'call_id'", param=where,
                               code="invalid_value")
            msg = {"role": "tool", "tool_call_id": call_id, "content": _text_of(item.get("output"), f"{where}.output")}
            if call_id in names:
                msg["name"] = names[call_id]
            messages.append(msg)
        elif kind != "reasoning":  # the model's own reasoning summaries carry nothing to render
            raise ApiError(400, f"{where}: items of type {kind!r} are not supported (send messages, function_call "
                                "and function_call_output items)", param=where, code="invalid_value")
    return messages


def chat_tools(req: ResponsesRequest) -> dict[str, Any]:
    """`tools` and `tool_choice` in the chat API's shape (function tools only)."""
    out: dict[str, Any] = {}
    if req.tools:
        tools = []
        for i, t in enumerate(req.tools):
            if t.get("type") != "function":
                raise ApiError(400, f"tools[{i}]: only function tools are served here, got {t.get('type')!r}",
                               param=f"tools[{i}]", code="invalid_value")
            fn = t.get("function") or {k: t[k] for k in ("name", "description", "parameters", "strict") if k in t}
            tools.append({"type": "function", "function": fn})
        out["tools"] = tools
    choice = req.tool_choice
    if isinstance(choice, dict):
        if choice.get("type") != "function" or not isinstance(choice.get("name"), str):
            raise ApiError(400, "tool_choice: 'none', 'auto', 'required' or {\"type\": \"function\", \"name\": ...}",
                           param="tool_choice", code="invalid_value")
        choice = {"type": "function", "function": {"name": choice["name"]}}
    if choice is not None:
        out["tool_choice"] = choice
    return out


def response_format(text: dict[str, Any] | None) -> dict[str, Any] | None:
    """`text.format` as the chat API's `response_format`."""
    fmt = (text or {}).get("format")
    if not fmt or fmt.get("type") == "text":
        return None
    if fmt.get("type") == "json_schema":
        return {"type": "json_schema", "json_schema": {k: fmt[k] for k in ("name", "schema", "strict") if k in fmt}}
    return fmt


class Responses:
    """The Responses endpoint of one served engine, with its store."""

    def __init__(self, core: AnswerCore, store: ResponseStore | None = None, library: FolderAnswers | None = None):
        self.core, self.store, self.library = core, store or ResponseStore(), library

    def chat_request(self, req: ResponsesRequest, raw: dict[str, Any]) -> tuple[ChatCompletionRequest, list]:
        """The chat request, and the conversation so far (without the instructions) to store."""
        history: list[dict[str, Any]] = []
        if req.previous_response_id:
            found = self.store.get(req.previous_response_id)
            if found is None:
                raise not_found(req.previous_response_id, "previous_response_id")
            history = list(found[1])
        conversation = history + to_messages(req.input)
        if not conversation:
            raise ApiError(400, "input: holds no message", param="input", code="invalid_value")
        system = [{"role": "system", "content": req.instructions}] if req.instructions else []
        tools, output = chat_tools(req), response_format(req.text)
        if output is not None and tools.get("tool_choice") not in (None, "auto", "none"):
            raise ApiError(400, "tool_choice: a forced function call ('required' or a named function) cannot be "
                                "combined with text.format: give one", param="tool_choice", code="invalid_value")
        fields: dict[str, Any] = {"model": req.model, "messages": system + conversation,
                                  "max_tokens": req.max_output_tokens, "temperature": req.temperature,
                                  "top_p": req.top_p, "parallel_tool_calls": req.parallel_tool_calls,
                                  "response_format": output, **tools,
                                  **{k: raw[k] for k in ("top_k", "min_p", "seed", "stop") if k in raw},
                                  **extensions(raw)}
        return validate(ChatCompletionRequest, {k: v for k, v in fields.items() if v is not None}), conversation

    async def create(self, request: Request) -> Any:
        raw = await read_body(request)
        req = validate(ResponsesRequest, raw)
        self.core.check_model(req.model)
        chat, conversation = self.chat_request(req, raw)
        shape = ResponseShape(req, self.core.served.id)
        shape.sources = await asked_sources(self.library, self.core, chat)
        answering = await self.core.begin(chat)
        if req.stream:
            events = answering.choice(0).events()
            return EventSourceResponse(self.sse(events, chat, shape, conversation, req.store), sep="\n",
                                       shutdown_grace_period=SHUTDOWN_GRACE_S)
        answer = await answering.choice(0).whole(request)
        body = shape.finished(answer_items(shape, answer), answer.finish, usage(answer.outcome),
                              timings(answer.outcome))
        if chat.provenance:
            body["provenance"] = provenance_items(answer.tokens)
        if req.store:
            self.store.put(body, conversation + assistant_turn(body["output"]))
        return body

    async def sse(self, events: Any, chat: ChatCompletionRequest, shape: "ResponseShape",
                  conversation: list[dict[str, Any]], store: bool):
        seq = 0

        def event(kind: str, **fields: Any) -> dict[str, str]:
            nonlocal seq
            seq += 1
            return {"event": kind, "data": dumps({"type": kind, "sequence_number": seq - 1, **fields})}

        yield event("response.created", response=shape.body("in_progress", []))
        yield event("response.in_progress", response=shape.body("in_progress", []))
        output: list[dict[str, Any]] = []
        # One item is written at a time (the message, or a function call), as OpenAI's stream
        # has it: each ends (its .done events, then output_item.done) before the next is added.
        # The chat stream writes a call's pieces before anything after it.
        current: dict[str, Any] | None = None
        call_index: int | None = None  # the chat stream's index of the call being written

        def close(status: str = "completed") -> list[dict[str, str]]:
            nonlocal current, call_index
            item, current, call_index = current, None, None
            if item is None:
                return []
            at = output.index(item)
            if item["type"] == "message":
                part = item["content"][0]
                ids = {"item_id": item["id"], "output_index": at, "content_index": 0}
                out = [event("response.output_text.done", **ids, text=part["text"], logprobs=[]),
                       event("response.content_part.done", **ids, part=part)]
            else:
                status = "completed"  # a call's arguments are what was written; the response says it was cut
                out = [event("response.function_call_arguments.done", item_id=item["id"], output_index=at,
                             name=item["name"], arguments=item["arguments"])]
            item["status"] = status
            return out + [event("response.output_item.done", output_index=at, item=item)]

        try:
            async for ev in events:
                if isinstance(ev, Text):
                    if current is None or current["type"] != "message":
                        closed = close()
                        current = shape.message_item("", "in_progress")
                        output.append(current)
                        for e in closed + [
                                event("response.output_item.added", output_index=len(output) - 1,
                                      item={**current, "content": []}),
                                event("response.content_part.added", item_id=current["id"],
                                      output_index=len(output) - 1, content_index=0,
                                      part={**current["content"][0]})]:
                            yield e
                    current["content"][0]["text"] += ev.text
                    prov = provenance(chat, ev.tokens)
                    extra = {"provenance": prov} if prov is not None else {}
                    yield event("response.output_text.delta", item_id=current["id"], output_index=output.index(current),
                                content_index=0, delta=ev.text, logprobs=[], **extra)
                elif isinstance(ev, CallStart):
                    closed = close()
                    current, call_index = shape.call_item(ev.id, ev.name, "", "in_progress"), ev.index
                    output.append(current)
                    for e in closed + [event("response.output_item.added", output_index=len(output) - 1,
                                             item=current)]:
                        yield e
                elif isinstance(ev, CallArgs) and current is not None and call_index == ev.index:
                    current["arguments"] += ev.text
                    yield event("response.function_call_arguments.delta", item_id=current["id"],
                                output_index=output.index(current), delta=ev.text)
                elif isinstance(ev, End):
                    status = "incomplete" if ev.finish == "length" else "completed"
                    for e in close(status):
                        yield e
                    body = shape.finished(output, ev.finish, usage(ev.outcome), timings(ev.outcome))
                    if store:
                        self.store.put(body, conversation + assistant_turn(output))
                    yield event("response.incomplete" if status == "incomplete" else "response.completed", response=body)
                elif isinstance(ev, Failed):
                    body = shape.body("failed", output)
                    body["error"] = {"code": ev.code or ev.type, "message": ev.message}
                    yield event("response.failed", response=body)
        finally:
            await events.aclose()  # a client gone: its generation stops


class ResponseShape:
    """The bodies of one response: its id, the request's settings echoed, its items."""

    def __init__(self, req: ResponsesRequest, model: str):
        self.req, self.model = req, model
        self.sources: list[dict[str, Any]] | None = None  # the folder's, when the request asked it
        self.id = "resp_" + uuid.uuid4().hex
        self.created = int(time.time())
        self._n = 0

    def _item_id(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}_{self.id[5:]}_{self._n}"

    def message_item(self, text: str, status: str = "completed") -> dict[str, Any]:
        return {"id": self._item_id("msg"), "type": "message", "status": status, "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}

    def call_item(self, call_id: str, name: str, arguments: str, status: str = "completed") -> dict[str, Any]:
        return {"id": self._item_id("fc"), "type": "function_call", "status": status, "call_id": call_id,
                "name": name, "arguments": arguments}

    def body(self, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        r = self.req
        return {"id": self.id, "object": "response", "created_at": self.created, "status": status,
                "background": False, "error": None, "incomplete_details": None, "instructions": r.instructions,
                "max_output_tokens": r.max_output_tokens, "model": self.model, "output": output,
                "parallel_tool_calls": r.parallel_tool_calls is not False,
                "previous_response_id": r.previous_response_id, "reasoning": {"effort": None, "summary": None},
                "store": r.store, "temperature": r.temperature, "text": r.text or {"format": {"type": "text"}},
                "tool_choice": r.tool_choice or "auto", "tools": r.tools or [], "top_p": r.top_p,
                "truncation": "disabled", "usage": None, "user": None, "metadata": r.metadata or {}}

    def finished(self, output: list[dict[str, Any]], finish: str, usage: dict[str, Any],
                 timings: dict[str, Any]) -> dict[str, Any]:
        """The final body: 'incomplete' (with the reason) when the token limit cut it."""
        body = self.body("incomplete" if finish == "length" else "completed", output)
        if finish == "length":
            body["incomplete_details"] = {"reason": "max_output_tokens"}
        body["usage"] = {"input_tokens": usage.get("prompt_tokens", 0),
                         "input_tokens_details": {"cached_tokens": usage.get("prompt_tokens_details", {})
                                                  .get("cached_tokens", 0)},
                         "output_tokens": usage.get("completion_tokens", 0),
                         "output_tokens_details": {"reasoning_tokens": 0},
                         "total_tokens": usage.get("total_tokens", 0)}
        body["timings"] = timings
        if self.sources is not None:
            body["sources"] = self.sources
        return body


def answer_items(shape: ResponseShape, answer: Whole) -> list[dict[str, Any]]:
    """A whole answer's output items: its text as a message (when it wrote any), then its calls."""
    text = answer.content or ""
    items = [shape.message_item(text, "incomplete" if answer.finish == "length" else "completed")] \
        if text or not answer.calls else []
    return items + [shape.call_item(c.id, c.name, c.arguments) for c in answer.calls]


def assistant_turn(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The output items as the chat messages a later turn continues from."""
    text = "".join(p["text"] for it in output if it["type"] == "message" for p in it["content"])
    calls = [{"id": it["call_id"], "type": "function", "function": {"name": it["name"], "arguments": it["arguments"]}}
             for it in output if it["type"] == "function_call"]
    return [{"role": "assistant", "content": text, **({"tool_calls": calls} if calls else {})}]


def responses_router(responses: Responses, check_key: Callable[..., Any]) -> APIRouter:
    router = APIRouter(dependencies=[Depends(check_key)])

    @router.post("/v1/responses")
    @router.post("/responses", include_in_schema=False)
    async def create_response(request: Request) -> Any:
        try:
            return await responses.create(request)
        except ApiError as e:
            raise e.renamed(CHAT_NAMES)

    @router.get("/v1/responses/{response_id}")
    async def get_response(response_id: str) -> Any:
        found = responses.store.get(response_id)
        if found is None:
            raise not_found(response_id)
        return found[0]

    @router.delete("/v1/responses/{response_id}")
    async def delete_response(response_id: str) -> Any:
        if not responses.store.delete(response_id):
            raise not_found(response_id)
        return {"id": response_id, "object": "response", "deleted": True}

    return router
