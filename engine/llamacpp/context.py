"""A KV cache over a loaded model: batch decode, logits as numpy views, prefix reuse and
roll-back (by truncation, or through llama.cpp's recurrent-state snapshots on hybrid models).

The decoder's hot loop runs here, so it stays lean: one preallocated batch, cached views.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..errors import Cancelled, DecodeError, ModelLoadError
from .llama import Closing, Model, default_threads, free_context, log_tail, recent_log_errors
from .build import build_id
from .recurrent import Rollback
from .runtime import RuntimeParams, flash_attention
from ..models.calibration import content_id

import llama_cpp  # noqa: E402


class Context(Closing):
    """One KV cache over a model, a single sequence, with batch decode and truncation.

    `tokens` mirrors what the KV cache holds, position by position, so callers can
    compute common prefixes and roll back by truncating.

    A hybrid or recurrent model (Qwen3.5, LFM2, Nemotron-H, Mamba) keeps a state that a
    plain truncation cannot rewind. `truncate` still works on it, exactly, through its
    `Rollback` (recurrent.py): llama.cpp's per-token snapshots of the last decode (`rollback`
    of them, where the architecture supports it), else the checkpoint `guard` saved before
    that decode, else reading the kept tokens again from the start.

    Pictures (`ImageSpan`s of engine/llamacpp/vision.py) are read by `feed` where their spans
    say; in `tokens` each is a run of placeholder ids, one per KV cell. A picture may take
    fewer positions than cells (M-RoPE), so a position is the index less the shift of the
    pictures before it (`position`); roll-back never cuts a picture in two.
    """

    def __init__(
        self,
        model: Model,
        runtime: RuntimeParams | None = None,
        *,
        rollback: int = 0,
    ):
        """Of `runtime` a context uses n_ctx, n_batch and n_threads (None: the physical cores).
        `rollback`: on a model with a recurrent state, how many tokens of its last decode it can
        take back at once (llama.cpp's `n_rs_seq`; it keeps that many state snapshots)."""
        model._require_open()
        rt = runtime or RuntimeParams()
        # llama.cpp keeps a sequence's last rollback + 1 tokens in one ubatch, and asserts the
        # ubatch holds more than that
        n_ctx, n_batch = rt.n_ctx, max(rt.n_batch, rollback + 2)
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
        params.flash_attn_type = flash_attn_type()
        if model.recurrent_state:
            params.n_rs_seq = rollback
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
        self.state_identity = state_identity(model, self.n_ctx, params)
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
        self.images: list[Any] = []  # the ImageSpans inside `tokens`, in order
        self._shift = 0  # positions the pictures in `tokens` take fewer than their cells
        self._abort = threading.Event()
        self._abort_cb = llama_cpp.ggml_abort_callback(lambda _data: self._abort.is_set())
        self._null_abort = ctypes.cast(None, llama_cpp.ggml_abort_callback)
        self.recurrent = model.recurrent_state
        # Snapshots llama.cpp really keeps (it gives 0 to an architecture it cannot roll back).
        self.rollback_depth: int = int(llama_cpp.llama_n_rs_seq(self._ctx)) if self.recurrent else 0
        self._rollback = Rollback(self._ctx, self._mem, 0, self.rollback_depth) if self.recurrent else None
        # Called with (first position, count) after each decode (the MTP head records hidden states).
        self.after_decode: Callable[[int, int], None] | None = None

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    def position(self, index: int) -> int:
        """The position of `tokens[index]` (a picture's cells: its first position, where the cache
        is cut)."""
        return position_in(self.images, index)

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
        pos0 = start - self._shift
        if n == 1:
            self._b_token[0] = tokens[0]
            self._b_pos[0] = pos0
        else:
            self._b_token[:n] = tokens
            np.add(self._positions[:n], pos0, out=self._b_pos[:n])
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
        rc = self._decode_with_abort(lambda: llama_cpp.llama_decode(self._ctx, self._batch), abortable, pos0)
        if rc != 0:
            if rc == 1:
                raise DecodeError(f"no KV slot for {n} tokens at position {start} (context {self.n_ctx})")
            raise DecodeError(f"llama_decode failed with code {rc}")
        self.tokens.extend(map(int, tokens))
        if self._rollback is not None:
            self._rollback.decoded(n)
        if self.after_decode is not None:
            self.after_decode(start, n)
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

    def reuse_prefix(self, tokens: Sequence[int], images: Sequence[Any] = ()) -> int:
        """Keep the cached positions shared with `tokens` (a chat turn, the draft's last
        proposal), always leaving the last token to decode since its logits are needed.
        `images`: the pictures inside `tokens`; one kept must be the same picture at the same
        place. Returns how many positions were kept."""
        self.truncate(kept_prefix(self.tokens, self.images, tokens, images))
        return self.n_past

    def feed(self, tokens: Sequence[int], *, last_logits: bool = False, abortable: bool = False,
             images: Sequence[Any] = ()) -> Iterator[tuple[int, np.ndarray]]:
        """Decode `tokens` in n_batch chunks, yielding (tokens done, logits) after each chunk:
        callers report progress or stop between chunks. With `last_logits` the final chunk
        returns the last row's logits (a view, as `decode`); otherwise empty arrays.
        `images`: the pictures among `tokens` (spans by index in `self.tokens` once appended):
        each is read whole, through the projector, where its span starts."""
        base = self.n_past
        ahead = sorted((s for s in images if base <= s.start < base + len(tokens)), key=lambda s: s.start)
        if any(s.end > base + len(tokens) for s in ahead):
            raise DecodeError("a picture reaches past the tokens given to read")
        done = 0
        for span in ahead + [None]:
            stop = len(tokens) if span is None else span.start - base
            for start in range(done, stop, self.n_batch):
                chunk = tokens[start : min(start + self.n_batch, stop)]
                final = span is None and start + self.n_batch >= stop
                logits = self.decode(chunk, logits="last" if final and last_logits else "none", abortable=abortable)
                yield start + len(chunk), logits
            if span is not None:
                self._read_image(span, abortable=abortable)
                done = span.end - base
                yield done, np.empty((0, self.n_vocab), dtype=np.float32)

    def _decode_with_abort(self, decode: Callable[[], int], abortable: bool, pos0: int) -> int:
        """Run one decode call (text or a picture) with the abort callback armed when
        `abortable`; a failed or aborted one may leave some ubatches in memory, so our view is
        restored (a recurrent state cannot drop them: it starts again empty). Cancelled on an
        abort; else llama.cpp's return code."""
        if abortable:
            self._abort.clear()
            llama_cpp.llama_set_abort_callback(self._ctx, self._abort_cb, None)
        try:
            rc = decode()
        finally:
            if abortable:
                llama_cpp.llama_set_abort_callback(self._ctx, self._null_abort, None)
        if rc != 0:
            if self.recurrent:
                self.clear()
            else:
                llama_cpp.llama_memory_seq_rm(self._mem, 0, pos0, -1)
            if rc == 2:
                raise Cancelled("cancelled")
        return rc

    def _read_image(self, span: Any, *, abortable: bool) -> None:
        """Read one picture's embeddings at the end of the cache (its span starts at n_past)."""
        if span.start != self.n_past:
            raise DecodeError(f"a picture placed at {span.start} cannot be read at {self.n_past}")
        if self.n_past + span.n_tokens > self.n_ctx:
            raise DecodeError(f"context full: {self.n_past} + {span.n_tokens} image tokens > {self.n_ctx}")
        start, pos0 = self.n_past, self.n_past - self._shift

        def recorded(offset: int, n: int) -> None:
            if self.after_decode is not None:
                self.after_decode(start + offset, n)

        rc = self._decode_with_abort(lambda: span.decode(self._ctx, pos0, self.n_batch, recorded), abortable, pos0)
        if rc != 0:
            raise DecodeError(f"reading the picture failed with code {rc} ({recent_log_errors() or 'no detail'})")
        self.tokens.extend([span.image.projector.placeholder] * span.n_tokens)
        self.images.append(span)
        self._shift += span.shift
        if self._rollback is not None:
            self._rollback.decoded(0)  # no snapshot reaches into a picture

    def abort(self) -> None:
        """Ask an `abortable` decode running in another thread to stop."""
        self._abort.set()

    def stops_with(self, other: "Context") -> None:
        """`other.abort()` stops this context's abortable decodes too (a twin reading its prompt)."""
        self._abort = other._abort

    def truncate(self, n: int) -> None:
        """Drop KV entries from index `n` on (roll back rejected draft tokens). A picture `n`
        falls inside goes whole: the cache then keeps fewer than `n`."""
        if n >= self.n_past:
            return
        n = picture_cut(self.images, n)
        if self._rollback is not None:
            self._rollback.truncate(self, n)
            return
        if not llama_cpp.llama_memory_seq_rm(self._mem, 0, self.position(n), -1):
            raise DecodeError("this model's memory cannot be partially rolled back")
        self._cut(n)

    def _cut(self, n: int) -> None:
        """Forget the tokens (and pictures) from index n on, once the cache has."""
        del self.tokens[n:]
        if self.images and self.images[-1].end > n:
            self.images = [s for s in self.images if s.end <= n]
            self._shift = sum(s.shift for s in self.images)

    def guard(self, batch: int, back: int) -> None:
        """Before a decode of `batch` tokens that may be taken back by up to `back`: on a
        recurrent model whose snapshots will not reach that far, save a checkpoint here."""
        if self._rollback is not None:
            self._rollback.guard(self.n_past, batch, back)

    def mark(self) -> None:
        """Save the recurrent state at the current position (`truncate` restores it)."""
        if self._rollback is not None:
            self._rollback.mark(self.n_past)

    def _replay(self, tokens: Sequence[int], images: Sequence[Any] = ()) -> None:
        for _ in self.feed(list(tokens), images=images):
            pass

    def save_state(self) -> np.ndarray | None:
        """This sequence's whole state (KV cache, recurrent state) at `tokens`, as bytes a context
        of the same `state_identity` loads back (`load_state`); None when llama.cpp gives less.
        A numpy buffer: unlike a ctypes array it is not zeroed first (40 MB took 70 ms so)."""
        return seq_state(self._ctx, 0)

    def keyed_tokens(self) -> np.ndarray:
        """`tokens` with each picture's cells as its content's key id: what names this state."""
        return keyed(self.tokens, self.images)

    def load_state(self, data: np.ndarray | bytearray, tokens: Sequence[int], images: Sequence[Any] = ()) -> bool:
        """Replace what this context holds by a state `save_state` made after `tokens` (keyed:
        `keyed_tokens`; `images`, the pictures they name, as ImageSpans). False (the context left
        empty) when llama.cpp refuses the bytes, they hold other positions, or name a picture
        not among `images`."""
        self.clear()
        cells = state_cells(tokens, images)
        if cells is None or not set_seq_state(self._ctx, 0, data):
            self.clear()
            return False
        plain, known = cells
        self.images, self._shift = known, sum(s.shift for s in known)
        if int(llama_cpp.llama_memory_seq_pos_max(self._mem, 0)) != self.position(len(plain) - 1):
            self.clear()
            return False
        self.tokens = plain
        return True

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(self._mem, True)
        self.tokens.clear()
        self.images, self._shift = [], 0
        if self._rollback is not None:
            self._rollback.forget()

    def close(self) -> None:
        if getattr(self, "_ctx", None):
            free_context(self._ctx, self._batch)
            self._ctx = None


_U8P = ctypes.POINTER(ctypes.c_uint8)


def _raw_function(name: str, restype: object, argtypes: list) -> Callable:
    """A second binding of a libllama function with our own types (llama_cpp's binding of
    llama_get_logits returns a POINTER(c_float) object, ours a plain address)."""
    fn = llama_cpp.llama_cpp._lib[name]  # indexing makes a new function object; attributes are shared
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


def flash_attn_type() -> int:
    """llama.cpp's flash-attention setting for a context (`runtime.flash_attention`): the same for
    every context of the process, so a sequence state moves between them."""
    on = flash_attention()
    if on is None:
        return llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO
    return llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if on else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED


def state_identity(model: Model, n_ctx: int, params: Any, streams: int = 1) -> str:
    """What a saved sequence state fits (the prompt cache's key): another file, context size (per
    sequence), llama.cpp build, KV layout (types, flash attention's V order, a full or windowed
    SWA cache), KV stream count (llama.cpp's state bytes name it) or a target loaded with weight
    repacking off ($TANDEM_REPACK: its states round as one-token passes do) must not load it."""
    kv_layout = f"k{params.type_k}v{params.type_v}fa{params.flash_attn_type}swa{int(params.swa_full)}"
    return (f"{content_id(model.path)}|n_ctx{n_ctx}|{build_id()}|{kv_layout}" + (f"|streams{streams}" if streams > 1 else "")
            + ("" if model.repack else "|unrepacked"))


def seq_state(ctx: Any, seq: int) -> np.ndarray | None:
    """Sequence `seq`'s whole state in `ctx` as bytes (None when llama.cpp gives less). The bytes
    name the context's KV stream count, not the sequence: another context with as many streams
    loads them on any of its sequences."""
    size = int(llama_cpp.llama_state_seq_get_size(ctx, seq))
    buf = np.empty(size, dtype=np.uint8)
    got = int(llama_cpp.llama_state_seq_get_data(ctx, buf.ctypes.data_as(_U8P), size, seq))
    return buf if got == size and size > 0 else None


def set_seq_state(ctx: Any, seq: int, data: np.ndarray | bytearray) -> bool:
    """Load `seq_state`'s bytes into sequence `seq` of `ctx`; False when llama.cpp refuses them."""
    buf = np.frombuffer(data, dtype=np.uint8)
    return int(llama_cpp.llama_state_seq_set_data(ctx, buf.ctypes.data_as(_U8P), len(buf), seq)) > 0


def state_cells(tokens: Sequence[int], images: Sequence[Any]) -> tuple[list[int], list[Any]] | None:
    """A saved state's keyed `tokens` as the cells a sequence holds (each picture of `images` it
    names as its run of placeholders) and those pictures; None when it names a picture not
    among `images`."""
    plain = [int(t) for t in tokens]
    known = [s for s in images if s.end <= len(plain) and plain[s.start] == s.key_id]
    for s in known:
        plain[s.start:s.end] = [s.image.projector.placeholder] * s.n_tokens
    return None if any(t < 0 for t in plain) else (plain, known)


def keyed(tokens: Sequence[int], images: Sequence[Any]) -> np.ndarray:
    """`tokens` (int32) with each picture's cells as its key id (`ImageSpan.key_id`)."""
    out = np.asarray(tokens, dtype=np.int32).copy()
    for s in images:
        if s.end <= len(out):
            out[s.start:s.end] = s.key_id
    return out


def position_in(images: Sequence[Any], index: int) -> int:
    """The position of a token list's entry `index`, its pictures `images` (ImageSpans, in
    order) taking `shift` fewer positions than cells each (a picture's cells: its first)."""
    shift = 0
    for span in images:
        if index < span.end:
            return (span.start - shift) if index >= span.start else index - shift
        shift += span.shift
    return index - shift


def picture_cut(images: Sequence[Any], n: int) -> int:
    """Where a cache holding `images` is cut to drop index `n` on: `n`, or the start of the
    picture `n` falls inside (a picture goes whole)."""
    for span in images:
        if span.start < n < span.end:
            n = span.start
    return n


def kept_prefix(held: Sequence[int], held_images: Sequence[Any], tokens: Sequence[int], images: Sequence[Any]) -> int:
    """How much of a cache holding `held` (its pictures `held_images`) a prompt of `tokens` (its
    pictures `images`) keeps: their common prefix, the last token left to decode, and never a
    picture that is not the same picture (content) at the same place on both sides: placeholder
    runs alike say nothing of what was read in them."""
    keep = min(common_prefix(held, tokens), len(tokens) - 1)
    for span in held_images:
        if span.start < keep and not any(span.same(other) for other in images):
            keep = span.start
    for span in images:
        if span.start < keep and not any(span.same(other) for other in held_images):
            keep = span.start
    return keep


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
