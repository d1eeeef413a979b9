"""The FastAPI application: the APIs over one loaded `Engine`.

`create_app(served, config)` builds it from its parts; `engine.serving.server.runner` serves
it with uvicorn. Every request goes through the engine's `GenerationQueue` (one generation
at a time, or with `--parallel N` up to N side by side in slots: config.py; in order,
bounded: 503 with Retry-After beyond it), so the desktop app's chat and
the server share one engine safely. Errors are bodies in the shape of the API called
(`error_shapes`), never a dead server.

Parts: `doors` (where requests enter: Host and Origin checks, body limits, CORS), `answer`
(the core every generating API runs through), `apis` (one module per API, each writing the
core's events in its own form), `config`, `errors`, `prom`.
"""

from __future__ import annotations

import threading

from fastapi import FastAPI

from ...decoding.queue import GenerationQueue
from .answer import AnswerCore
from .apis.anthropic import Messages, anthropic_router
from .apis.embeddings import Embeddings, embeddings_router
from .apis.infill import Infill, infill_router
from .apis.library import FolderAnswers, library_router
from .apis.listing import listing_router
from .apis.llama_extras import llama_extras_router
from .apis.ollama import Ollama, ollama_router
from .apis.ollama_models import OllamaModels
from .apis.openai import Completions, completions_router
from .apis.responses import Responses, responses_router
from .config import ServedModel, ServerConfig, parallel_slots
from .doors.middleware import install_middleware
from .errors import install_error_handlers, key_check
from .prom import ServerMetrics

__all__ = ["ServedModel", "ServerConfig", "create_app"]


def create_app(served: ServedModel, config: ServerConfig | None = None) -> FastAPI:
    """The ASGI app for one served engine (the engine stays the caller's to close)."""
    config = config or ServerConfig()
    queue: GenerationQueue = served.engine.queue
    queue.max_waiting = config.max_waiting
    slots = parallel_slots(served, config)  # None: one answer at a time
    metrics = ServerMetrics(queue, slots)
    app = FastAPI(title="Tandem", description="OpenAI-compatible local speculative decoding", version="1",
                  docs_url=None, redoc_url=None, openapi_url=None)
    app.state.served, app.state.config, app.state.queue, app.state.metrics = served, config, queue, metrics
    app.state.slots = slots  # the engine keeps them (attached); a host stopping early closes them (detach_slots)
    app.state.stopping = threading.Event()  # set by the runner on shutdown: cut answers say so
    install_error_handlers(app)
    check_key = key_check(config)
    core = AnswerCore(served, config, queue, metrics, app.state.stopping, slots=slots)
    embeddings = Embeddings(core)
    folder = FolderAnswers(config.library, served.engine) if config.library is not None else None
    ollama = Ollama(core, embeddings, OllamaModels(core), folder)
    routers = [completions_router(Completions(core, folder), check_key), infill_router(Infill(core), check_key),
               embeddings_router(embeddings, check_key),
               listing_router(served, config, queue, metrics, check_key), llama_extras_router(served, config, check_key, slots),
               responses_router(Responses(core, library=folder), check_key),
               anthropic_router(Messages(core, folder), config),
               ollama_router(ollama, check_key)] + ([library_router(folder, check_key)] if folder is not None else [])
    for router in routers:
        app.include_router(router)
    install_middleware(app, metrics, cors_origins=tuple(config.cors_origins), max_body=config.max_body,
                       known=frozenset(r.path for x in routers for r in x.routes),
                       allowed_hosts=tuple(config.allowed_hosts), fetch_image_urls=config.fetch_image_urls)
    return app
