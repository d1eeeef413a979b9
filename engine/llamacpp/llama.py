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
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..errors import Cancelled, DecodeError, ModelFileError, ModelLoadError
from ..models.gguf_header import GGUFHeader, validate_file
from ..models.hardware import physical_cores
from .backend_dl import ensure_loaded
from .fim import FimTokens, fim_tokens
from .runtime import RuntimeParams

import llama_cpp  # noqa: E402  (after our imports so import errors name our modules first)

_backend_lock = threading.Lock()
_backend_ready = False
log_tail: deque[str] = deque(maxlen=40)
_log_seen = 0  # lines ever logged: `log_tail` is bounded, so its length cannot tell what is new
_verbose = bool(os.environ.get("TANDEM_DEBUG"))


@llama_cpp.llama_log_callback
def _log_callback(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    """Keep llama.cpp's chatter out of the terminal; remember it for error messages."""
    try:
        line = text.decode("utf-8", errors="replace")
    except Exception:  # pragma: no cover - defensive, callbacks must not raise
        return
    global _log_seen
    log_tail.append(line)
    _log_seen += 1
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

    Compute threads and their waiting, as chosen for the desktop app (measured on 2 cores,
    docs/benchmarks.md): all physical cores compute (one fewer halves the speed on 2 cores;
    the GUI's few percent of a core cost less than that), and waiting threads keep spinning.
    Our Linux build uses OpenMP, where the threadpool `poll` setting of llama_context_params
    is not used: OpenMP's wait policy decides, and its default spin-wait is right
    (OMP_WAIT_POLICY=PASSIVE, sleeping between graph computations, cost 30% of decode
    speed). libgomp keeps a pool per thread that ever computed and cuts every spin-wait to
    100 iterations once it manages more threads than there are cores, which costs the same
    30%: compute on one thread at a time, on short-lived or dedicated workers, never on the
    GUI thread or a thread that then idles while another computes.
    """
    return physical_cores()


class Model:
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
    ):
        """`devices` (ggml device handles, see `rpc_add_server`/`local_offload_devices`)
        and `tensor_split` (one weight per device) place the layers explicitly, as
        llama.cpp's `--device`/`--tensor-split` do; None keeps llama.cpp's own choice.
        Of `runtime` a model uses `n_gpu_layers` (None: all layers when llama.cpp can offload)."""
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
        self._model = llama_cpp.llama_model_load_from_file(os.fsencode(self.path), params)
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
        self.can_rollback: bool = not (
            llama_cpp.llama_model_is_recurrent(self._model) or llama_cpp.llama_model_is_hybrid(self._model)
        )
        self._pieces: dict[int, bytes] = {}
        self._max_token_bytes: int | None = None
        self._controls: dict[str, int] | None = None  # control-token text -> its attributes
        self._special_pieces: dict[int, bytes] = {}
        self._eog: dict[int, bool] = {}

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

    def __del__(self) -> None:  # pragma: no cover - interpreter shutdown order varies
        try:
            self.close()
        except Exception:
            pass


class Context:
    """One KV cache over a model, a single sequence, with batch decode and truncation.

    `tokens` mirrors what the KV cache holds, position by position, so callers can
    compute common prefixes and roll back by truncating.
    """

    def __init__(
        self,
        model: Model,
        runtime: RuntimeParams | None = None,
    ):
        """Of `runtime` a context uses n_ctx, n_batch and n_threads (None: the physical cores)."""
        model._require_open()
        rt = runtime or RuntimeParams()
        n_ctx, n_batch = rt.n_ctx, rt.n_batch
        self.model = model
        threads = rt.n_threads or default_threads()
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = n_batch
        params.n_ubatch = n_batch
        params.n_seq_max = 1
        params.n_threads = threads
        params.n_threads_batch = threads
        params.no_perf = True
        log_tail.clear()
        self._ctx = model.init_context(params)
        if not self._ctx:
            detail = recent_log_errors() or "out of memory?"
            raise ModelLoadError(f"{model.path}: could not create a context of {n_ctx} tokens ({detail})")
        self.n_ctx: int = llama_cpp.llama_n_ctx(self._ctx)
        # llama.cpp caps its batch at the context it asked for (n_ctx 64 -> batch 64, context padded
        # to 256): chunk by what it accepts, or a longer prompt aborts the process (GGML_ASSERT)
        self.n_batch: int = min(n_batch, int(llama_cpp.llama_n_batch(self._ctx)))
        self.n_threads = threads
        self.n_vocab = model.n_vocab
        self._mem = llama_cpp.llama_get_memory(self._ctx)
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self._b_token = np.ctypeslib.as_array(self._batch.token, shape=(n_batch,))
        self._b_pos = np.ctypeslib.as_array(self._batch.pos, shape=(n_batch,))
        self._b_logits = np.ctypeslib.as_array(self._batch.logits, shape=(n_batch,))
        self._positions = np.arange(n_batch, dtype=np.int32)
        # numpy views of llama.cpp's logits buffer by (address, rows): building one costs more
        # than a decode of a tiny model, and the buffer moves only when llama.cpp grows it
        self._views: dict[tuple[int, int], np.ndarray] = {}
        self._get_logits = _raw_function("llama_get_logits", ctypes.c_void_p, [ctypes.c_void_p])
        n_seq = np.ctypeslib.as_array(self._batch.n_seq_id, shape=(n_batch,))
        n_seq[:] = 1
        for i in range(n_batch):
            self._batch.seq_id[i][0] = 0
        self.tokens: list[int] = []
        self._abort = threading.Event()
        self._abort_cb = llama_cpp.ggml_abort_callback(lambda _data: self._abort.is_set())
        self._null_abort = ctypes.cast(None, llama_cpp.ggml_abort_callback)

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    def decode(self, tokens: Sequence[int], *, logits: str = "last", abortable: bool = False) -> np.ndarray:
        """Append `tokens` to the KV cache; return logits rows as a numpy *view*.

        logits: "last" -> shape (1, n_vocab); "all" -> (len(tokens), n_vocab); "none" -> empty.
        The view is valid until the next decode on this context; copy what must outlive it.
        `abortable` lets `abort()` interrupt a long decode (prefill) from another thread;
        it is off for the hot single-token path, where the check would cost time.
        """
        n = len(tokens)
        if n == 0:
            raise DecodeError("nothing to decode")
        if n > self.n_batch:
            raise DecodeError(f"batch of {n} tokens exceeds n_batch {self.n_batch}")
        if self.n_past + n > self.n_ctx:
            raise DecodeError(f"context full: {self.n_past} + {n} tokens > {self.n_ctx}")
        start = self.n_past
        if n == 1:
            self._b_token[0] = tokens[0]
            self._b_pos[0] = start
        else:
            self._b_token[:n] = tokens
            np.add(self._positions[:n], start, out=self._b_pos[:n])
        if logits == "all":
            self._b_logits[:n] = 1
            n_out = n
        elif logits == "last":
            self._b_logits[: n - 1] = 0
            self._b_logits[n - 1] = 1
            n_out = 1
        elif logits == "none":
            self._b_logits[:n] = 0
            n_out = 0
        else:
            raise ValueError(f"logits must be 'last', 'all' or 'none', not {logits!r}")
        self._batch.n_tokens = n
        if abortable:
            self._abort.clear()
            llama_cpp.llama_set_abort_callback(self._ctx, self._abort_cb, None)
        try:
            rc = llama_cpp.llama_decode(self._ctx, self._batch)
        finally:
            if abortable:
                llama_cpp.llama_set_abort_callback(self._ctx, self._null_abort, None)
        if rc != 0:
            # Failed or aborted decodes may leave some ubatches in memory: restore our view.
            llama_cpp.llama_memory_seq_rm(self._mem, 0, start, -1)
            if rc == 2:
                raise Cancelled("cancelled")
            if rc == 1:
                raise DecodeError(f"no KV slot for {n} tokens at position {start} (context {self.n_ctx})")
            raise DecodeError(f"llama_decode failed with code {rc}")
        self.tokens.extend(map(int, tokens))
        if n_out == 0:
            return np.empty((0, self.n_vocab), dtype=np.float32)
        return self._logits_view(n_out)

    def _logits_view(self, rows: int) -> np.ndarray:
        """The first `rows` rows of llama.cpp's logits buffer, as a numpy view."""
        addr = self._get_logits(self._ctx)
        view = self._views.get((addr, rows))
        if view is None:
            if len(self._views) > 64:  # the buffer moved many times: forget the old addresses
                self._views.clear()
            view = np.ctypeslib.as_array((ctypes.c_float * (rows * self.n_vocab)).from_address(addr)).reshape(rows, self.n_vocab)
            self._views[(addr, rows)] = view
        return view

    def reuse_prefix(self, tokens: Sequence[int]) -> int:
        """Keep the cached positions shared with `tokens` (a chat turn, the draft's last
        proposal), always leaving the last token to decode since its logits are needed.
        Returns how many positions were kept."""
        keep = min(common_prefix(self.tokens, tokens), len(tokens) - 1)
        self.truncate(keep)
        return keep

    def feed(self, tokens: Sequence[int], *, last_logits: bool = False, abortable: bool = False) -> Iterator[tuple[int, np.ndarray]]:
        """Decode `tokens` in n_batch chunks, yielding (tokens done, logits) after each chunk:
        callers report progress or stop between chunks. With `last_logits` the final chunk
        returns the last row's logits (a view, as `decode`); otherwise empty arrays."""
        for start in range(0, len(tokens), self.n_batch):
            chunk = tokens[start : start + self.n_batch]
            final = start + self.n_batch >= len(tokens)
            logits = self.decode(chunk, logits="last" if final and last_logits else "none", abortable=abortable)
            yield start + len(chunk), logits

    def abort(self) -> None:
        """Ask an `abortable` decode running in another thread to stop."""
        self._abort.set()

    def truncate(self, n: int) -> None:
        """Drop KV entries from position `n` on (roll back rejected draft tokens)."""
        if n >= self.n_past:
            return
        ok = llama_cpp.llama_memory_seq_rm(self._mem, 0, n, -1)
        if not ok:
            raise DecodeError("this model's memory cannot be partially rolled back")
        del self.tokens[n:]

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(self._mem, True)
        self.tokens.clear()

    def close(self) -> None:
        if getattr(self, "_ctx", None):
            llama_cpp.llama_batch_free(self._batch)
            llama_cpp.llama_free(self._ctx)
            self._ctx = None

    def __del__(self) -> None:  # pragma: no cover
        try:
            self.close()
        except Exception:
            pass


def _raw_function(name: str, restype: object, argtypes: list) -> Callable:
    """A second binding of a libllama function with our own types (llama_cpp's binding of
    llama_get_logits returns a POINTER(c_float) object, ours a plain address)."""
    fn = llama_cpp.llama_cpp._lib[name]  # indexing makes a new function object; attributes are shared
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def load_model(path: str | os.PathLike[str], **kw: object) -> Model:
    """Validate then load; errors are `ModelFileError` / `ModelLoadError` naming the file."""
    p = Path(path)
    if not p.exists():
        raise ModelFileError(f"{p}: no such file")
    return Model(p, **kw)  # type: ignore[arg-type]
