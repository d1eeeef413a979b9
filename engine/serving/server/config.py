"""What one server serves and how: the loaded engine with its id and default draft, the limits, and
its parallel slots (`--parallel N`)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence, Union
from urllib.parse import urlsplit

from ...decoding.drafting.choice import DraftChoice
from ...llamacpp.llama import Model
from ...errors import TandemError
from .errors import ApiError

log = logging.getLogger("tandem.server")

DEFAULT_MAX_BODY = 4 * 1024 * 1024  # 4 MiB: a full 128K-token conversation is well under 1 MiB of JSON


@dataclass
class ServedModel:
    """What the server serves: one loaded engine, its public id and its default draft."""

    engine: Any  # engine.Engine
    id: str
    draft: Union[str, os.PathLike, Model, None] = None  # a draft model (path/Model), "lookup" or None
    lookahead: Union[int, str] = "auto"  # for requests that do not say
    aliases: tuple[str, ...] = ()  # extra names clients may use (`tandem serve --alias`), listed in /v1/models
    catalog_id: str | None = None  # the target's catalog model id, when it is a catalog model

    @property
    def has_draft_model(self) -> bool:
        return DraftChoice.parse(self.draft).keyword is None

    @property
    def default_draft(self) -> str:
        """The wire name of the draft requests get when they name none: "model", "lookup" or "none"."""
        return DraftChoice.parse(self.draft).keyword or "model"

    def names(self) -> set[str]:
        """Every name this model answers to: its id, its file name (with and without .gguf),
        its catalog id and its aliases."""
        target = Path(self.engine.target.path)
        return {self.id, target.name, target.stem, *self.aliases} | ({self.catalog_id} if self.catalog_id else set())

    def listed_ids(self) -> list[str]:
        """The ids /v1/models lists: the id, then the aliases (each one servable now)."""
        return list(dict.fromkeys([self.id, *self.aliases]))


@dataclass
class ServerConfig:
    api_key: str | None = None
    max_waiting: int = 16  # requests allowed to wait behind the running one
    parallel: int = 1  # requests answered side by side in slots of one context (parallel_slots, below)
    temperature: float = 1.0  # when a request does not say (OpenAI's default)
    list_catalog: bool = True  # an unknown model's 404 says when it is a downloaded but unloaded pair
    any_model_name: bool = False  # answer to every model name (tools with a hard-coded one)
    cors_origins: tuple[str, ...] = ()  # browser origins allowed to call the API ("*": any; see check_cors)
    max_body: int = DEFAULT_MAX_BODY  # bytes; larger request bodies get 413 before they are read (0: no limit)
    allowed_hosts: tuple[str, ...] = ()  # Host names answered beyond localhost and the bound address (hosts.py)
    early_role_chunk: bool = False  # stream the role chunk before the prompt is read (the old timing)
    fetch_image_urls: bool = False  # fetch pictures named by http(s) URL (doors/image_urls.py); else refuse them
    library: Any = None  # an engine.library.Library asked by `"library": true` (--library DIR; the caller closes it)
    extra: dict[str, Any] = field(default_factory=dict)


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


def with_loopback_twins(origins: tuple[str, ...]) -> tuple[str, ...]:
    """The origins, each loopback one also under the other loopback names with the same scheme
    and port: a page the user opened as http://127.0.0.1:3000 is the same local page as
    http://localhost:3000, and browsers send whichever name is in the address bar."""
    out: list[str] = []
    for o in origins:
        out.append(o)
        try:
            parts = urlsplit(o)
            port = f":{parts.port}" if parts.port is not None else ""
        except ValueError:  # not an origin a browser sends; kept as given
            continue
        host = f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else parts.hostname
        if host in LOOPBACK_NAMES and parts.scheme in ("http", "https") and not (parts.path or parts.query):
            out += [f"{parts.scheme}://{twin}{port}" for twin in LOOPBACK_NAMES]
    return tuple(dict.fromkeys(out))


def check_cors(origins: tuple[str, ...], *, api_key: str | None, allow_any_origin: bool = False) -> str | None:
    """Why these CORS origins are refused, or None. `*` lets any web page a visitor opens read
    the server's answers from their browser, and a server on loopback is no exception (the
    visitor's browser runs on this machine), so it needs an API key, or the explicit
    `--allow-any-origin-without-key`."""
    for o in origins:
        if o != "*" and not o.startswith(("http://", "https://")):
            return f"--cors-origin {o!r}: an origin is '*' or a scheme and host such as http://localhost:3000"
    if "*" in origins and not (api_key or allow_any_origin):
        return ("--cors-origin '*' without --api-key lets any web page read this server's answers: "
                "add --api-key KEY, name the origins instead, or pass --allow-any-origin-without-key")
    return None


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


