"""The read-only endpoints: `/v1/models` (what can be served now: the loaded model and its
aliases), `/health` and `/metrics`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from ....decoding.queue import GenerationQueue
from ..config import ServedModel, ServerConfig, model_not_found
from ..prom import ServerMetrics

def model_entries(served: ServedModel) -> list[dict[str, Any]]:
    """The loaded model (with its context and defaults), then one entry per alias: only names a
    request can use now (a downloaded but unloaded pair would be refused, so it is not listed)."""
    eng = served.engine
    target = Path(eng.target.path)
    try:
        created = int(target.stat().st_mtime)
    except OSError:
        created = 0
    base = {"object": "model", "created": created, "owned_by": "tandem", "loaded": True,
            "target": target.name, "draft": served.default_draft, "n_ctx": eng.n_ctx, "lookahead": served.lookahead}
    return [{"id": name, **base, **({} if name == served.id else {"alias_of": served.id})}
            for name in served.listed_ids()]


def listing_router(served: ServedModel, config: ServerConfig, queue: GenerationQueue, metrics: ServerMetrics,
                   check_key: Callable[..., Any]) -> APIRouter:
    router = APIRouter()
    auth = [Depends(check_key)]

    @router.get("/v1/models", dependencies=auth)
    @router.get("/models", dependencies=auth, include_in_schema=False)
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": model_entries(served)}

    @router.get("/v1/models/{model_id:path}", dependencies=auth)
    @router.get("/models/{model_id:path}", dependencies=auth, include_in_schema=False)
    async def model(model_id: str) -> dict[str, Any]:
        entries = model_entries(served)
        for m in entries:
            if m["id"] == model_id:
                return m
        if model_id in served.names() or config.any_model_name:
            return {**entries[0], "id": model_id, "alias_of": served.id}
        raise await run_in_threadpool(model_not_found, model_id, served, config)

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
