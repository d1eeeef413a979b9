"""Ollama's model endpoints: `/api/tags` and `/api/ps` (the loaded model and its aliases),
`/api/show` (its details and chat template) and `/api/version`.

Ollama names carry a tag (`name:latest`); a name with `:latest` is the name without it.
`digest` is a fingerprint of the file's path, size and time, not a hash of its bytes (that
would read gigabytes per listing)."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any, Callable

from starlette.concurrency import run_in_threadpool

from ....models.gguf_header import describe, read_header
from ..answer import AnswerCore
from .translate import read_body
from ..errors import ApiError
from ..fim import fim_tokens_of

OLLAMA_API_VERSION = "0.9.0"  # the Ollama API level these endpoints follow (tools, format as a schema)
KEEP_ALIVE_S = 10 * 365 * 24 * 3600  # a served model stays loaded for the server's life


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class OllamaModels:
    """What the server lists in Ollama's shape, read from the served target."""

    def __init__(self, core: AnswerCore):
        self.core = core
        self._details: dict[str, Any] | None = None

    @property
    def served(self) -> Any:
        return self.core.served

    def check(self, name: str | None) -> str:
        """The served name this request's model means (404 for one this server does not serve)."""
        if name and name.endswith(":latest") and name.removesuffix(":latest") in self.served.names():
            name = name.removesuffix(":latest")
        self.core.check_model(name)
        return name or self.served.id

    def _path(self) -> Path:
        return Path(self.served.engine.target.path)

    def _header(self) -> Any:
        return getattr(self.served.engine.target, "header", None) or read_header(self._path(), arrays=False)

    def details(self) -> dict[str, Any]:
        """Ollama's `details` (format, family, parameter size, quantization), read once."""
        if self._details is None:
            header = self._header()
            rows = dict(describe(header))
            params = rows.get("parameters", "").split(" / ")[-1].replace(" ", "")
            arch = header.architecture
            self._details = {"parent_model": "", "format": "gguf", "family": arch, "families": [arch],
                             "parameter_size": params, "quantization_level": rows.get("quantization", "")}
        return self._details

    def entry(self, name: str) -> dict[str, Any]:
        path = self._path()
        try:
            st = path.stat()
            size, mtime = st.st_size, st.st_mtime
        except OSError:
            size, mtime = 0, 0.0
        digest = hashlib.sha256(f"{path}:{size}:{mtime}".encode()).hexdigest()
        return {"name": name, "model": name, "modified_at": _iso(mtime), "size": size, "digest": digest,
                "details": self.details()}

    def tags(self) -> dict[str, Any]:
        return {"models": [self.entry(n) for n in self.served.listed_ids()]}

    def ps(self) -> dict[str, Any]:
        gpu = getattr(self.served.engine.target, "n_gpu_layers", 0) or 0
        out = []
        for name in self.served.listed_ids():
            e = self.entry(name)
            out.append({**e, "expires_at": _iso(time.time() + KEEP_ALIVE_S), "size_vram": e["size"] if gpu else 0,
                        "context_length": self.served.engine.n_ctx})
        return {"models": out}

    def show(self, name: str | None) -> dict[str, Any]:
        shown = self.check(name)
        eng = self.served.engine
        header = self._header()
        arch = header.architecture
        info: dict[str, Any] = {"general.architecture": arch, "general.name": eng.target.name,
                                f"{arch}.context_length": header.arch_value("context_length"),
                                "tandem.n_ctx": eng.n_ctx, "tandem.draft": self.served.default_draft,
                                "tandem.lookahead": self.served.lookahead}
        capabilities = ["completion", "tools"]
        if fim_tokens_of(eng.target) is not None:  # Ollama's word for fill-in-the-middle (`suffix`)
            capabilities.append("insert")
        refusal = getattr(eng, "embeddings_refusal", lambda: "")()
        if refusal is None:
            capabilities.append("embedding")
        return {"modelfile": f"# served by Tandem as {shown}\nFROM {self._path().name}\n", "parameters": "",
                "template": eng.target.chat_template or "", "details": self.details(), "model_info": info,
                "capabilities": capabilities, "modified_at": self.entry(shown)["modified_at"]}


def models_routes(route: Callable[[str, str, Callable[..., Any]], None], models: OllamaModels) -> None:
    """Add the model endpoints with `route(method, path, handler)`."""

    async def version(request: Any) -> dict[str, Any]:
        return {"version": OLLAMA_API_VERSION}

    async def tags(request: Any) -> dict[str, Any]:
        return await run_in_threadpool(models.tags)

    async def ps(request: Any) -> dict[str, Any]:
        return await run_in_threadpool(models.ps)

    async def show(request: Any) -> dict[str, Any]:
        body = await read_body(request)
        name = body.get("model") or body.get("name")
        if not isinstance(name, str) or not name:
            raise ApiError(400, "model: this field is required")
        return await run_in_threadpool(models.show, name)

    route("GET", "/api/version", version)
    route("GET", "/api/tags", tags)
    route("GET", "/api/ps", ps)
    route("POST", "/api/show", show)