def model_not_found(name: str, served: ServedModel, config: ServerConfig) -> ApiError:
    """OpenAI's 404 for a model this server does not serve, saying what it does serve."""
    listed = {p["id"] for p in downloaded_pairs(set())} if config.list_catalog else set()
    hint = (f"'{name}' is downloaded but not loaded: this server runs '{served.id}' (restart it with --pair {name})"
            if name in listed else f"The model '{name}' does not exist: this server runs '{served.id}' "
                                   "(start it with --alias NAME or --any-model-name to accept other names)")
    return ApiError(404, hint, param="model", code="model_not_found")


# -- --parallel N: the answers in N slots of one context, side by side (engine/decoding/slots) ----------
# With N > 1 the server builds one `SlotScheduler` over the served engine's target (each slot holds
# the engine's whole context, so a prompt that fits the engine fits a slot), with the free drafts a
# request may name (and the target's MTP head where it has one); the engine keeps it and frees it
# before its target. Each answer's job runs side
# by side with the others in the engine's queue (the app's chat still runs alone between them).
MAX_PARALLEL = 64
SLOT_DRAFTS = ("none", "lookup", "suffix")


def check_parallel(n: Any) -> int:
    """`--parallel`'s value, or one line saying what is wrong."""
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_PARALLEL:
        raise TandemError(f"--parallel must be a whole number of slots from 1 to {MAX_PARALLEL}, got {n!r}")
    return n


def parallel_slots(served: ServedModel, config: ServerConfig) -> Any:
    """The `SlotScheduler` `config.parallel` asks for (None: one request at a time, as before)."""
    n = check_parallel(config.parallel)
    if n == 1:
        return None
    from ...decoding.engine import Engine  # lazily: the CLI checks its options before llama.cpp loads
    from ...decoding.slots.scheduler import SlotScheduler

    eng = served.engine
    if not isinstance(eng, Engine) or eng.rpc is not None:
        raise TandemError("--parallel needs a target on this machine: a target split over RPC workers runs one "
                          "request at a time")
    runtime = replace(eng.runtime, n_ctx=eng.n_ctx * n)
    drafters = {k: (lambda k=k: eng.slot_drafter(k)) for k in SLOT_DRAFTS}
    if DraftChoice.parse(served.draft).kind.value == "mtp" or getattr(eng.target, "n_nextn", 0) > 0:
        # each slot's own MTP context over the target's head, reading its slot's hidden states
        drafters = {"mtp": lambda: eng.slot_drafter("mtp"), **drafters}
    if served.has_draft_model:  # the slots draft together on one context of the loaded draft model
        drafters = {"model": lambda: eng.slot_drafter(served.draft), **drafters}
    slots = SlotScheduler(eng.target, n, runtime=runtime, drafters=drafters, seed=eng.seed_cost,
                          prompt_cache=eng.prompt_cache, reader=eng.reader)
    eng.attach(slots)
    eng.queue.slots = n
    return slots


def slot_draft_spec(choice: str, parallel: int, drafts: Sequence[str]) -> str:
    """A request's draft in the slots (one of their `drafts`: "model", "lookup", "suffix", "none"),
    or a 400 saying what they run."""
    kind = "model" if choice == "model" else DraftChoice.parse(choice).kind.value
    if kind not in drafts:
        raise ApiError(400, f"draft {choice!r}: the parallel slots (--parallel {parallel}) draft with "
                            f"{', '.join(repr(d) for d in drafts)}", param="draft", code="invalid_value")
    return kind


def checked_pictures(eng: Any, images: tuple) -> tuple:
    """`images`, when this served engine can read them (one at a time or in parallel slots); a
    400 in one line for a target without a projector."""
    if not images or getattr(eng, "projector", None) is not None:
        return images
    from ...decoding.prompting.media import image_refusal

    name = eng.target.path.name if hasattr(eng, "target") else "the model"
    why = image_refusal(name).replace("load it with", "start the server with")
    raise ApiError(400, why, param="messages", code="images_not_supported")
