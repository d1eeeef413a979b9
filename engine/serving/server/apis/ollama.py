"""Ollama's API (`/api/chat`, `/api/generate`, `/api/embed`, `/api/embeddings`) over the
OpenAI endpoints' path; the model listing endpoints are in `ollama_models`.

Ollama streams by default (`stream` is true unless the request says false), one JSON
object per line (NDJSON), the last one with `done: true`, the done reason and the
durations in nanoseconds. `options` (temperature, top_p, top_k, min_p, seed, num_predict,
stop, repeat_penalty, repeat_last_n, presence_penalty, frequency_penalty), `format`
("json" or a JSON schema) and `tools` map onto the chat request's fields; `num_ctx` and
`keep_alive` are the server's to decide and are ignored. Errors are `{"error": "..."}`.
Tandem's speculation fields (`draft`, `lookahead`, `provenance`) are accepted at the top
level or in `options`; final objects carry `timings`.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Union

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from ..answer import AnswerCore, CallArgs, CallStart, End, Failed, Text
from ..wire import dumps, provenance_items, timings, usage
from .library import FolderAnswers, asked_sources
from .translate import calls_as_dicts, content_of, data_uri, extensions, image_part, now_iso, provenance, read_body, validate
from .embeddings import Embeddings
from ..errors import ApiError
from .ollama_models import OllamaModels, models_routes
from ..schemas import ChatCompletionRequest, CompletionRequest, EmbeddingRequest

OPTIONS = ("temperature", "top_p", "top_k", "min_p", "seed", "stop", "repeat_penalty", "presence_penalty",
           "frequency_penalty")
CHAT_NAMES = {"response_format": "format", "max_tokens": "options.num_predict",  # for errors after translation
              "repeat_last_n": "options.repeat_last_n", **{k: f"options.{k}" for k in OPTIONS}}


class _Request(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str | None = None
    stream: bool = True  # Ollama's default
    format: Union[str, dict[str, Any], None] = None
    options: dict[str, Any] | None = None


class ChatBody(_Request):
    messages: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] | None = None


class GenerateBody(_Request):
    prompt: str = ""
    suffix: str | None = None
    system: str | None = None
    template: str | None = None
    context: list[int] | None = None
    raw: bool = False
    images: list[str] | None = None


class EmbedBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str | None = None
    input: Union[str, list[str]] = Field(default_factory=list)
    dimensions: int | None = None


def settings(body: _Request, raw: dict[str, Any]) -> dict[str, Any]:
    """The chat request's sampling and format fields from `options`, `format` and extensions."""
    opts = body.options or {}
    if not isinstance(opts, dict):
        raise ApiError(400, "options: must be an object")
    out = {k: opts[k] for k in OPTIONS if opts.get(k) is not None}
    n = opts.get("num_predict")
    if isinstance(n, int) and not isinstance(n, bool) and n > 0:  # -1 (no limit) and -2 (fill the context): none
        out["max_tokens"] = n
    elif n is not None and not isinstance(n, int):
        raise ApiError(400, f"options.num_predict: must be an integer, got {n!r}")
    last_n = opts.get("repeat_last_n")
    if isinstance(last_n, int) and last_n > 0:
        out["repeat_last_n"] = last_n
    fmt = body.format
    if fmt == "json":
        out["response_format"] = {"type": "json_object"}
    elif isinstance(fmt, dict) and fmt:
        out["response_format"] = {"type": "json_schema", "json_schema": {"name": "output", "schema": fmt}}
    elif fmt not in (None, ""):
        raise ApiError(400, f"format: must be \"json\" or a JSON schema object, got {fmt!r}")
    return {**out, **extensions(opts), **extensions(raw)}


def _with_images(text: str, images: Any, where: str) -> Any:
    """A message's text with Ollama's `images` (base64, no media type) before it, as the chat
    API's content parts; the text alone without images."""
    if not images:
        return text
    if not isinstance(images, list) or not all(isinstance(b, str) for b in images):
        raise ApiError(400, f"{where}: must be a list of base64 strings", param=where, code="invalid_value")
    return content_of([image_part(data_uri(None, b), f"{where}[{k}]") for k, b in enumerate(images)] + [text], "")


