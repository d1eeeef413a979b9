"""One KV cache holding several sequences, decoded together: the seam the parallel slots run on.

Several requests share one llama.cpp context (`n_seq_max` = N, a KV stream per sequence), each on
its own sequence id. One `decode` call carries rows of several sequences (a prompt chunk of one,
a verify batch of another) in one `llama_decode`; each sequence is rolled back or cleared alone.

Hybrid and recurrent targets (Qwen3.5, LFM2): each sequence takes rejected drafts back through
its own `Rollback` (recurrent.py, as `Context` does): llama.cpp keeps `n_rs_seq` state snapshots
per sequence and a partial `llama_memory_seq_rm` on one sequence picks only that sequence's, a
checkpoint is that sequence's state (`llama_state_seq_get_data_ext`, partial only). One caveat of
llama.cpp's recurrent cache shapes the batch: a ubatch of several sequences gathers their states
into neighbouring cells, moving a state it displaces without its snapshots, so a sequence whose
rows may be taken back (`guard`ed) is decoded in a `llama_decode` of its own, after the shared
one: its snapshots are then the last thing written to its cell. The rest still share one.

Pictures: a llama_batch carries token ids or embeddings, not both, so a sequence's picture is
read in a decode of its own (`read_image`, between the shared ones), on its sequence id. Each
sequence keeps its pictures and their position shift (M-RoPE) by `Context`'s rules.

A target's own MTP head drafts per sequence: a `SequenceView` is what a slot's head binds to (its
sequence of the slots' one MTP head context), and each sequence's `after_decode` hands it that
sequence's hidden states, found at the rows the sequence took in each pass (llama.cpp returns
every row in batch order). Gemma 4's assistant binds the same way; its context reads this one's
KV cache (all `n_seq` sequences, a stream each) on the view's `seq` (mtp.py `MtpHeads`).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import DecodeError, ModelLoadError, TandemError
from .context import (Context, _raw_function, flash_attn_type, kept_prefix, keyed, picture_cut, position_in, seq_state,
                      set_seq_state, state_cells, state_identity)
from .llama import Closing, Model, default_threads, free_context, log_tail, recent_log_errors
from .recurrent import Rollback
from .runtime import RuntimeParams

import llama_cpp  # noqa: E402


class ParallelUnsupported(TandemError):
    """The target cannot run several sequences in one context (yet)."""


@dataclass(frozen=True)
class Part:
    """Tokens appended to one sequence in a shared decode, and which of their logits rows come back:
    "all", "last" or "none"."""

    seq: int
    tokens: Sequence[int]
    logits: str = "none"


class SharedContext(Closing):
    """N sequences in one context, one KV stream each. `tokens[seq]` mirrors what the KV cache holds for `seq`,
    cell by cell (a picture: a run of placeholders, its span in `images[seq]`); each sequence may
    hold up to `n_ctx_seq` cells (the context divided between them, as llama-server divides it
    between its slots; llama.cpp rounds each share up to its padding, so `n_ctx` may come out
    larger than asked). `rollback`: on a hybrid or recurrent model, how many tokens of a
    sequence's last decode it can take back at once (llama.cpp's `n_rs_seq`, as `Context`'s)."""

    def __init__(self, model: Model, runtime: RuntimeParams | None, n_seq: int, *, rollback: int = 0):
        model._require_open()
        if not isinstance(n_seq, int) or isinstance(n_seq, bool) or not 1 <= n_seq <= 64:
            raise TandemError(f"the number of parallel sequences must be an integer from 1 to 64, got {n_seq!r}")
        rt = runtime or RuntimeParams()
        threads = rt.n_threads or default_threads()
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = rt.n_ctx
        params.n_batch = params.n_ubatch = rt.n_batch
        params.n_seq_max = n_seq
        if model.recurrent_state:
            params.n_rs_seq = rollback
            params.n_batch = params.n_ubatch = max(rt.n_batch, rollback + 2)  # as Context's
        # A stream per sequence, not one unified buffer: each sequence's cells stay in position
        # order as a lone context's do, so its attention sums in the same order. (Unified, a
        # sequence written after another was cleared took the freed cells before its own earlier
        # ones, and its logits moved by 0.03 on a tiny model: greedy ties would part.)
        params.kv_unified = False
        params.n_threads = params.n_threads_batch = threads
        params.no_perf = True
        params.flash_attn_type = flash_attn_type()
        log_tail.clear()
        self._ctx = model.init_context(params)
        if not self._ctx:
            detail = recent_log_errors() or "out of memory?"
            raise ModelLoadError(f"{model.path}: could not create a context of {rt.n_ctx} tokens for {n_seq} sequences ({detail})")
        self.model = model
        self.n_seq = n_seq
        self.n_ctx: int = int(llama_cpp.llama_n_ctx(self._ctx))
        self.n_ctx_seq: int = int(llama_cpp.llama_n_ctx_seq(self._ctx))  # the context's share, rounded up by llama.cpp
        self.n_batch: int = min(params.n_batch, int(llama_cpp.llama_n_batch(self._ctx)))
        self.n_vocab = model.n_vocab
        self.n_threads = threads
        # a lone context's states are not these: llama.cpp's state bytes name the KV stream count
        self.state_identity = state_identity(model, self.n_ctx_seq, params, streams=n_seq)
        self._mem = llama_cpp.llama_get_memory(self._ctx)
        self._batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)
        nb = self.n_batch
        self._b_token = np.ctypeslib.as_array(self._batch.token, shape=(nb,))
        self._b_pos = np.ctypeslib.as_array(self._batch.pos, shape=(nb,))
        self._b_logits = np.ctypeslib.as_array(self._batch.logits, shape=(nb,))
        np.ctypeslib.as_array(self._batch.n_seq_id, shape=(nb,))[:] = 1
        self._seq_ptrs = [self._batch.seq_id[i] for i in range(nb)]
        self._get_logits = _raw_function("llama_get_logits", ctypes.c_void_p, [ctypes.c_void_p])
        self.tokens: list[list[int]] = [[] for _ in range(n_seq)]
        self.images: list[list[Any]] = [[] for _ in range(n_seq)]  # each sequence's ImageSpans, in order
        self._shift = [0] * n_seq  # positions each sequence's pictures take fewer than their cells
        self.recurrent: bool = model.recurrent_state
        # Snapshots llama.cpp really keeps (it gives 0 to an architecture it cannot roll back).
        self.rollback_depth: int = int(llama_cpp.llama_n_rs_seq(self._ctx)) if self.recurrent else 0
        self._rollbacks = [Rollback(self._ctx, self._mem, i, self.rollback_depth) for i in range(n_seq)] \
            if self.recurrent else None
        self._alone: set[int] = set()  # sequences whose next rows are decoded alone (guarded)
        # Per sequence, called with (first index, count, row in the pass) after each decode of it
        # (a slot's MTP head records the target's hidden states of its own rows).
        self.after_decode: list[Callable[[int, int, int], None] | None] = [None] * n_seq

    def position(self, seq: int, index: int) -> int:
        """The position of `tokens[seq][index]` (a picture's cells: its first)."""
        return position_in(self.images[seq], index)

    def decode(self, parts: Sequence[Part]) -> list[np.ndarray]:
        """Append each part's tokens to its sequence in one `llama_decode` (on a recurrent model
        a `guard`ed sequence's in one of its own after it); return, per part, its logits rows
        (shape (rows, n_vocab), empty for "none"): copies, safe past the next decode."""
        n = sum(len(p.tokens) for p in parts)
        if n == 0:
            raise DecodeError("nothing to decode")
        if n > self.n_batch:
            raise DecodeError(f"batch of {n} tokens exceeds n_batch {self.n_batch}")
        alone = [i for i, p in enumerate(parts) if p.seq in self._alone] if self.recurrent else []
        self._alone.difference_update(p.seq for p in parts)
        if not alone:
            return self._pass(parts)
        together = [i for i in range(len(parts)) if i not in alone]
        out: list[np.ndarray] = [np.empty(0)] * len(parts)
        for group in ([together] if together else []) + [[i] for i in alone]:
            for i, rows in zip(group, self._pass([parts[i] for i in group])):
                out[i] = rows
        return out

    def _pass(self, parts: Sequence[Part]) -> list[np.ndarray]:
        """One `llama_decode` of `parts` (checked to fit the batch)."""
        n = sum(len(p.tokens) for p in parts)
        i, wanted = 0, []
        for p in parts:
            m, have = len(p.tokens), len(self.tokens[p.seq])
            if m == 0:
                raise DecodeError(f"nothing to decode for sequence {p.seq}")
            if have + m > self.n_ctx_seq:
                raise DecodeError(f"context full: sequence {p.seq} holds {have} + {m} tokens > {self.n_ctx_seq}")
            self._b_token[i:i + m] = p.tokens
            pos0 = have - self._shift[p.seq]
            self._b_pos[i:i + m] = np.arange(pos0, pos0 + m, dtype=np.int32)
            for j in range(i, i + m):
                self._seq_ptrs[j][0] = p.seq
            if p.logits == "all":
                self._b_logits[i:i + m] = 1
                wanted.append(m)
            elif p.logits == "last":
                self._b_logits[i:i + m - 1] = 0
                self._b_logits[i + m - 1] = 1
                wanted.append(1)
            elif p.logits == "none":
                self._b_logits[i:i + m] = 0
                wanted.append(0)
            else:
                raise ValueError(f"logits must be 'last', 'all' or 'none', not {p.logits!r}")
            i += m
        self._batch.n_tokens = n
        rc = llama_cpp.llama_decode(self._ctx, self._batch)
        if rc != 0:
            for p in parts:  # a failed decode may leave some ubatches in memory: restore our view
                self._forget_past(p.seq)
            if rc == 1:
                raise DecodeError(f"no KV slot for {n} tokens (context {self.n_ctx})")
            raise DecodeError(f"llama_decode failed with code {rc}")
        row = 0
        for p in parts:
            start = len(self.tokens[p.seq])
            self.tokens[p.seq].extend(map(int, p.tokens))
            if self._rollbacks is not None:
                self._rollbacks[p.seq].decoded(len(p.tokens))
            if (record := self.after_decode[p.seq]) is not None:
                record(start, len(p.tokens), row)
            row += len(p.tokens)
        total = sum(wanted)
        out: list[np.ndarray] = []
        if total:
            addr = self._get_logits(self._ctx)
            allrows = np.ctypeslib.as_array((ctypes.c_float * (total * self.n_vocab)).from_address(addr))
            allrows = allrows.reshape(total, self.n_vocab)
        r = 0
        for w in wanted:
            out.append(allrows[r:r + w].copy() if w else np.empty((0, self.n_vocab), dtype=np.float32))
            r += w
        return out

    def read_image(self, seq: int, span: Any) -> None:
        """Read one picture (an `ImageSpan` starting at the end of `seq`) into `seq` alone, in
        decodes of its own through the projector (mtmd's helper, on this sequence id)."""
        have = len(self.tokens[seq])
        if span.start != have:
            raise DecodeError(f"a picture placed at {span.start} cannot be read at {have} (sequence {seq})")
        if have + span.n_tokens > self.n_ctx_seq:
            raise DecodeError(f"context full: sequence {seq} holds {have} + {span.n_tokens} image tokens > {self.n_ctx_seq}")
        record = self.after_decode[seq]
        rc = span.decode(self._ctx, have - self._shift[seq], self.n_batch,
                         None if record is None else (lambda offset, n: record(have + offset, n, 0)), seq)
        if rc != 0:
            self._forget_past(seq)
            raise DecodeError(f"reading the picture failed with code {rc} ({recent_log_errors() or 'no detail'})")
        self.tokens[seq].extend([span.image.projector.placeholder] * span.n_tokens)
        self.images[seq].append(span)
        self._shift[seq] += span.shift
        if self._rollbacks is not None:
            self._rollbacks[seq].decoded(0)  # no snapshot reaches into a picture

    def _forget_past(self, seq: int) -> None:
        """Drop what a failed decode may have left in `seq`'s cache past what `tokens[seq]` holds
        (a recurrent state cannot drop it: the sequence starts again empty)."""
        if self.recurrent:
            self.clear(seq)
        else:
            llama_cpp.llama_memory_seq_rm(self._mem, seq, self.position(seq, len(self.tokens[seq])), -1)

    def truncate(self, seq: int, n: int) -> None:
        """Drop `seq`'s KV entries from index `n` on (its rejected drafts, a changed prompt); a
        picture `n` falls inside goes whole, as `Context.truncate` drops it."""
        if n >= len(self.tokens[seq]):
            return
        n = picture_cut(self.images[seq], n)
        if self._rollbacks is not None:
            self._rollbacks[seq].truncate(self.view(seq), n)
            return
        if not llama_cpp.llama_memory_seq_rm(self._mem, seq, self.position(seq, n), -1):
            raise DecodeError("this model's memory cannot be partially rolled back")
        self._cut(seq, n)

    def _cut(self, seq: int, n: int) -> None:
        """Forget `seq`'s tokens (and pictures) from index n on, once the cache has."""
        del self.tokens[seq][n:]
        if self.images[seq] and self.images[seq][-1].end > n:
            self.images[seq] = [s for s in self.images[seq] if s.end <= n]
            self._shift[seq] = sum(s.shift for s in self.images[seq])

    def guard(self, seq: int, batch: int, back: int) -> None:
        """Before `seq`'s next decode of `batch` rows that may be taken back by up to `back`: on a
        recurrent model, decode them alone (module docstring) and, where the snapshots will not
        reach that far, save a checkpoint of the sequence."""
        if self._rollbacks is not None:
            self._alone.add(seq)
            self._rollbacks[seq].guard(len(self.tokens[seq]), batch, back)

    def clear(self, seq: int) -> None:
        """Empty one sequence (its slot was freed); the others keep theirs."""
        llama_cpp.llama_memory_seq_rm(self._mem, seq, -1, -1)
        self.tokens[seq].clear()
        self.images[seq], self._shift[seq] = [], 0
        if self._rollbacks is not None:
            self._rollbacks[seq].forget()

    def save_state(self, seq: int) -> np.ndarray | None:
        """`seq`'s whole state, for the prompt cache (`Context.save_state`'s, on one sequence)."""
        return seq_state(self._ctx, seq)

    def load_state(self, seq: int, data: np.ndarray | bytearray, tokens: Sequence[int], images: Sequence[Any] = ()) -> bool:
        """Replace what `seq` holds by a state `save_state` made (on any sequence of a context of
        the same `state_identity`) after the keyed `tokens`; False, `seq` left empty, when
        llama.cpp refuses the bytes, they hold other positions, or name a picture not among `images`."""
        self.clear(seq)
        cells = state_cells(tokens, images)
        if cells is None or not set_seq_state(self._ctx, seq, data):
            self.clear(seq)
            return False
        plain, known = cells
        self.images[seq], self._shift[seq] = known, sum(s.shift for s in known)
        if int(llama_cpp.llama_memory_seq_pos_max(self._mem, seq)) != self.position(seq, len(plain) - 1):
            self.clear(seq)
            return False
        self.tokens[seq] = plain
        return True

    def view(self, seq: int) -> "SequenceView":
        return SequenceView(self, seq)

    def close(self) -> None:
        if getattr(self, "_ctx", None):
            free_context(self._ctx, self._batch)
            self._ctx = None


