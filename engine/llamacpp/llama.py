"""The one seam over llama-cpp-python's low-level ctypes API.

Everything else in Tandem talks to `Model` and `Context`. We skip `llama_cpp.Llama`
because its draft-model mode forces `logits_all` (an n_ctx x n_vocab float array), hides
which tokens were accepted, and `Llama.__init__` allocates an n_batch x n_vocab score
array (about 300 MB for Qwen's 152k vocabulary) per model.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections import deque
from pathlib import Path
from typing import Any, Callable, Sequence


from ..errors import Cancelled, DecodeError, ModelFileError, ModelLoadError
from ..models.gguf_header import GGUFHeader, validate_file
from ..models.hardware import physical_cores
from .backend_dl import ensure_loaded
from .fim import FimTokens, fim_tokens
from .runtime import RuntimeParams, weight_repacking

import llama_cpp  # noqa: E402  (after our imports so import errors name our modules first)

_backend_lock = threading.Lock()
_backend_ready = False
log_tail: deque[str] = deque(maxlen=40)
_log_seen = 0  # lines ever logged: `log_tail` is bounded, so its length cannot tell what is new
_repacked = 0  # weight tensors llama.cpp said it repacked, ever (a load's share: the difference)
_verbose = bool(os.environ.get("TANDEM_DEBUG"))


@llama_cpp.llama_log_callback
def _log_callback(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    """Keep llama.cpp's chatter out of the terminal; remember it for error messages."""
    try:
        line = text.decode("utf-8", errors="replace")
    except Exception:  # pragma: no cover - defensive, callbacks must not raise
        return
    global _log_seen, _repacked
    log_tail.append(line)
    _log_seen += 1
    if line.startswith("repack: repack tensor"):
        _repacked += 1
    if _verbose:
        import sys

        sys.stderr.write(line)


def ensure_backend() -> None:
    """Initialise llama.cpp once per process, with its log routed to `log_tail`, and the
    backends of a portable (backend-DL) build loaded into the libggml libllama uses."""
    global _backend_ready
    with _backend_lock:
        if not _backend_ready:
            llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))
            ensure_loaded(llama_cpp.llama_cpp._lib, Path(llama_cpp.llama_cpp._base_path))
            llama_cpp.llama_backend_init()
            _backend_ready = True


def log_mark() -> int:
    """A mark for `log_since`: how many lines llama.cpp has logged so far."""
    return _log_seen


def log_since(mark: int) -> list[str]:
    """The lines logged after `log_mark()` returned `mark` (the newest 40 at most)."""
    new = min(_log_seen - mark, len(log_tail))
    return list(log_tail)[len(log_tail) - new:] if new > 0 else []


def recent_log_errors() -> str:
    """The most telling recent llama.cpp log line (an error if there is one), for messages."""
    lines = [ln.strip() for ln in log_tail if ln.strip()]
    interesting = [ln for ln in lines if any(w in ln.lower() for w in ("error", "failed", "invalid", "unknown", "not "))]
    return (interesting or lines)[-1] if (interesting or lines) else ""


def supports_gpu_offload() -> bool:
    ensure_backend()
    return bool(llama_cpp.llama_supports_gpu_offload())


def default_threads() -> int:
    """llama.cpp's thread count: the physical cores this process can use.

    Every core computes and waiting threads spin (OpenMP's default; our build ignores
    llama.cpp's `poll`): a core fewer, sleeping, or libgomp's throttling once more threads
    than cores have computed each cost 30-50% of decode speed (docs/benchmarks.md, section
    7). So compute on one thread at a time, on workers, never on the GUI thread.
    """
    return physical_cores()


class Closing:
    """A holder of llama.cpp memory that `close()` frees: collected unclosed, it is freed then
    (at interpreter shutdown modules go in no fixed order, so a failure there is ignored)."""

    def close(self) -> None:  # pragma: no cover - each holder frees its own
        raise NotImplementedError

    def __del__(self) -> None:  # pragma: no cover - interpreter shutdown order varies
        try:
            self.close()
        except Exception:
            pass


def free_context(ctx: Any, batch: Any) -> None:
    """Free a llama context and the batch made for it."""
    llama_cpp.llama_batch_free(batch)
    llama_cpp.llama_free(ctx)


