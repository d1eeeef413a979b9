"""The two token stores the suffix drafter reads: this request's text (prompt + output so
far, indexed as it grows) and past answers (bounded, oldest evicted first, savable)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

from .history_file import DAMAGED_SUFFIX, DamagedHistory, read_tail
from .suffix_index import MATCH_LENGTHS, MAX_DEPTH, SEP, HashTable

DEFAULT_HISTORY_TOKENS = 262_144  # ~1 MiB on disk, ~10 MiB of tables in memory


class RequestStore:
    """This request's tokens: the prompt indexed in bulk (numpy), each later token as it comes
    (a dict per match length: a few operations per token)."""

    def __init__(self, prompt: Sequence[int] = ()):
        self.tokens: list[int] = [int(t) for t in prompt]
        self.table = HashTable()
        self.table.add(np.asarray(self.tokens, np.int64), 0)
        self.prompt_len = len(self.tokens)
        # n-grams ending after the prompt, by their tokens: a slice and a dict update per
        # match length and token (no hashing in Python)
        self.tail: dict[tuple[int, ...], list[int]] = {}

    def extend(self, new: Sequence[int]) -> None:
        toks, tail = self.tokens, self.tail
        for t in new:
            toks.append(int(t))
            end = len(toks)
            for n in MATCH_LENGTHS:
                if n > end:
                    break
                key = tuple(toks[end - n :])
                got = tail.get(key)
                if got is None:
                    tail[key] = [end]
                else:
                    got.append(end)

    def find(self, n: int, h: int, before: int) -> list[int]:
        """Positions (< before) after earlier occurrences of the context's n-gram (hashed h for
        the prompt's table), oldest first."""
        found = self.table.find(n, h).tolist()
        if before > self.prompt_len:
            found += self.tail.get(tuple(self.tokens[before - n : before]), ())
        return [p for p in found if p < before]

    def rows(self, positions: Sequence[int], limit: int) -> list[list[int]]:
        return [self.tokens[p : p + limit] for p in positions]


class AnswerStore:
    """Past answers, one after another with SEP between, at most `max_tokens` of them: when
    full, the oldest answers go first (down to 3/4, so eviction is rare)."""

    def __init__(self, max_tokens: int = DEFAULT_HISTORY_TOKENS):
        self.max_tokens = max(MAX_DEPTH * 4, int(max_tokens))
        self._clear()

    def _clear(self) -> None:
        self.store = np.zeros(1024, np.int32)
        self.size = 0
        self.lengths: list[int] = []  # per kept answer, oldest first (each followed by SEP)
        self.table = HashTable()

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def tokens(self) -> int:
        return self.size

    def add(self, answer: Sequence[int]) -> None:
        """Learn one answer (the last max_tokens of a longer one)."""
        seg = np.asarray(answer, np.int64)[-(self.max_tokens - 1) :]
        if len(seg) < 2 or (seg < 0).any():
            return
        if self.size + len(seg) + 1 > self.max_tokens:
            self._evict(self.max_tokens * 3 // 4 - len(seg) - 1)
        base = self.size
        self._append(seg)
        self.lengths.append(len(seg))
        self.table.add(seg, base)

    def _append(self, seg: np.ndarray) -> None:
        need = self.size + len(seg) + 1
        if need > len(self.store):
            grown = np.zeros(max(need, 2 * len(self.store)), np.int32)
            grown[: self.size] = self.store[: self.size]
            self.store = grown
        self.store[self.size : self.size + len(seg)] = seg
        self.store[self.size + len(seg)] = SEP
        self.size = need

    def _evict(self, keep_tokens: int) -> None:
        """Drop the oldest answers until at most keep_tokens remain; re-index the rest."""
        kept = self.answers()
        while kept and sum(len(a) + 1 for a in kept) > max(0, keep_tokens):
            kept.pop(0)
        self._add_many(kept)

    def _add_many(self, answers: "list[np.ndarray]") -> None:
        """Start over with these answers, indexed in one pass."""
        self._clear()
        segments = []
        for a in answers:
            segments.append((a.astype(np.int64), self.size))
            self._append(a)
            self.lengths.append(len(a))
        self.table.add_many(segments)

    def answers(self) -> list[np.ndarray]:
        out, at = [], 0
        for n in self.lengths:
            out.append(self.store[at : at + n].copy())
            at += n + 1
        return out

    def find(self, n: int, h: int) -> list[int]:
        return self.table.find(n, h).tolist()

    def rows(self, positions: Sequence[int], limit: int) -> list[list[int]]:
        return [self.store[p : p + limit].tolist() for p in positions]

    def clear(self) -> None:
        self._clear()

    # -- on disk: the kept answers as one int32 array (SEP after each) -------------------------
    def save(self, path: Path) -> None:
        """Write atomically (a crash leaves the old file or the new one, never half)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                np.save(f, self.store[: self.size], allow_pickle=False)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def load(self, path: Path, n_vocab: int) -> None:
        """Read a saved history (its newest `max_tokens` only); OSError when it cannot be read,
        DamagedHistory (a ValueError) when the file is not one (of this vocabulary)."""
        arr, cut = read_tail(path, self.max_tokens)
        if cut:  # the oldest kept answer lost its start: drop it
            first = np.flatnonzero(arr == SEP)
            arr = arr[int(first[0]) + 1 :] if len(first) else arr[:0]
        if len(arr) and (arr.max() >= n_vocab or arr.min() < SEP or arr[-1] != SEP):
            raise DamagedHistory("tokens outside this model's vocabulary")
        answers, start = [], 0
        for e in np.flatnonzero(arr == SEP):
            if e - start >= 2:
                answers.append(arr[start:e])
            start = int(e) + 1
        self._add_many(answers)


def clear_history_files(folder: Path) -> int:
    """Delete every saved answer history in `folder` (all targets, and those set aside as
    damaged); how many went."""
    gone = 0
    found = [*folder.glob("*.npy"), *folder.glob(f"*.npy{DAMAGED_SUFFIX}")] if folder.is_dir() else []
    for f in found:
        f.unlink(missing_ok=True)
        gone += 1
    return gone
