"""`POST /v1/embeddings`: mean-pooled, normalised vectors from the served target.

Each request takes a place in the engine's `GenerationQueue` like a generation (the same
limit, the same 503 beyond it) and runs on the engine's generation thread in its turn, so an
embedding never runs at the same time as a generation on the same model. Inputs are counted
before the request takes its place in line: one too long for the context is a 400
(`context_length_exceeded`) and costs nobody a wait.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from typing import Any, Callable, Sequence

import numpy as np
from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from ....decoding.queue import Job
from ....llamacpp.rpc_backend import RpcError
from ....errors import Cancelled, EmbeddingsUnsupported, PromptTooLong, TandemError
from ..answer import AnswerCore
from ..bridge import GenerationFailed
from ..errors import ApiError, engine_error, failure
from ..redact import scrub
from ..schemas import EmbeddingRequest

log = logging.getLogger("tandem.server")


def too_long(i: int, n: str, n_ctx: int) -> ApiError:
    return ApiError(400, f"input {i} is {n} tokens, too large for the context of {n_ctx} tokens: shorten it, "
                         "or start the server with a larger --ctx", param="input", code="context_length_exceeded")


def encode(vector: np.ndarray, fmt: str) -> Any:
    """OpenAI's two encodings: a list of floats, or the little-endian float32 bytes in base64."""
    if fmt == "base64":
        return base64.b64encode(np.ascontiguousarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return vector.tolist()


def _settle(fut: asyncio.Future, result: Any = None, error: BaseException | None = None) -> None:
    if fut.done():  # the request went away meanwhile
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


class Embeddings:
    """The embeddings endpoint of one served engine."""

    def __init__(self, core: AnswerCore):
        """Over the answer core's checks and queue (embeddings are no answer: they run in a turn
        of their own, not as a generation)."""
        self.core = core
        self.served, self.queue, self.metrics, self.stopping = core.served, core.queue, core.metrics, core.stopping
        self.eng = core.eng

    def check(self, req: EmbeddingRequest) -> None:
        """The model name, whether this model embeds at all, and `dimensions`."""
        self.core.check_model(req.model)
        why = self.eng.embeddings_refusal()
        if why is not None:
            raise ApiError(400, scrub(why, self.served), param="model", code="embeddings_unsupported")
        n_embd = self.eng.target.n_embd
        if req.dimensions is not None and req.dimensions != n_embd:
            raise ApiError(400, f"dimensions: this model's embeddings have {n_embd} dimensions and cannot be "
                                f"shortened to {req.dimensions} (omit dimensions, or send {n_embd})",
                           param="dimensions", code="invalid_value")

    def tokens(self, inputs: Sequence[Any]) -> list[list[int]]:
        """Each input's tokens (texts tokenised, token ids checked), or a 400 naming the input."""
        n_ctx, n_vocab = self.eng.n_ctx, self.eng.target.n_vocab
        out = []
        for i, x in enumerate(inputs):
            if isinstance(x, str):
                try:
                    toks = self.eng.embedding_tokens(x, limit=n_ctx)
                except PromptTooLong as e:
                    raise too_long(i, f"at least {e.at_least:,}", n_ctx)
            else:
                bad = next((t for t in x if t >= n_vocab), None)
                if bad is not None:
                    raise ApiError(400, f"input {i}: token id {bad} is outside the vocabulary (0..{n_vocab - 1})",
                                   param="input", code="invalid_value")
                toks = list(x)
            if not toks:
                raise ApiError(400, f"input {i} has no tokens: nothing to embed", param="input", code="invalid_value")
            if len(toks) > n_ctx:
                raise too_long(i, f"{len(toks):,}", n_ctx)
            out.append(toks)
        return out

    async def create(self, request: Request, req: EmbeddingRequest) -> dict[str, Any]:
        self.check(req)
        job = self.core.admit("embeddings", uuid.uuid4().hex[:24], own_context=True)
        try:
            token_lists = await run_in_threadpool(self.tokens, req.input)
        except RpcError as e:
            self.queue.finish(job)
            raise failure(GenerationFailed(str(e), user=False, lost_worker=True), self.served)
        except TandemError as e:
            self.queue.finish(job)
            raise engine_error(e, self.served, param="input")
        except BaseException:
            self.queue.finish(job)
            raise
        self.queue.ready(job)
        vectors = await self.run(request, job, token_lists)
        n_tokens = sum(len(t) for t in token_lists)
        self.metrics.embedding_tokens.inc(n_tokens)
        return {"object": "list", "model": self.served.id,
                "data": [{"object": "embedding", "index": i, "embedding": encode(v, req.encoding_format)}
                         for i, v in enumerate(vectors)],
                "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}}

    async def run(self, request: Request, job: Job, token_lists: list[list[int]]) -> list[np.ndarray]:
        """Embed in `job`'s turn on the generation thread; a client that goes away cancels it."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()

        def work() -> None:
            try:
                with self.queue.turn(job):
                    result = self.eng.embed(token_lists, cancel=job.cancel)
                loop.call_soon_threadsafe(_settle, fut, result)
            except BaseException as e:  # handed to the request; the worker lives on
                try:
                    loop.call_soon_threadsafe(_settle, fut, None, e)
                except RuntimeError:  # the loop is closed: nobody listens
                    pass

        self.queue.run_on_worker(work)
        try:
            while not fut.done():
                await asyncio.wait({fut}, timeout=0.25)
                if not fut.done() and (self.stopping.is_set() or await request.is_disconnected()):
                    job.cancel.cancel()
            return fut.result()
        except Cancelled:
            raise ApiError(503, "the embeddings request was cancelled (the server is stopping)",
                           type="server_error", code="cancelled")
        except EmbeddingsUnsupported as e:
            raise ApiError(400, scrub(str(e), self.served), param="model", code="embeddings_unsupported")
        except RpcError as e:
            raise failure(GenerationFailed(str(e), user=False, lost_worker=True), self.served)
        except TandemError as e:  # a context that cannot be made is the server's trouble (5xx), not the input's
            raise engine_error(e, self.served, param="input")
        except Exception as e:
            log.exception("embedding failed")
            raise ApiError(500, scrub(f"{type(e).__name__}: {e}", self.served), type="server_error")
        finally:
            job.cancel.cancel()  # leaves the line if it never started


def embeddings_router(embeddings: Embeddings, check_key: Callable[..., Any]) -> APIRouter:
    router = APIRouter(dependencies=[Depends(check_key)])

    @router.post("/v1/embeddings")
    @router.post("/embeddings", include_in_schema=False)
    async def create_embeddings(request: Request, body: EmbeddingRequest) -> Any:
        return await embeddings.create(request, body)

    return router
