"""The read-only endpoints: `/v1/models` (the loaded pair and the downloaded ones), `/health`
and `/metrics`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from ...decoding.queue import GenerationQueue
from .config import ServedModel, ServerConfig
from .errors import ApiError
from .prom import ServerMetrics

log = logging.getLogger("tandem.server")


def downloaded_pairs(exclude: set[str]) -> list[dict[str, Any]]:
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


async def model_entries(served: ServedModel, config: ServerConfig) -> list[dict[str, Any]]:
    """The loaded model first (with its context and defaults), then the downloaded pairs."""
    eng = served.engine
    target = Path(eng.target.path)
    try:
        created = int(target.stat().st_mtime)
    except OSError:
        created = 0
    loaded = {"id": served.id, "object": "model", "created": created, "owned_by": "tandem", "loaded": True,
              "target": target.name, "draft": served.default_draft, "n_ctx": eng.n_ctx,
              "lookahead": served.lookahead}
    others = await run_in_threadpool(downloaded_pairs, {served.id}) if config.list_catalog else []
    return [loaded, *others]


def listing_router(served: ServedModel, config: ServerConfig, queue: GenerationQueue, metrics: ServerMetrics,
                   check_key: Callable[..., Any]) -> APIRouter:
    router = APIRouter()
    auth = [Depends(check_key)]

    @router.get("/v1/models", dependencies=auth)
    @router.get("/models", dependencies=auth, include_in_schema=False)
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": await model_entries(served, config)}

    @router.get("/v1/models/{model_id:path}", dependencies=auth)
    async def model(model_id: str) -> dict[str, Any]:
        for m in await model_entries(served, config):
            if m["id"] == model_id or (m["loaded"] and model_id in served.names()):
                return m
        raise ApiError(404, f"the model '{model_id}' does not exist here", param="model", code="model_not_found")

    @router.get("/health")
    async def health() -> Any:
        """`busy` whenever the engine has work: a generation running, requests in line, or
        requests whose prompt is being counted (`preparing`), which also costs CPU."""
        lost = getattr(served.engine, "lost", None)  # a split target (tandem serve --rpc) whose worker is gone
        if lost is not None:
            return JSONResponse({"status": "error", "model": served.id, "error": str(lost)}, status_code=503)
        running, waiting, preparing = queue.running is not None, queue.waiting, queue.preparing
        return {"status": "ok", "model": served.id, "busy": running or bool(waiting or preparing),
                "running": running, "waiting": waiting, "preparing": preparing}

    @router.get("/metrics", dependencies=auth)
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=metrics.content_type)

    return router