class Model(Closing):
    """A loaded GGUF model: weights, vocabulary and metadata. Thread-safe to read."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        runtime: RuntimeParams | None = None,
        on_progress: Callable[[float], bool] | None = None,
        vocab_only: bool = False,
        devices: Sequence[int] | None = None,
        tensor_split: Sequence[float] | None = None,
        load_mtp: bool | None = None,
        repack: bool | None = None,
    ):
        """`devices` (ggml device handles, see `rpc_add_server`/`local_offload_devices`)
        and `tensor_split` (one weight per device) place the layers explicitly, as
        llama.cpp's `--device`/`--tensor-split` do; None keeps llama.cpp's own choice.
        Of `runtime` a model uses `n_gpu_layers` (None: all layers when llama.cpp can offload).
        `repack` False: the weights as the file has them (llama.cpp's `--no-repack`; `repacked`);
        None: `runtime.weight_repacking()` ($TANDEM_REPACK, on by default)."""
        self.path = Path(path)
        n_gpu_layers = (runtime or RuntimeParams()).n_gpu_layers
        self.header: GGUFHeader = validate_file(self.path)
        ensure_backend()
        if n_gpu_layers is None:
            n_gpu_layers = -1 if llama_cpp.llama_supports_gpu_offload() else 0
        self.n_gpu_layers = n_gpu_layers
        params = llama_cpp.llama_model_default_params()
        params.n_gpu_layers = n_gpu_layers
        params.vocab_only = vocab_only
        self.repack: bool = weight_repacking() if repack is None else repack
        params.use_extra_bufts = self.repack
        # The file's own multi-token-prediction layers (Qwen3.5, GLM, DeepSeek): llama.cpp skips
        # them unless asked; None loads them when the file has any, so "mtp" can draft later.
        params.load_mtp = self.header.mtp_layers > 0 if load_mtp is None else load_mtp
        self._place(params, devices, tensor_split)
        cancelled = False
        if on_progress is not None:

            def _progress(value: float, _data: ctypes.c_void_p) -> bool:
                nonlocal cancelled
                try:
                    keep = on_progress(float(value)) is not False
                except Exception:
                    keep = True
                cancelled = cancelled or not keep
                return keep

            self._progress_cb = llama_cpp.llama_progress_callback(_progress)
            params.progress_callback = self._progress_cb
        log_tail.clear()
        repacked_before = _repacked
        self._model = llama_cpp.llama_model_load_from_file(os.fsencode(self.path), params)
        # Tensors in the CPU's interleaved layouts (plain_reader.py; two loads at once may count both)
        self.repacked: int = _repacked - repacked_before
        if not self._model:
            if cancelled:
                raise Cancelled(f"{self.path}: loading cancelled")
            detail = recent_log_errors() or "unsupported or damaged model"
            raise ModelLoadError(f"{self.path}: llama.cpp could not load the model ({detail})")
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        self.n_vocab: int = llama_cpp.llama_vocab_n_tokens(self._vocab)
        self.n_ctx_train: int = llama_cpp.llama_model_n_ctx_train(self._model)
        self.n_embd: int = int(llama_cpp.llama_model_n_embd_out(self._model))  # an embedding's length
        self.bos: int = llama_cpp.llama_vocab_bos(self._vocab)
        self.eos: int = llama_cpp.llama_vocab_eos(self._vocab)
        self.add_bos: bool = bool(llama_cpp.llama_vocab_get_add_bos(self._vocab))
        self.size_bytes: int = int(llama_cpp.llama_model_size(self._model))
        self.n_params: int = int(llama_cpp.llama_model_n_params(self._model))
        # A recurrent or hybrid model keeps a state a KV truncation cannot rewind (see Context).
        self.recurrent_state: bool = bool(
            llama_cpp.llama_model_is_recurrent(self._model) or llama_cpp.llama_model_is_hybrid(self._model)
        )
        self.n_nextn: int = int(llama_cpp.llama_model_n_layer_nextn(self._model))  # MTP layers
        self._pieces: dict[int, bytes] = {}
        self._max_token_bytes: int | None = None
        self._controls: dict[str, int] | None = None  # control-token text -> its attributes
        self._special_pieces: dict[int, bytes] = {}
        self._eog: dict[int, bool] = {}

    def _place(self, params: Any, devices: Sequence[int] | None, tensor_split: Sequence[float] | None) -> None:
        """Set `devices` and `tensor_split` on the load parameters (see `__init__`)."""
        if devices is not None:
            # NULL-terminated; llama.cpp copies the handles while loading.
            self._devices = (ctypes.c_void_p * (len(devices) + 1))(*devices, None)
            params.devices = ctypes.cast(self._devices, ctypes.c_void_p)
        if tensor_split is not None:
            # llama.cpp copies llama_max_devices() floats from this pointer.
            n_max = int(llama_cpp.llama_max_devices())
            if len(tensor_split) > n_max:
                raise ModelLoadError(f"{self.path}: {len(tensor_split)} split weights, this build supports {n_max} devices")
            self._split = (ctypes.c_float * n_max)(*tensor_split)
            params.tensor_split = ctypes.cast(self._split, ctypes.POINTER(ctypes.c_float))

    # -- metadata -----------------------------------------------------------------------
    @property
    def name(self) -> str:
        return str(self.header.get("general.name") or self.path.stem)

    @property
    def architecture(self) -> str:
        return self.header.architecture

    @property
    def chat_template(self) -> str | None:
        t = self.header.get("tokenizer.chat_template")
        return str(t) if t else None

    @property
    def max_token_bytes(self) -> int:
        """The longest vocabulary entry in bytes: no token stands for more (bounds prompt sizes)."""
        if self._max_token_bytes is None:
            self._max_token_bytes = max((len(llama_cpp.llama_vocab_get_text(self._vocab, t) or b"")
                                         for t in range(self.n_vocab)), default=1)
        return self._max_token_bytes

    def _control_attrs(self) -> dict[str, int]:
        if self._controls is None:
            flags = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
            attrs = (llama_cpp.llama_vocab_get_attr(self._vocab, t) for t in range(self.n_vocab))
            self._controls = {self.token_text(t): a for t, a in enumerate(attrs) if a & flags}
            self._controls.pop("", None)
        return self._controls

    def control_texts(self) -> tuple[str, ...]:
        """Texts that tokenise as control tokens only when special tokens are parsed (chat
        markup such as `<|im_end|>`, and `<unk>`): the ones message text must not produce."""
        return tuple(sorted(self._control_attrs()))

    def control_strips(self) -> tuple[frozenset[str], frozenset[str]]:
        """(control texts that eat the whitespace before them, those that eat the whitespace
        after them), as llama.cpp's tokenizer does for some models (Phi-3)."""
        attrs = self._control_attrs()
        return (frozenset(t for t, a in attrs.items() if a & llama_cpp.LLAMA_TOKEN_ATTR_LSTRIP),
                frozenset(t for t, a in attrs.items() if a & llama_cpp.LLAMA_TOKEN_ATTR_RSTRIP))

    def token_text(self, token: int) -> str:
        """The vocabulary entry itself (for display/debugging, not for output text)."""
        raw = llama_cpp.llama_vocab_get_text(self._vocab, token)
        return raw.decode("utf-8", errors="replace") if raw else ""

    def fim_tokens(self) -> FimTokens | None:
        """The fill-in-the-middle tokens llama.cpp's vocabulary reports (None: it has none)."""
        return fim_tokens(self._vocab)

    # -- tokens -------------------------------------------------------------------------
    def tokenize(self, text: str, *, add_special: bool = True, parse_special: bool = False) -> list[int]:
        data = text.encode("utf-8")
        n_max = len(data) + 8
        buf = (llama_cpp.llama_token * n_max)()
        n = llama_cpp.llama_tokenize(self._vocab, data, len(data), buf, n_max, add_special, parse_special)
        if n < 0:
            n_max = -n
            buf = (llama_cpp.llama_token * n_max)()
            n = llama_cpp.llama_tokenize(self._vocab, data, len(data), buf, n_max, add_special, parse_special)
        if n < 0:
            raise DecodeError(f"tokenization failed for a prompt of {len(data)} bytes")
        return list(buf[:n])

    def piece(self, token: int, *, special: bool = False) -> bytes:
        """Bytes of one token as it appears in generated text (special tokens rendered empty,
        or as their text with `special`: a bridged draft reads the chat markup)."""
        cache = self._special_pieces if special else self._pieces
        cached = cache.get(token)
        if cached is not None:
            return cached
        buf = ctypes.create_string_buffer(64)
        n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, 64, 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, -n, 0, special)
        out = buf.raw[: max(n, 0)]
        cache[token] = out
        return out

    def detokenize(self, tokens: Sequence[int]) -> str:
        return b"".join(self.piece(t) for t in tokens).decode("utf-8", errors="replace")

    def is_eog(self, token: int) -> bool:
        """End of generation: EOS, EOT, <|im_end|> and the like."""
        v = self._eog.get(token)
        if v is None:
            v = bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))
            self._eog[token] = v
        return v

    @property
    def has_encoder(self) -> bool:
        """Whether the weights hold an encoder (T5, BERT-like): not a causal generation model."""
        return bool(llama_cpp.llama_model_has_encoder(self._require_open()))

    def init_context(self, params: "llama_cpp.llama_context_params") -> Any:
        """A raw llama.cpp context over these weights with `params` (falsy when llama.cpp refuses,
        its reason in the log), for the contexts built here (decode, embeddings)."""
        return llama_cpp.llama_init_from_model(self._require_open(), params)

    def _require_open(self) -> Any:
        if not getattr(self, "_model", None):
            raise ModelLoadError(f"{self.path}: model is closed")
        return self._model

    def close(self) -> None:
        if getattr(self, "_model", None):
            llama_cpp.llama_model_free(self._model)
            self._model = None


def load_model(path: str | os.PathLike[str], **kw: object) -> Model:
    """Validate then load; errors are `ModelFileError` / `ModelLoadError` naming the file."""
    p = Path(path)
    if not p.exists():
        raise ModelFileError(f"{p}: no such file")
    return Model(p, **kw)  # type: ignore[arg-type]
