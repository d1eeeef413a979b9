"""llama-server's own small endpoints that editors and scripts call beside the OpenAI API:
`POST /tokenize`, `POST /detokenize` and `GET /props`, in llama-server's request and answer
shapes (its README, tools/server). Tokens are the target's: the ids a prompt, `logit_bias`
or a token-id prompt uses. `/props` is read-only (llama-server's `POST /props` needs its
`--props` flag and changes nothing yet either)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Union

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr
from starlette.concurrency import run_in_threadpool

from ....decoding.prompting.prompt_text import clean
from ..config import ServedModel, ServerConfig
from ..errors import ApiError

if TYPE_CHECKING:  # pragma: no cover
    from ....decoding.slots.scheduler import SlotScheduler

RANDOM_SEED = 0xFFFFFFFF  # llama.cpp's LLAMA_DEFAULT_SEED: each request draws its own


class TokenizeRequest(BaseModel):
    """llama-server's defaults: no BOS, control-token text parsed as control tokens."""

    model_config = ConfigDict(extra="allow")  # llama-server's router reads 'model'; one model here
    content: Union[StrictStr, list[Union[StrictStr, StrictInt]]]
    add_special: StrictBool = False
    parse_special: StrictBool = True
    with_pieces: StrictBool = False


class DetokenizeRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    tokens: list[StrictInt] = []


def _check_ids(ids: list[int], n_vocab: int, param: str) -> None:
    bad = next((t for t in ids if not 0 <= t < n_vocab), None)
    if bad is not None:
        raise ApiError(400, f"{bad} is not a token id of this model (0..{n_vocab - 1})", param=param,
                       code="invalid_value")


def tokens_of(target: Any, req: TokenizeRequest) -> list[int]:
    """llama.cpp's `tokenize_mixed`: texts and token ids in order; `add_special` only at the start."""
    parts = [req.content] if isinstance(req.content, str) else req.content
    ids = [p for p in parts if isinstance(p, int)]
    _check_ids(ids, target.n_vocab, "content")
    out: list[int] = []
    for i, part in enumerate(parts):
        if isinstance(part, int):
            out.append(part)
        else:  # lone surrogates, which JSON can carry, as U+FFFD
            out += target.tokenize(clean(part)[0], add_special=req.add_special and i == 0,
                                   parse_special=req.parse_special)
    return out


def piece_of(target: Any, token: int) -> Union[str, list[int]]:
    """A token's text, control tokens as written; a piece that is not whole UTF-8 (one byte
    of a character) as its list of bytes, as llama-server answers it."""
    raw = target.piece(token, special=True)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return list(raw)


def build_info() -> str:
    """Tandem's version and the llama.cpp build under it, from the installed packages."""

    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "unknown"

    return f"tandem-{version('tandem-studio')} llama-cpp-python-{version('llama_cpp_python')}"


def props(served: ServedModel, config: ServerConfig) -> dict[str, Any]:
    """llama-server's `GET /props` fields that mean something here: the slots (`--parallel`: one
    unless asked), the defaults a request gets, the model file and its chat template."""
    eng = served.engine

    speculative = served.default_draft != "none"
    lookahead = served.lookahead if isinstance(served.lookahead, int) else 16  # auto: up to 16
    params = {"n_predict": -1, "seed": RANDOM_SEED, "temperature": config.temperature, "top_k": 0, "top_p": 1.0,
              "min_p": 0.0, "stop": [], "max_tokens": -1, "stream": False, "grammar": "", "n_probs": 0,
              "speculative.n_max": lookahead if speculative else 0, "speculative.n_min": 0,
              "tandem.draft": served.default_draft, "tandem.lookahead": served.lookahead}
    return {
        "default_generation_settings": {"id": 0, "id_task": -1, "n_ctx": eng.n_ctx, "speculative": speculative,
                                        "is_processing": served.engine.queue.running is not None, "params": params},
        "total_slots": config.parallel,
        "model_alias": served.id,
        "model_path": str(Path(eng.target.path)),
        "chat_template": eng.target.chat_template or "",
        "chat_template_caps": {},
        "modalities": {"vision": False, "audio": False},
        "build_info": build_info(),
        "is_sleeping": False,
    }


def slots_listing(served: ServedModel, slots: SlotScheduler | None) -> list[dict[str, Any]]:
    """llama-server's `GET /slots`: each slot, its context and whether it answers now."""
    eng = served.engine
    if slots is None:
        busy, n_ctx = [eng.queue.running is not None], eng.n_ctx
    else:
        busy, n_ctx = slots.busy(), slots.shared.n_ctx_seq
    speculative = served.default_draft != "none"
    return [{"id": i, "id_task": -1, "n_ctx": n_ctx, "speculative": speculative, "is_processing": b}
            for i, b in enumerate(busy)]


def llama_extras_router(served: ServedModel, config: ServerConfig, check_key: Callable[..., Any],
                        slots: SlotScheduler | None = None) -> APIRouter:
    router = APIRouter()
    auth = [Depends(check_key)]
    target = served.engine.target

    @router.post("/tokenize", dependencies=auth)
    async def tokenize(req: TokenizeRequest) -> dict[str, Any]:
        ids = await run_in_threadpool(tokens_of, target, req)
        if req.with_pieces:
            return {"tokens": [{"id": t, "piece": piece_of(target, t)} for t in ids]}
        return {"tokens": ids}

    @router.post("/detokenize", dependencies=auth)
    async def detokenize(req: DetokenizeRequest) -> dict[str, Any]:
        _check_ids(req.tokens, target.n_vocab, "tokens")
        raw = b"".join(target.piece(t, special=True) for t in req.tokens)
        return {"content": raw.decode("utf-8", errors="replace")}

    @router.get("/props", dependencies=auth)
    async def get_props() -> dict[str, Any]:
        return props(served, config)

    @router.get("/slots", dependencies=auth)
    async def get_slots() -> list[dict[str, Any]]:
        return slots_listing(served, slots)

    return router
