"""ASGI middleware around the whole app: request counting for /metrics."""

from __future__ import annotations

from typing import Any

from .prom import ServerMetrics


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
