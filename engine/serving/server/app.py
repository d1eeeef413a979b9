"""The FastAPI application: OpenAI-compatible endpoints over one loaded `Engine`.

`create_app(served, config)` builds it; `engine.serving.server.runner` serves it with uvicorn.
Every request goes through the engine's `GenerationQueue` (one generation at a time, in
order, bounded: 503 with Retry-After beyond it), so the desktop app's chat and the server
share one engine safely. Errors are OpenAI-shaped bodies, never a dead server.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sse_starlette import EventSourceResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from ...errors import TandemError
from ...decoding.rpc_backend import RpcError
from ...decoding.events import DoneEvent, TokenEvent
from ...decoding.llama import Model
from ...decoding.queue import GenerationQueue, QueueFull
from . import wire
from .bridge import Generation, GenerationFailed
from .prom import ServerMetrics
from .schemas import ChatCompletionRequest, CompletionRequest

log = logging.getLogger("tandem.server")


@dataclass
class ServedModel:
    """What the server serves: one loaded engine, its public id and its default draft."""

    engine: Any  # engine.Engine
    id: str
    draft: Union[str, os.PathLike, Model, None] = None  # a draft model (path/Model), "lookup" or None
    lookahead: Union[int, str] = "auto"  # for requests that do not say
    aliases: tuple[str, ...] = ()

    @property
    def has_draft_model(self) -> bool:
        return self.draft is not None and not (isinstance(self.draft, str) and self.draft.lower() in ("lookup", "none"))

    @property
    def default_draft(self) -> str:
        if self.has_draft_model:
            return "model"
        return "lookup" if isinstance(self.draft, str) and self.draft.lower() == "lookup" else "none"

    def names(self) -> set[str]:
        target = Path(self.engine.target.path)
        return {self.id, target.name, target.stem, *self.aliases}


@dataclass
class ServerConfig:
    api_key: str | None = None
    max_waiting: int = 16  # requests allowed to wait behind the running one
    temperature: float = 1.0  # when a request does not say (OpenAI's default)
    list_catalog: bool = True  # /v1/models also lists downloaded catalog pairs
    extra: dict[str, Any] = field(default_factory=dict)


def _failure(e: GenerationFailed) -> "ApiError":
    """The answer to a generation that raised: 400 for bad input, 503 for a lost RPC worker
    (retrying will not help until the server is restarted: no Retry-After), 500 for a bug."""
    if e.lost_worker:
        return ApiError(503, str(e), type="server_error", code="rpc_worker_lost")
    return ApiError(400 if e.user else 500, str(e), type="invalid_request_error" if e.user else "server_error")


class ApiError(Exception):
    """An error answered with an OpenAI-shaped body."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.body, self.headers = status, wire.error_body(message, type=type, param=param, code=code), headers


def _validation_message(err: dict[str, Any]) -> tuple[str, str | None]:
    """One readable line (and the offending parameter) from pydantic's first error."""
    loc = [x for x in err.get("loc", ()) if x != "body"]
    param = "".join(f"[{x}]" if isinstance(x, int) else (f".{x}" if i else str(x)) for i, x in enumerate(loc)) or None
    kind = err.get("type", "")
    msg = str(err.get("msg", "invalid value"))
    if kind == "json_invalid":
        detail = (err.get("ctx") or {}).get("error", "")
        return f"the request body is not valid JSON{f' ({detail})' if detail else ''}", None
    if kind in ("model_attributes_type", "dict_type") and not loc:
        return "the request body must be a JSON object, sent with 'Content-Type: application/json'", None
    if kind == "missing":
        return f"{param}: this field is required", param
    msg = msg.removeprefix("Value error, ")
    return (f"{param}: {msg}" if param else msg), param


def _downloaded_pairs(exclude: set[str]) -> list[dict[str, Any]]:
    """Catalog pairs whose two files are in the store (listed, not loaded)."""
    try:
        from ...models import catalog, store

        cat = catalog.load()
        out = []
        for p in cat.pairs.values():
            if p.id in exclude:
                continue
            if store.find_model(p.target.id, cat) and store.find_model(p.draft.id, cat):
                out.append({"id": p.id, "object": "model", "created": 0, "owned_by": "tandem", "loaded": False,
                            "title": p.title, "target": p.target.id, "draft": p.draft.id})
        return out
    except Exception:  # the listing is a courtesy: a broken store must not break /v1/models
        log.debug("catalog listing failed", exc_info=True)
        return []


