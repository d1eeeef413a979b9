"""Taking a hybrid or recurrent model's sequence back exactly: the one way `Context` and each
sequence of a `SharedContext` roll back a state that a plain truncation cannot rewind.

Three ways, the cheapest first: llama.cpp's per-token snapshots of the sequence's last decode
(`n_rs_seq` of them, kept per sequence: a roll-back on one sequence sets only its own snapshot
index), else the checkpoint `guard` saved before that decode (the sequence's recurrent state
through `llama_state_seq_get_data_ext`, partial only: the attention cells stay), else reading
the kept tokens again from the start.
"""

from __future__ import annotations

import ctypes
from typing import Any, Protocol, Sequence

import llama_cpp  # noqa: E402


class RollbackOwner(Protocol):
    """What a roll-back needs of the sequence it takes back (a `Context`, a `SequenceView`)."""

    tokens: list[int]
    images: list[Any]

    @property
    def n_past(self) -> int: ...

    def position(self, index: int) -> int: ...

    def clear(self) -> None: ...

    def _cut(self, n: int) -> None: ...

    def _replay(self, tokens: Sequence[int], images: Sequence[Any] = ()) -> None: ...


class Rollback:
    """One sequence's way back on a model with a recurrent state (sequence `seq` of the context
    `ctx`, whose memory is `mem`; `depth`: the snapshots llama.cpp really keeps)."""

    def __init__(self, ctx: Any, mem: Any, seq: int, depth: int):
        self._ctx, self._mem, self.seq, self.depth = ctx, mem, seq, depth
        self.last_batch = 0  # tokens of the sequence's last decode: the snapshots cover only those
        self.rolled = False  # a snapshot roll-back is single-use until the next decode
        self.checkpoint: tuple[int, ctypes.Array] | None = None  # (n_past, recurrent state)

    def decoded(self, n: int) -> None:
        """The sequence just took `n` tokens in one decode (0: a picture, no snapshot reaches into it)."""
        self.last_batch, self.rolled = n, False

    def forget(self) -> None:
        """The sequence was emptied: nothing of it to come back to."""
        self.checkpoint = None
        self.last_batch = 0

    def reaches(self, batch: int, back: int) -> bool:
        """Whether the snapshots of a decode of `batch` tokens take `back` of them back (they
        hold the states after each of its tokens but its first)."""
        return back <= min(self.depth, batch - 1)

    def guard(self, held: int, batch: int, back: int) -> None:
        """Before a decode of `batch` tokens that may be taken back by up to `back`, the sequence
        holding `held`: where the snapshots will not reach that far, save a checkpoint."""
        if not self.reaches(batch, back):
            self.mark(held)

    def mark(self, held: int) -> None:
        """Save the sequence's recurrent state after its `held` tokens (`truncate` restores it)."""
        flags = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY
        size = int(llama_cpp.llama_state_seq_get_size_ext(self._ctx, self.seq, flags))
        old = self.checkpoint
        buf = old[1] if old is not None and len(old[1]) == size else (ctypes.c_uint8 * size)()
        got = int(llama_cpp.llama_state_seq_get_data_ext(self._ctx, buf, size, self.seq, flags))
        self.checkpoint = (held, buf) if got == size else None

    def truncate(self, owner: RollbackOwner, n: int) -> None:
        """Take `owner` back to its first `n` entries (fewer than it holds, never inside a picture)."""
        if self.checkpoint is not None and n < self.checkpoint[0]:
            self.checkpoint = None  # the positions it was saved after are being rewritten
        if (not self.rolled and self.reaches(self.last_batch, owner.n_past - n)
                and llama_cpp.llama_memory_seq_rm(self._mem, self.seq, owner.position(n), -1)):
            owner._cut(n)
            self.rolled = True
            return
        self._rewind(owner, n)

    def _rewind(self, owner: RollbackOwner, n: int) -> None:
        """Back to entry n through the checkpoint (or the start), reading the kept tokens again."""
        kept = owner.tokens[:n]
        images = [s for s in owner.images if s.end <= n]
        cp = self.checkpoint
        if cp is not None and cp[0] <= n:
            flags = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY
            restored = int(llama_cpp.llama_state_seq_set_data_ext(self._ctx, cp[1], len(cp[1]), self.seq, flags)) > 0
            if restored and llama_cpp.llama_memory_seq_rm(self._mem, self.seq, owner.position(cp[0]), -1):
                owner._cut(cp[0])
                owner._replay(kept[cp[0]:], images)
                return
        owner.clear()
        owner._replay(kept, images)
