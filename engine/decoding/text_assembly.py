"""Token bytes to whole UTF-8 text, with stop strings held back until they cannot match.

A token may end inside a multi-byte character, and a stop string may begin in one token and
end in a later one; the decoder emits only text that can no longer change or be cut.
"""

from __future__ import annotations

import codecs
from typing import Sequence


class TextAssembler:
    """Turns token bytes into whole UTF-8 text, holding back possible stop-string prefixes.

    Each token becomes a pending entry (its completed characters); entries are released
    once no stop string could still begin inside them. When a stop string appears, the text
    before it is released and the rest dropped.
    """

    def __init__(self, stop: Sequence[str]):
        self.stop = [s for s in stop if s]
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text = ""  # all decoded text, including pending
        self.released = 0  # chars of self.text already released
        self.pending: list[tuple[int, str, int]] = []  # (token index, text, end offset in self.text)
        self.stopped = False

    def add(self, index: int, data: bytes) -> list[tuple[int, str]]:
        piece = self.decoder.decode(data)
        self.text += piece
        self.pending.append((index, piece, len(self.text)))
        return self._release()

    def _release(self) -> list[tuple[int, str]]:
        if self.stop:
            lo = max(0, self.released - max(len(s) for s in self.stop))
            hits = [i for i in (self.text.find(s, lo) for s in self.stop) if i >= 0]
            if hits:
                cut = min(hits)
                self.stopped = True
                return self._emit_until(cut, trim=True)
            safe = len(self.text) - self._held_suffix()
        else:
            safe = len(self.text)
        return self._emit_until(safe, trim=False)

    def _held_suffix(self) -> int:
        """Length of the longest text suffix that is a proper prefix of a stop string."""
        best = 0
        for s in self.stop:
            for n in range(min(len(s) - 1, len(self.text)), best, -1):
                if self.text.endswith(s[:n]):
                    best = n
                    break
        return best

    def _emit_until(self, limit: int, *, trim: bool) -> list[tuple[int, str]]:
        out: list[tuple[int, str]] = []
        while self.pending:
            idx, piece, end = self.pending[0]
            start = end - len(piece)
            if end <= limit:
                out.append((idx, piece))
                self.pending.pop(0)
            elif trim and start < limit:
                out.append((idx, piece[: limit - start]))
                self.pending.pop(0)
                break
            else:
                break
        if trim:
            self.pending.clear()
            self.text = self.text[:limit]
        self.released = max(self.released, min(limit, len(self.text)))
        return out

    def flush(self) -> list[tuple[int, str]]:
        tail = self.decoder.decode(b"", final=True)
        if tail and self.pending:
            idx, piece, end = self.pending[-1]
            self.pending[-1] = (idx, piece + tail, end + len(tail))
            self.text += tail
        return self._emit_until(len(self.text), trim=False)
