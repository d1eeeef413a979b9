"""The FastAPI application: OpenAI-compatible endpoints over one loaded `Engine`.

`create_app(served, config)` builds it from its parts; `engine.serving.server.runner` serves
it with uvicorn. Every request goes through the engine's `GenerationQueue` (one generation
at a time, in order, bounded: 503 with Retry-After beyond it), so the desktop app's chat and
the server share one engine safely. Errors are OpenAI-shaped bodies, never a dead server.

Parts: `config` (ServedModel, ServerConfig), `errors` (ApiError, handlers, the key check),
`generation` (the completion endpoints), `listing` (models, health, metrics),
`middleware` (request counting, bugs as 500s, CORS).
"""

from __future__ import annotations

from fastapi import FastAPI

from ...decoding.queue import GenerationQueue
from .config import ServedModel, ServerConfig
from .errors import install_error_handlers, key_check
from .generation import Completions, completions_router
from .listing import listing_router
from .middleware import install_middleware
from .prom import ServerMetrics

__all__ = ["ServedModel", "ServerConfig", "create_app"]


def create_app(served: ServedModel, config: ServerConfig | None = None) -> FastAPI:
    """The ASGI app for one served engine (the engine stays the caller's to close)."""
    config = config or ServerConfig()
    queue: GenerationQueue = served.engine.queue
    queue.max_waiting = config.max_waiting
    metrics = ServerMetrics(queue)
    app = FastAPI(title="Tandem", description="OpenAI-compatible local speculative decoding", version="1",
                  docs_url=None, redoc_url=None, openapi_url=None)
    app.state.served, app.state.config, app.state.queue, app.state.metrics = served, config, queue, metrics
    install_middleware(app, metrics, tuple(config.cors_origins))
    install_error_handlers(app)
    check_key = key_check(config)
    app.include_router(completions_router(Completions(served, config, queue, metrics), check_key))
    app.include_router(listing_router(served, config, queue, metrics, check_key))
    return app
