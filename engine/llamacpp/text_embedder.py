"""An embedding GGUF loaded for texts: what the Library embeds its passages and questions with
(it fits engine/library/vectors.py's `Embedder`). The vectors come from the engine's one
embedding path, `EmbeddingContext` (an encoder pooled as it declares, a generation model
mean-pooled as /v1/embeddings does); this adds the model's task prefixes, cuts a text to the
context, and names the model so an index knows when its vectors were made by another.

`library_embedder` picks the model: one named (a path or a catalog id), or the catalog's
embedding model when it is on disk; none (text ranking alone) otherwise.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from ..errors import EmbeddingsUnsupported, ModelFileError, TandemError
from .embedding import EmbeddingContext
from .llama import Closing, Model, load_model
from .runtime import RuntimeParams

if TYPE_CHECKING:
    from ..models.catalog import Catalog, ModelSpec

EMBED_CTX = 1024  # tokens read of one text: a Library passage is about 300 (chunks.PASSAGE_CHARS)
OFF = ("none", "off")  # what turns the vector ranking off where a model could be named


class TextEmbedder(Closing):
    """A loaded embedding model with its context; one text at a time (a lock: the Library's
    update and a search may ask from two threads)."""

    def __init__(self, path: str | os.PathLike[str], *, query_prefix: str = "", document_prefix: str = "",
                 n_threads: int | None = None, n_gpu_layers: int | None = None):
        self.path = Path(path)
        self.query_prefix, self.document_prefix = query_prefix, document_prefix
        self._lock = threading.Lock()
        self._model: Model | None = load_model(self.path, runtime=RuntimeParams(n_gpu_layers=n_gpu_layers))
        try:
            ctx = min(EMBED_CTX, self._model.n_ctx_train) if self._model.n_ctx_train > 0 else EMBED_CTX
            self._ctx: EmbeddingContext | None = EmbeddingContext(
                self._model, RuntimeParams(n_ctx=ctx, n_batch=min(512, ctx), n_threads=n_threads))
        except EmbeddingsUnsupported as e:
            self._model.close()
            raise EmbeddingsUnsupported(f"{self.path.name} cannot embed the Library's passages: {e}") from None
        except BaseException:
            self._model.close()
            raise
        self.dims: int = self._ctx.n_embd
        self.name: str = model_identity(self.path)

    def embed(self, texts: Sequence[str], *, query: bool = False,
              stop: Callable[[], bool] | None = None) -> np.ndarray:
        """One L2-normalised float32 row per text (a question with `query`, else a passage); a
        text longer than the context is cut to it. `stop()` True ends it with `Cancelled`."""
        prefix = self.query_prefix if query else self.document_prefix
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        with self._lock:
            if self._ctx is None or self._model is None:
                raise TandemError(f"{self.path.name}: the embedding model was closed")
            for i, text in enumerate(texts):
                tokens = self._model.tokenize(prefix + text, add_special=True, parse_special=False)
                out[i] = self._ctx.embed(tokens[: self._ctx.n_ctx] or [self._model.bos], stop)
        return out

    def close(self) -> None:
        with self._lock:
            if getattr(self, "_ctx", None) is not None:
                self._ctx.close()
                self._ctx = None
            if getattr(self, "_model", None) is not None:
                self._model.close()
                self._model = None


def model_identity(path: Path) -> str:
    """The name an index keeps beside its vectors: the file's name, size and a sample of its
    content (another model, or this one requantised, makes the vectors be rebuilt)."""
    from ..models.store import sample_digest

    return f"{path.name} {path.stat().st_size} {sample_digest(path)[:16]}"


def library_embedder(choice: str | None, *, n_threads: int | None = None) -> TextEmbedder | None:
    """The Library's embedding model: `choice` a GGUF path or a catalog model id (its prefixes
    taken from the catalog); None: the catalog's embedding model when it is downloaded, else
    None (text ranking alone); "none"/"off": None. A file that cannot embed is one line."""
    from ..models import catalog, store
    from ..models.resolve import model_file

    if choice is not None and choice.strip().lower() in OFF:
        return None
    try:
        cat = catalog.load()
    except TandemError:
        cat = None
    if choice is None:
        for spec in cat.embedding_models if cat is not None else ():
            path = store.locate_model(spec)
            if path is not None:
                return TextEmbedder(path, query_prefix=spec.query_prefix, document_prefix=spec.document_prefix,
                                    n_threads=n_threads)
        return None
    path = model_file(choice, "embedding model")
    if not path.is_file():
        raise ModelFileError(f"embedding model {choice!r}: no such file")
    spec = _catalog_spec(cat, choice, path)
    return TextEmbedder(path, query_prefix=spec.query_prefix if spec else "",
                        document_prefix=spec.document_prefix if spec else "", n_threads=n_threads)


def _catalog_spec(cat: Catalog | None, choice: str, path: Path) -> ModelSpec | None:
    """The catalog's embedding model `choice` names (its id, or its file's name), or None."""
    for spec in cat.embedding_models if cat is not None else ():
        if choice == spec.id or path.name in {f.filename for f in spec.files}:
            return spec
    return None
