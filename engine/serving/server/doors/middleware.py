"""ASGI middleware around the whole app: the request-body limits (size and JSON depth), the
Origin check, request counting for /metrics, a bug answered as a 500 inside the CORS layer
(Starlette answers unhandled errors outside every middleware, so that 500 would lack the
CORS headers a browser needs to read it), and CORS. Every refusal is written in the called
API's error shape (`error_shapes`)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from . import json_body
from ..config import with_loopback_twins
from ..error_shapes import send_error
from .hosts import HostCheck
from .origins import OriginCheck
from ..prom import ServerMetrics

log = logging.getLogger("tandem.server")
REJECTED = frozenset({401, 403, 413})  # refused before the route ran: one label whatever the path


class BodyLimit:
    """Refuse a request body larger than `max_bytes` with 413 before the app reads any of it,
    and one nested deeper than `json_body.MAX_DEPTH` with 400 before anything parses it.

    A declared `Content-Length` over the limit is answered at once, without receiving the
    body (uvicorn then discards what the client still sends, so the client reads the 413
    and other connections are served as usual). A body without a length (chunked) is
    received here, counted, and refused as soon as it passes the limit; a body within the
    limit is handed to the app as received, and later `receive()` calls (disconnects) pass
    through. Why here and not in a route: FastAPI parses the JSON before any handler runs,
    and a 50 MB body took minutes and gigabytes to be refused that way; a body of 100,000
    `[` was a RecursionError (500) in every parser but FastAPI's. Every route reads JSON, so
    every body's depth is checked (`max_bytes` 0: no size limit, the depth still checked)."""

    def __init__(self, app: Any, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if self.max_bytes > 0 and declared is not None and declared > self.max_bytes:
            await self._refuse(scope, send, declared)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left before sending it all
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if 0 < self.max_bytes < size:
                await self._refuse(scope, send, None)
                return
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if json_body.too_deep(body):
            await send_error(scope, send, 400, json_body.too_deep_message(), code="body_too_deep")
            return
        await self.app(scope, json_body.replaying(body, receive), send)

    async def _refuse(self, scope: Any, send: Any, declared: int | None) -> None:
        size = f"{declared:,} bytes" if declared is not None else "more than that"
        await send_error(scope, send, 413, f"the request body is {size} but this server accepts at most "
                         f"{self.max_bytes:,} bytes (start it with a larger --max-body)", code="request_too_large",
                         close=True)


def _content_length(scope: Any) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the HTTP server refuses a malformed length before we see it
    return None


class CountRequests:
    """ASGI middleware: count answered requests by endpoint and status (streams included).

    The endpoint label is the matched route's path template (`/v1/models/{model_id:path}`,
    not each id), "other" for unknown paths and "rejected" for a request refused before its
    route ran (401, 403, 413), so no client can add labels: the codes tell those apart."""

    def __init__(self, app: Any, metrics: ServerMetrics, known: frozenset[str] = frozenset()):
        self.app, self.metrics, self.known = app, metrics, known

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def counting_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                status = message["status"]
                self.metrics.requests.labels(self.endpoint(scope, status), str(status)).inc()
            await send(message)

        await self.app(scope, receive, counting_send)

    def endpoint(self, scope: Any, status: int) -> str:
        if status in REJECTED:
            return "rejected"
        template = getattr(scope.get("route"), "path", None)  # FastAPI sets the matched route
        return template if template in self.known else "other"


class AnswerBugs:
    """ASGI middleware: an exception a route did not handle becomes a 500 in the called API's
    shape (when the response has not started), so the middlewares outside it (CORS, counting)
    still see an answer."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watching_send(message: Any) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watching_send)
        except Exception as e:
            if started:
                raise
            log.exception("request failed")
            from fastapi.responses import JSONResponse

            from ..errors import bug_body

            await JSONResponse(bug_body(e, scope.get("app"), scope.get("path", "")), status_code=500)(scope, receive,
                                                                                                      send)


def install_middleware(app: FastAPI, metrics: ServerMetrics, *, cors_origins: tuple[str, ...], max_body: int,
                       known: frozenset[str], allowed_hosts: tuple[str, ...] = (),
                       fetch_image_urls: bool = False) -> None:
    """Innermost first: bugs answered, picture URLs fetched (only with `fetch_image_urls`),
    the body limits, the Origin check (a web page that may
    not call the server makes nothing run), counting (every answer, the refusals too), CORS
    headers on every answer (a loopback origin under each loopback name), then (outermost)
    the Host check, before anything else runs."""
    app.add_middleware(AnswerBugs)
    if fetch_image_urls:
        from .image_urls import FetchImageUrls

        app.add_middleware(FetchImageUrls)
    app.add_middleware(BodyLimit, max_bytes=max_body)
    app.add_middleware(OriginCheck, allowed=cors_origins)
    app.add_middleware(CountRequests, metrics=metrics, known=known)
    if cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(with_loopback_twins(cors_origins)),
                           allow_methods=["*"], allow_headers=["*"], expose_headers=["Retry-After"], max_age=600)
    app.add_middleware(HostCheck, allowed=allowed_hosts, metrics=metrics)
