"""The FastAPI application: OpenAI-compatible endpoints over one loaded `Engine`.

`create_app(served, config)` builds it from its parts; `engine.serving.server.runner` serves
it with uvicorn. Every request goes through the engine's `GenerationQueue` (one generation
at a time, in order, bounded: 503 with Retry-After beyond it), so the desktop app's chat and
the server share one engine safely. Errors are bodies in the shape of the API called
(`error_shapes`), never a dead server.

Parts: `config` (ServedModel, ServerConfig), `errors` (ApiError, handlers, the key check),
`generation` (the completion endpoints), `infill` (/infill), `embeddings` (/v1/embeddings), `listing` (models,
health, metrics), `llama_extras` (llama-server's /tokenize, /detokenize, /props), `middleware` (the body limit, request counting, bugs as 500s, CORS, the Host check of `hosts`),
`other_apis` (the Responses, Ollama and Anthropic APIs, answered through `generation`).
"""

from __future__ import annotations

import threading

from fastapi import FastAPI

from ...decoding.queue import GenerationQueue
from .config import ServedModel, ServerConfig
from .errors import install_error_handlers, key_check
from .embeddings import Embeddings, embeddings_router
from .generation import Completions, completions_router
from .infill import Infill, infill_router
from .listing import listing_router
from .llama_extras import llama_extras_router
from .middleware import install_middleware
from .other_apis import other_api_routers
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
    app.state.stopping = threading.Event()  # set by the runner on shutdown: cut answers say so
    install_error_handlers(app)
    check_key = key_check(config)
    completions = Completions(served, config, queue, metrics, app.state.stopping)
    routers = [completions_router(completions, check_key), infill_router(Infill(completions), check_key),
               embeddings_router(Embeddings(served, config, queue, metrics, app.state.stopping), check_key),
               listing_router(served, config, queue, metrics, check_key), llama_extras_router(served, config, check_key)]
    routers += other_api_routers(served, config, queue, metrics, app.state.stopping, check_key)
    for router in routers:
        app.include_router(router)
    install_middleware(app, metrics, cors_origins=tuple(config.cors_origins), max_body=config.max_body,
                       known=frozenset(r.path for x in routers for r in x.routes),
                       allowed_hosts=tuple(config.allowed_hosts))
    return app