def to_messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ollama's messages as the chat API's: calls get ids, and each tool message answers the
    earliest call still unanswered with its `tool_name` (or the earliest at all)."""
    out: list[dict[str, Any]] = []
    pending: list[tuple[str, str]] = []  # (call id, name) of calls not answered yet
    for i, m in enumerate(items):
        if not isinstance(m, dict):
            raise ApiError(400, f"messages[{i}]: must be an object")
        role, content = m.get("role"), m.get("content") or ""
        if role not in ("system", "user", "assistant", "tool"):
            raise ApiError(400, f"messages[{i}].role: must be 'system', 'user', 'assistant' or 'tool', got {role!r}")
        if not isinstance(content, str):
            raise ApiError(400, f"messages[{i}].content: must be a string")
        msg: dict[str, Any] = {"role": role, "content": _with_images(content, m.get("images"), f"messages[{i}].images")}
        if role == "assistant" and m.get("tool_calls"):
            calls = []
            for j, call in enumerate(m["tool_calls"]):
                fn = call.get("function") if isinstance(call, dict) else None
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                    raise ApiError(400, f"messages[{i}].tool_calls[{j}]: must be {{\"function\": {{\"name\", \"arguments\"}}}}")
                cid = call.get("id") or f"call_{i}_{j}"
                args = fn.get("arguments") or {}
                calls.append({"id": cid, "type": "function", "function": {
                    "name": fn["name"], "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)}})
                pending.append((cid, fn["name"]))
            msg["tool_calls"] = calls
        elif role == "tool":
            name = m.get("tool_name") or m.get("name")
            match = next((p for p in pending if p[1] == name), pending[0] if pending else None)
            if match is not None:
                pending.remove(match)
                msg["tool_call_id"] = match[0]
                name = name or match[1]
            if isinstance(name, str):
                msg["name"] = name
        out.append(msg)
    return out


def durations(usage: dict[str, Any], timings: dict[str, Any]) -> dict[str, Any]:
    """Ollama's counts and durations (nanoseconds) from the answer's usage and timings."""
    prompt_ns = int(float(timings.get("prompt_ms", 0.0)) * 1e6)
    eval_ns = int(float(timings.get("predicted_ms", 0.0)) * 1e6)
    return {"total_duration": prompt_ns + eval_ns, "load_duration": 0,
            "prompt_eval_count": usage.get("prompt_tokens", 0), "prompt_eval_duration": prompt_ns,
            "eval_count": usage.get("completion_tokens", 0), "eval_duration": eval_ns, "timings": timings}


def ollama_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Calls as Ollama writes them: arguments as an object."""
    out = []
    for c in calls:
        try:
            args = json.loads(c["arguments"] or "{}")
        except ValueError:  # a forced call cut short by the token limit: as written
            args = {"_partial_arguments": c["arguments"]}
        out.append({"id": c["id"], "function": {"name": c["name"], "arguments": args}})
    return out


