"""ASGI middleware around the whole app: request counting for /metrics, a bug answered as an
OpenAI-shaped 500 inside the CORS layer (Starlette answers unhandled errors outside every
middleware, so that 500 would lack the CORS headers a browser needs to read it), and CORS."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from . import wire
from .prom import ServerMetrics

log = logging.getLogger("tandem.server")


class CountRequests:
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


class AnswerBugs:
    """ASGI middleware: an exception a route did not handle becomes OpenAI's 500 body (when the
    response has not started), so the middlewares outside it (CORS, counting) still see an answer."""

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

            body = wire.error_body(f"internal error: {type(e).__name__}: {e}", type="server_error")
            await JSONResponse(body, status_code=500)(scope, receive, send)


def install_middleware(app: FastAPI, metrics: ServerMetrics, cors_origins: tuple[str, ...]) -> None:
    """Innermost first: bugs answered, then counted, then (outermost) CORS headers on every answer."""
    app.add_middleware(AnswerBugs)
    app.add_middleware(CountRequests, metrics=metrics)
    if cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(cors_origins), allow_methods=["*"],
                           allow_headers=["*"], expose_headers=["Retry-After"], max_age=600)