class SequenceView:
    """One sequence of a `SharedContext` seen as the single-sequence `Context` the decoder's
    step logic reads (tokens, room, roll-back); its decodes go through the shared batch."""

    def __init__(self, shared: SharedContext, seq: int):
        self.shared, self.seq = shared, seq
        self.model = shared.model
        self.n_ctx = shared.n_ctx_seq
        self.n_batch = shared.n_batch
        self.n_vocab = shared.n_vocab
        self.recurrent = shared.recurrent
        self.rollback_depth = shared.rollback_depth
        self.n_threads = shared.n_threads

    @property
    def _ctx(self) -> Any:
        """The shared llama.cpp context (what an MTP head links to and reads hidden states from)."""
        return self.shared._ctx

    @property
    def after_decode(self) -> Callable[[int, int, int], None] | None:
        """Called with (first index, count, row in the pass) after each decode of this sequence."""
        return self.shared.after_decode[self.seq]

    @after_decode.setter
    def after_decode(self, record: Callable[[int, int, int], None] | None) -> None:
        self.shared.after_decode[self.seq] = record

    @property
    def tokens(self) -> list[int]:
        return self.shared.tokens[self.seq]

    @property
    def images(self) -> list[Any]:
        return self.shared.images[self.seq]

    @property
    def n_past(self) -> int:
        return len(self.shared.tokens[self.seq])

    def position(self, index: int) -> int:
        return self.shared.position(self.seq, index)

    def reuse_prefix(self, tokens: Sequence[int], images: Sequence[Any] = ()) -> int:
        """Keep what this sequence already holds of `tokens` (the slot's last request began the
        same way), leaving the last token to decode; a picture kept is the same picture at the
        same place (`images`: those in `tokens`). Returns how many entries were kept. A recurrent
        state kept in part would be read again alone: it is dropped, and the prompt read in the
        shared passes instead."""
        keep = kept_prefix(self.tokens, self.images, tokens, images)
        if self.recurrent and keep < self.n_past:
            keep = 0
        self.truncate(keep)
        return self.n_past

    @property
    def state_identity(self) -> str:
        return self.shared.state_identity

    def keyed_tokens(self) -> np.ndarray:
        """`tokens` with each picture's cells as its content's key id (`Context.keyed_tokens`)."""
        return keyed(self.tokens, self.images)

    def save_state(self) -> np.ndarray | None:
        return self.shared.save_state(self.seq)

    def load_state(self, data: np.ndarray | bytearray, tokens: Sequence[int], images: Sequence[Any] = ()) -> bool:
        return self.shared.load_state(self.seq, data, tokens, images)

    def read_image(self, span: Any) -> None:
        """Read a picture at this sequence's end, in a decode of its own."""
        self.shared.read_image(self.seq, span)

    def truncate(self, n: int) -> None:
        self.shared.truncate(self.seq, n)

    def _cut(self, n: int) -> None:
        self.shared._cut(self.seq, n)

    # A recurrent state's way back reads the kept tokens again, alone, as a lone context does.
    feed = Context.feed
    _replay = Context._replay

    def _read_image(self, span: Any, *, abortable: bool = False) -> None:
        self.shared.read_image(self.seq, span)

    def clear(self) -> None:
        self.shared.clear(self.seq)

    def guard(self, batch: int, back: int) -> None:
        """Before a decode that may be taken back: a recurrent sequence's rows go alone, and a
        checkpoint is saved where the snapshots will not reach (nothing to do on attention)."""
        self.shared.guard(self.seq, batch, back)

    def decode(self, tokens: Sequence[int], *, logits: str = "last", abortable: bool = False) -> np.ndarray:
        """This sequence alone in a decode (the shared batch is the scheduler's)."""
        return self.shared.decode([Part(self.seq, tokens, logits)])[0]

    def close(self) -> None:
        """Nothing of its own to free: the shared context is the scheduler's to close."""

    def abort(self) -> None:
        """A cancel never aborts a shared decode (it carries the other slots' rows too): the
        scheduler frees the cancelled slot right after it."""
