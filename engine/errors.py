"""Typed errors: every failure a user can cause has its own class and a one-line message.

The CLI turns any `TandemError` into that line and exit code 2; the GUI shows it in the
window. Messages name the file and the cause, never a traceback.
"""

from __future__ import annotations


class TandemError(Exception):
    """Base class for errors caused by input, files or the environment (not bugs)."""


class ModelFileError(TandemError):
    """A model path is missing, empty, not GGUF, truncated or otherwise unreadable."""


class ModelLoadError(TandemError):
    """llama.cpp refused to load a file that looked valid (unsupported arch, out of memory)."""


class IncompatiblePairError(TandemError):
    """The draft cannot propose tokens for the target: their vocabularies differ."""

    def __init__(self, message: str, reasons: list[str] | None = None):
        super().__init__(message)
        self.reasons = list(reasons or [])


class PromptError(TandemError):
    """The prompt is empty or does not fit in the context window."""


class PromptTooLong(PromptError):
    """The prompt cannot fit in the context: known without counting all of it (`at_least` tokens)."""

    def __init__(self, at_least: int, n_ctx: int):
        super().__init__(f"the prompt is at least {at_least:,} tokens but the context holds {n_ctx}; "
                         "shorten it or raise the context size")
        self.at_least, self.n_ctx = at_least, n_ctx


class DecodeError(TandemError):
    """llama.cpp failed while evaluating tokens (for example, out of KV space)."""


class UnsupportedModelError(TandemError):
    """The model cannot be used for speculation (recurrent/hybrid: its state cannot be rolled back)."""


class EmbeddingsUnsupported(TandemError):
    """The model (or the engine holding it) cannot give embeddings: an encoder model, or a
    target split over RPC workers."""


class StoreError(TandemError):
    """Downloading, verifying or locating a model file failed."""


class Cancelled(TandemError):
    """The user cancelled an operation (download, prefill)."""


class NonFiniteLogits(DecodeError):
    """The model's scores for the next token are NaN or +inf: its file is damaged (NaN
    weights, a corrupt row) or its weights overflow. The model's fault, not the request's:
    a server answers it with a 5xx. `found` builds the message; the plain constructor takes
    a finished one (an error passed back from a child process)."""

    kind = "NaN"  # or "infinite"

    @classmethod
    def found(cls, kind: str, model: str | None = None) -> "NonFiniteLogits":
        where = f"{model}: " if model else ""
        e = cls(f"{where}the model produced {kind} logits (its scores for the next token are not numbers): "
                "the file is damaged or its weights overflow; download or convert it again")
        e.kind = kind
        return e


class DocumentError(TandemError):
    """A file that cannot be attached as text: unreadable, too large, an image, a scanned
    PDF without a text layer, or a format no reader is installed for. One line naming it."""


class DocumentErrors(DocumentError):
    """Several files refused at once: one message, one line per file."""

    def __init__(self, errors: list[DocumentError]):
        self.errors = list(errors)
        super().__init__("; ".join(str(e) for e in self.errors) if len(self.errors) < 2 else
                         f"{len(self.errors)} files cannot be attached: " + "; ".join(str(e) for e in self.errors))
