"""An OpenAI-compatible HTTP server over Tandem's engine (needs the `server` extra).

    from engine import Engine
    from engine.serving.server import ServedModel, ServerThread, create_app
    eng = Engine("target.gguf")
    app = create_app(ServedModel(eng, "my-pair", draft="draft.gguf", lookahead="auto"))
    with ServerThread(app, port=8080) as srv:
        print(srv.url)                          # http://127.0.0.1:8080, API under /v1

Modules: `schemas` (request validation), `wire` (OpenAI response shapes, usage and
timings), `bridge` (worker thread -> event loop), `prom` (/metrics), `app` (builds the app from
`config`, `errors`, `generation`, `listing`, `middleware`), `error_shapes` (each API's error
body, by path), `json_body` (the body reader and its depth limit), `hosts` and `origins`
(the Host and Origin checks),
`runner` (uvicorn, foreground or on a thread). Qt-free. May import engine.serving.tools,
engine.decoding, engine.llamacpp, engine.models and the top-level helpers.
"""

from __future__ import annotations

from .app import ServedModel, ServerConfig, create_app
from .runner import ServerError, ServerThread, is_loopback, serve_forever

__all__ = ["ServedModel", "ServerConfig", "create_app", "ServerThread", "ServerError", "serve_forever", "is_loopback"]