def create_app(served: ServedModel, config: ServerConfig | None = None) -> FastAPI:
    """The ASGI app for one served engine (the engine stays the caller's to close)."""
    config = config or ServerConfig()
    eng = served.engine
    queue: GenerationQueue = eng.queue
    queue.max_waiting = config.max_waiting
    metrics = ServerMetrics(queue)
    app = FastAPI(title="Tandem", description="OpenAI-compatible local speculative decoding", version="1",
                  docs_url=None, redoc_url=None, openapi_url=None)
    app.state.served, app.state.config, app.state.queue, app.state.metrics = served, config, queue, metrics
    app.add_middleware(_CountRequests, metrics=metrics)

    # -- errors ----------------------------------------------------------------------------
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, e: ApiError) -> JSONResponse:
        return JSONResponse(e.body, status_code=e.status, headers=e.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, e: RequestValidationError) -> JSONResponse:
        errors = e.errors()
        message, param = _validation_message(errors[0]) if errors else ("invalid request", None)
        return JSONResponse(wire.error_body(message, param=param, code="invalid_value"), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, e: StarletteHTTPException) -> JSONResponse:
        message = {404: f"no such endpoint: {request.method} {request.url.path}",
                   405: f"method {request.method} is not allowed on {request.url.path}"}.get(e.status_code, str(e.detail))
        return JSONResponse(wire.error_body(message, code=str(e.status_code)), status_code=e.status_code)

    @app.exception_handler(Exception)
    async def _bug(request: Request, e: Exception) -> JSONResponse:
        log.exception("request failed")
        return JSONResponse(wire.error_body(f"internal error: {type(e).__name__}: {e}", type="server_error"), status_code=500)

    # -- auth ------------------------------------------------------------------------------
    async def check_key(request: Request) -> None:
        if not config.api_key:
            return
        got = request.headers.get("authorization", "")
        scheme, _, token = got.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), config.api_key.encode()):
            raise ApiError(401, "missing or incorrect API key: send the header 'Authorization: Bearer KEY'",
                           code="invalid_api_key")

    auth = [Depends(check_key)]

    # -- helpers ---------------------------------------------------------------------------
    def check_model(name: str | None) -> None:
        if not name or name in served.names():
            return
        listed = {p["id"] for p in _downloaded_pairs(set())} if config.list_catalog else set()
        hint = (f"'{name}' is downloaded but not loaded: this server runs '{served.id}' (restart it with --pair {name})"
                if name in listed else f"the model '{name}' does not exist here: this server runs '{served.id}'")
        raise ApiError(400, hint, param="model", code="model_not_found")

    def draft_spec(choice: str | None) -> Any:
        choice = choice or served.default_draft
        if choice == "model":
            if not served.has_draft_model:
                raise ApiError(400, "draft 'model': this server was started without a draft model; "
                                    "use 'lookup' or 'none'", param="draft", code="invalid_value")
            return served.draft
        return "lookup" if choice == "lookup" else None

    async def prompt_tokens(prompt: Any, chat: bool) -> int:
        try:
            n = len(await run_in_threadpool(eng.tokens_for, prompt, chat=chat))
        except RpcError as e:  # the split target's worker is gone: the server's trouble, not the request's
            raise _failure(GenerationFailed(str(e), user=False, lost_worker=True))
        except TandemError as e:
            raise ApiError(400, str(e), param="messages" if chat else "prompt", code="invalid_value")
        if n >= eng.n_ctx:
            raise ApiError(400, f"the prompt is {n} tokens but the context holds {eng.n_ctx}: shorten it, "
                                "or start the server with a larger --ctx", param="messages" if chat else "prompt",
                           code="context_length_exceeded")
        return n

    async def generate(request: Request, req: Union[ChatCompletionRequest, CompletionRequest], kind: str) -> Response:
        check_model(req.model)
        chat = kind == "chat"
        prompt: Any = req.engine_messages() if isinstance(req, ChatCompletionRequest) else req.text
        n_prompt = await prompt_tokens(prompt, chat)
        draft = draft_spec(req.draft)
        lookahead = req.lookahead if req.lookahead is not None else served.lookahead
        limit = req.token_limit or max(1, eng.n_ctx - n_prompt)
        kw = dict(draft_model=draft, lookahead=lookahead if draft is not None else 0, max_tokens=limit,
                  temperature=config.temperature if req.temperature is None else req.temperature,
                  top_p=1.0 if req.top_p is None else req.top_p, top_k=req.top_k or 0, min_p=req.min_p or 0.0,
                  seed=req.seed, stop=req.stop_list, chat=chat, tag="server")
        request_id = uuid.uuid4().hex[:24]
        try:
            job = queue.submit("server", endpoint=kind, request_id=request_id, model=served.id)
        except QueueFull as e:
            raise ApiError(503, str(e), type="server_error", code="queue_full",
                           headers={"Retry-After": str(e.retry_after_s)})
        gen = Generation(queue, job, eng, prompt, **kw).start()
        shape = wire.Shape(kind, request_id, served.id)
        if req.stream:
            return EventSourceResponse(_stream(gen, shape, req), sep="\n")
        return await _complete(request, gen, shape, req)

    async def _complete(request: Request, gen: Generation, shape: wire.Shape, req: Any) -> Response:
        tokens: list[TokenEvent] = []
        done: list[DoneEvent] = []

        async def drain() -> None:
            async for ev in gen:
                if isinstance(ev, TokenEvent):
                    tokens.append(ev)
                else:
                    done.append(ev)

        task = asyncio.ensure_future(drain())
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=0.25)
                if not task.done() and await request.is_disconnected():
                    gen.cancel()  # nobody will read the answer: stop at the next step
            task.result()
        except GenerationFailed as e:
            raise _failure(e)
        finally:
            gen.cancel()
        if not done:
            raise ApiError(503, "the generation was cancelled before it started (the server is stopping)",
                           type="server_error", code="cancelled")
        outcome = wire.Outcome(done[0].stats, gen.prompt_evaluated)
        metrics.observe(outcome.stats)
        return JSONResponse(shape.full(done[0].text, outcome, tokens if req.provenance else None))

    async def _stream(gen: Generation, shape: wire.Shape, req: Any):
        try:
            if shape.chat:
                yield {"data": wire.dumps(shape.chunk("", role=True))}
            pending: list[TokenEvent] = []  # tokens whose text is still incomplete (split characters)
            async for ev in gen:
                if isinstance(ev, TokenEvent):
                    pending.append(ev)
                    if ev.text:
                        text = "".join(t.text for t in pending)
                        yield {"data": wire.dumps(shape.chunk(text, tokens=pending if req.provenance else None))}
                        pending = []
                else:
                    outcome = wire.Outcome(ev.stats, gen.prompt_evaluated)
                    metrics.observe(outcome.stats)
                    yield {"data": wire.dumps(shape.final_chunk(outcome))}
                    if req.include_usage:
                        yield {"data": wire.dumps(shape.usage_chunk(outcome))}
            yield {"data": "[DONE]"}
        except GenerationFailed as e:
            yield {"data": wire.dumps(_failure(e).body)}
        finally:
            gen.cancel()  # a client that went away stops its generation at the next step

    # -- routes ----------------------------------------------------------------------------
    @app.post("/v1/chat/completions", dependencies=auth)
    @app.post("/chat/completions", dependencies=auth, include_in_schema=False)
    async def chat_completions(request: Request, body: ChatCompletionRequest) -> Response:
        return await generate(request, body, "chat")

    @app.post("/v1/completions", dependencies=auth)
    @app.post("/completions", dependencies=auth, include_in_schema=False)
    async def completions(request: Request, body: CompletionRequest) -> Response:
        return await generate(request, body, "text")

    async def model_entries() -> list[dict[str, Any]]:
        target = Path(eng.target.path)
        try:
            created = int(target.stat().st_mtime)
        except OSError:
            created = 0
        loaded = {"id": served.id, "object": "model", "created": created, "owned_by": "tandem", "loaded": True,
                  "target": target.name, "draft": served.default_draft, "n_ctx": eng.n_ctx,
                  "lookahead": served.lookahead}
        others = await run_in_threadpool(_downloaded_pairs, {served.id}) if config.list_catalog else []
        return [loaded, *others]

    @app.get("/v1/models", dependencies=auth)
    @app.get("/models", dependencies=auth, include_in_schema=False)
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": await model_entries()}

    @app.get("/v1/models/{model_id:path}", dependencies=auth)
    async def model(model_id: str) -> dict[str, Any]:
        for m in await model_entries():
            if m["id"] == model_id or (m["loaded"] and model_id in served.names()):
                return m
        raise ApiError(404, f"the model '{model_id}' does not exist here", param="model", code="model_not_found")

    @app.get("/health")
    async def health() -> dict[str, Any]:
        running = queue.running
        lost = getattr(eng, "lost", None)  # a split target (tandem serve --rpc) whose worker is gone
        if lost is not None:
            return JSONResponse({"status": "error", "model": served.id, "error": str(lost)}, status_code=503)
        return {"status": "ok", "model": served.id, "busy": running is not None, "waiting": queue.waiting}

    @app.get("/metrics", dependencies=auth)
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=metrics.content_type)

    return app


class _CountRequests:
    """ASGI middleware: count answered requests by endpoint and status (streams included)."""

    def __init__(self, app: Any, metrics: ServerMetrics):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")

        async def counting_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                self.metrics.requests.labels(path if path.startswith(("/v1/", "/health", "/metrics")) else "other",
                                             str(message["status"])).inc()
            await send(message)

        await self.app(scope, receive, counting_send)