class Ollama:
    """The generating endpoints of Ollama's API for one served engine."""

    def __init__(self, core: AnswerCore, embeddings: Embeddings, models: OllamaModels,
                 library: FolderAnswers | None = None):
        self.core, self.embeddings, self.models, self.library = core, embeddings, models, library

    def loaded(self, name: str) -> dict[str, Any]:
        """Ollama's answer to an empty request: the model is loaded (clients use it to preload)."""
        return {"model": name, "created_at": now_iso(), "done": True, "done_reason": "load"}

    async def chat(self, request: Request) -> Any:
        raw = await read_body(request)
        body = validate(ChatBody, raw)
        name = self.models.check(body.model)
        shown = body.model or name
        if not body.messages:
            done = {**self.loaded(shown), "message": {"role": "assistant", "content": ""}}
            return ndjson_one(done) if body.stream else done
        fields = {"model": name, "messages": to_messages(body.messages), **settings(body, raw)}
        if body.tools:
            fields["tools"] = body.tools
        req = validate(ChatCompletionRequest, fields)
        return await self.run(request, req, body.stream, shown, chat=True)

    async def generate(self, request: Request) -> Any:
        raw = await read_body(request)
        body = validate(GenerateBody, raw)
        name = self.models.check(body.model)
        shown = body.model or name
        for field in ("template", "context", "images"):
            if getattr(body, field) and (field != "images" or body.raw or body.suffix):
                why = {"template": "the model's own chat template is used", "images": "not with raw or suffix",
                       "context": "send the conversation to /api/chat instead"}[field]
                raise ApiError(400, f"{field}: not supported by this server ({why})")
        if not body.prompt and not body.suffix:
            done = {**self.loaded(shown), "response": ""}
            return ndjson_one(done) if body.stream else done
        if body.system and (body.raw or body.suffix):
            why = "raw: true (the prompt goes as it is: put the system text in it)" if body.raw \
                else "suffix (a fill-in-the-middle prompt has no system text)"
            raise ApiError(400, f"system: not used with {why}")
        opts = settings(body, raw)
        if body.suffix:  # fill-in-the-middle: the prompt is the prefix, laid out with the model's FIM tokens
            req: Any = validate(CompletionRequest,
                                {"model": name, "prompt": body.prompt, "suffix": body.suffix, **opts})
        elif body.raw:  # the client formatted the prompt: its control-token text is markup
            req = validate(CompletionRequest, {"model": name, "prompt": body.prompt, **opts}).with_markup()
        else:
            system = [{"role": "system", "content": body.system}] if body.system else []
            req = validate(ChatCompletionRequest, {"model": name, **opts,
                                                   "messages": system + [{"role": "user", "content": _with_images(
                                                       body.prompt, body.images, "images")}]})
        return await self.run(request, req, body.stream, shown, chat=False)

    async def run(self, request: Request, req: Any, stream: bool, name: str, chat: bool) -> Any:
        sources = await asked_sources(self.library, self.core, req)
        answering = await self.core.begin(req)
        if stream:
            events = answering.choice(0).events()
            return StreamingResponse(self.lines(events, req, name, chat, sources), media_type="application/x-ndjson")
        a = await answering.choice(0).whole(request)
        text = a.content or ""
        out: dict[str, Any] = {"model": name, "created_at": now_iso()}
        if chat:
            out["message"] = {"role": "assistant", "content": text}
            if a.calls:
                out["message"]["tool_calls"] = ollama_calls(calls_as_dicts(a.calls))
        else:
            out["response"] = text
        out.update(done=True, done_reason="length" if a.finish == "length" else "stop",
                   **durations(usage(a.outcome), timings(a.outcome)))
        if req.provenance:
            out["provenance"] = provenance_items(a.tokens)
        if sources is not None:
            out["sources"] = sources
        return out

    async def lines(self, events: Any, req: Any, name: str, chat: bool, sources: list[dict[str, Any]] | None = None):
        def line(text: str, calls: list[dict[str, Any]] | None = None, **more: Any) -> str:
            piece: dict[str, Any] = {"message": {"role": "assistant", "content": text}} if chat else {"response": text}
            if calls:
                piece["message"]["tool_calls"] = calls
            return dumps({"model": name, "created_at": now_iso(), **piece, **more}) + "\n"

        calls: dict[int, dict[str, Any]] = {}
        try:
            async for ev in events:
                if isinstance(ev, Text):
                    prov = provenance(req, ev.tokens)
                    yield line(ev.text, done=False, **({"provenance": prov} if prov else {}))
                elif isinstance(ev, CallStart):
                    calls[ev.index] = {"id": ev.id, "name": ev.name, "arguments": ""}
                elif isinstance(ev, CallArgs) and ev.index in calls:
                    calls[ev.index]["arguments"] += ev.text
                elif isinstance(ev, End):
                    if calls and chat:  # Ollama sends a call whole, in a message of its own
                        yield line("", ollama_calls([calls[i] for i in sorted(calls)]), done=False)
                    yield line("", done=True, done_reason="length" if ev.finish == "length" else "stop",
                               **durations(usage(ev.outcome), timings(ev.outcome)),
                               **({"sources": sources} if sources is not None else {}))
                elif isinstance(ev, Failed):
                    yield dumps({"error": ev.message}) + "\n"
        finally:
            await events.aclose()

    async def embed(self, request: Request, legacy: bool = False) -> Any:
        raw = await read_body(request)
        body = validate(EmbedBody, {**raw, "input": raw.get("prompt", "")} if legacy else raw)
        name = self.models.check(body.model)
        if not body.input:
            raise ApiError(400, "prompt: is empty, nothing to embed" if legacy else "input: is empty, nothing to embed")
        req = validate(EmbeddingRequest, {"model": name, "input": body.input, "dimensions": body.dimensions})
        result = await self.embeddings.create(request, req)
        vectors = [d["embedding"] for d in result["data"]]
        if legacy:
            return {"embedding": vectors[0]}
        return {"model": body.model or name, "embeddings": vectors, "total_duration": 0, "load_duration": 0,
                "prompt_eval_count": result["usage"]["prompt_tokens"]}


def ndjson_one(obj: dict[str, Any]) -> StreamingResponse:
    async def one():
        yield dumps(obj) + "\n"

    return StreamingResponse(one(), media_type="application/x-ndjson")


def ollama_router(ollama: Ollama, check_key: Callable[..., Any]) -> APIRouter:
    """Ollama's endpoints, behind the server's key check (a Bearer token); their errors name
    Ollama's fields (`CHAT_NAMES`) in Ollama's shape, as every error under /api/ (`error_shapes`)."""
    router = APIRouter(dependencies=[Depends(check_key)])

    def route(method: str, path: str, handler: Callable[[Request], Any]) -> None:
        async def endpoint(request: Request) -> Any:  # FastAPI reads parameters from the signature: the Request only
            try:
                return await handler(request)
            except ApiError as e:
                raise e.renamed(CHAT_NAMES)

        router.add_api_route(path, endpoint, methods=[method])

    route("POST", "/api/chat", ollama.chat)
    route("POST", "/api/generate", ollama.generate)
    route("POST", "/api/embed", ollama.embed)
    route("POST", "/api/embeddings", lambda r: ollama.embed(r, legacy=True))
    models_routes(route, ollama.models)
    return router
