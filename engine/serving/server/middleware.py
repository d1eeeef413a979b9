"""ASGI middleware around the whole app: the request-body limit and request counting for /metrics."""

from __future__ import annotations

from typing import Any

from . import wire
from .prom import ServerMetrics

REJECTED = frozenset({401, 403, 413})  # refused before the route ran: one label whatever the path


class BodyLimit:
    """Refuse a request body larger than `max_bytes` with 413 before the app reads any of it.

    A declared `Content-Length` over the limit is answered at once, without receiving the
    body (uvicorn then discards what the client still sends, so the client reads the 413
    and other connections are served as usual). A body without a length (chunked) is
    received here, counted, and refused as soon as it passes the limit; a body within the
    limit is handed to the app as received, and later `receive()` calls (disconnects) pass
    through. Why here and not in a route: FastAPI parses the JSON before any handler runs,
    and a 50 MB body took minutes and gigabytes to be refused that way."""

    def __init__(self, app: Any, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.max_bytes <= 0:
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(send, declared)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left before sending it all
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                await self._refuse(send, None)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Any, declared: int | None) -> None:
        size = f"{declared:,} bytes" if declared is not None else "more than that"
        body = wire.dumps(wire.error_body(
            f"the request body is {size} but this server accepts at most {self.max_bytes:,} bytes "
            "(start it with a larger --max-body)", code="request_too_large")).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


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
    route ran (401, 413), so no client can add labels: the codes tell those apart."""

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
