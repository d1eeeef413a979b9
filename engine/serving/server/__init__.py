"""An OpenAI-compatible HTTP server over Tandem's engine (needs the `server` extra).

    from engine import Engine
    from engine.serving.server import ServedModel, ServerThread, create_app
    eng = Engine("target.gguf")
    app = create_app(ServedModel(eng, "my-pair", draft="draft.gguf", lookahead="auto"))
    with ServerThread(app, port=8080) as srv:
        print(srv.url)                          # http://127.0.0.1:8080, API under /v1

Rooms: `doors/` (where requests enter: Host, Origin, body checks), `answer` (the core every
generating API runs through: checks, one tokenisation, the queue, neutral events), `apis/`
(one module per API, writing those events in its own form), and beside the core `schemas`
(request validation, `image_url` parts included), `wire` (usage, timings, provenance), `bridge` (worker thread -> event
loop), `tool_use`, `fim`, `errors` and `error_shapes`, `config`, `prom` (/metrics), `app`
(builds the app) and `runner` (uvicorn, foreground or on a thread). Qt-free. May import
engine.toolcalls, engine.decoding, engine.llamacpp, engine.models, engine.library (apis/library.py),
engine.documents (pictures) and the top-level helpers.
"""

from __future__ import annotations

from .app import ServedModel, ServerConfig, create_app
from .runner import ServerError, ServerThread, is_loopback, serve_forever

__all__ = ["ServedModel", "ServerConfig", "create_app", "ServerThread", "ServerError", "serve_forever", "is_loopback"]
