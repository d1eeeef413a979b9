"""The data structures behind the suffix drafter: where a context's last tokens occurred
before, and what most often followed them there (SuffixDecoding, arXiv 2411.04975).

A suffix tree of depth D answers "the longest suffix of the context seen before, and the
frequency of each continuation". Here the same answers come from hashed n-gram tables over a
flat token store, for match lengths `MATCH_LENGTHS` (up to 24, the paper's tree depth): a
table maps the hash of an n-gram to the positions just after its occurrences, and the
continuation is read from the store at those positions. The occurrences of a match sorted by
what follows are the subtree below the matched node, so walking "the most frequent child"
is counting the next token over the surviving positions. In Python this costs a few dict or
array operations per token instead of one node per depth level per token, and the store and
tables take ~40 bytes per token instead of a few hundred for a Python trie.

Hashes are 64-bit polynomials; a collision can only make a draft wrong, and the target's
verification rejects wrong drafts, so outputs never depend on them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

MATCH_LENGTHS = (1, 2, 3, 4, 6, 8, 12, 16, 24)
MAX_DEPTH = MATCH_LENGTHS[-1]
SEP = -1  # ends a stored answer: no continuation reads past it
MAX_CANDIDATES = 64  # occurrences of a match a walk reads (the most recent)
_B = 0x100000001B3  # the polynomial's base (odd)
_MASK = (1 << 64) - 1
_POW = [pow(_B, i, 1 << 64) for i in range(MAX_DEPTH)]


def suffix_hashes(tokens: Sequence[int], end: int) -> dict[int, int]:
    """Hash of tokens[end-n:end] for every n in MATCH_LENGTHS that fits (the same values
    `hash_table` computes in bulk)."""
    out: dict[int, int] = {}
    h = 0
    top = min(MAX_DEPTH, end)
    for i in range(top):
        h = (h + (int(tokens[end - 1 - i]) + 1) * _POW[i]) & _MASK
        if i + 1 in _LENGTH_SET:
            out[i + 1] = h
    return out


_LENGTH_SET = frozenset(MATCH_LENGTHS)


def bulk_hashes(tokens: np.ndarray, n: int) -> np.ndarray:
    """Hashes of every n-gram of `tokens` (one per start position), as uint64."""
    t = tokens.astype(np.uint64) + np.uint64(1)
    if len(t) < n:
        return np.zeros(0, np.uint64)
    h = t[: len(t) - n + 1].copy()
    with np.errstate(over="ignore"):
        for j in range(1, n):
            h = h * np.uint64(_B) + t[j : len(t) - n + 1 + j]
    return h


@dataclass
class HashTable:
    """n-gram hash -> positions just after its occurrences, sorted by (hash, position), for
    each match length; built in bulk and merged with later segments in O(size)."""

    keys: dict[int, np.ndarray] = field(default_factory=lambda: {n: np.zeros(0, np.uint64) for n in MATCH_LENGTHS})
    pos: dict[int, np.ndarray] = field(default_factory=lambda: {n: np.zeros(0, np.int64) for n in MATCH_LENGTHS})

    def add(self, segment: np.ndarray, base: int) -> None:
        """Index `segment`, stored from position `base` (its n-grams only: none spans segments)."""
        self.add_many([(segment, base)])

    def add_many(self, segments: "Sequence[tuple[np.ndarray, int]]") -> None:
        """Index several segments at once (one sort per match length, not one per segment)."""
        for n in MATCH_LENGTHS:
            hs = [bulk_hashes(seg, n) for seg, _ in segments]
            ps = [np.arange(base + n, base + len(seg) + 1, dtype=np.int64) for (seg, base) in segments]
            new_k = np.concatenate(hs) if hs else np.zeros(0, np.uint64)
            if not len(new_k):
                continue
            new_p = np.concatenate([p[: len(h)] for p, h in zip(ps, hs)])
            order = np.argsort(new_k, kind="stable")  # positions ascend within a key
            new_k, new_p = new_k[order], new_p[order]
            if not len(self.keys[n]):
                self.keys[n], self.pos[n] = new_k, new_p
                continue
            at = self.keys[n].searchsorted(new_k, side="right")  # after older equal keys
            self.keys[n] = np.insert(self.keys[n], at, new_k)
            self.pos[n] = np.insert(self.pos[n], at, new_p)

    def find(self, n: int, h: int) -> np.ndarray:
        """Positions after occurrences of the n-gram with hash h, oldest first (the last
        MAX_CANDIDATES)."""
        keys = self.keys[n]
        if not len(keys):
            return keys
        key = np.uint64(h)
        lo, hi = int(keys.searchsorted(key, "left")), int(keys.searchsorted(key, "right"))
        return self.pos[n][max(lo, hi - MAX_CANDIDATES) : hi]

    @property
    def entries(self) -> int:
        return sum(len(k) for k in self.keys.values())


@dataclass
class Draft:
    """A continuation read from one store: tokens, each one's conditional frequency, the
    summed path probability (the paper's score) and the match it continues."""

    tokens: list[int] = field(default_factory=list)
    probs: list[float] = field(default_factory=list)
    score: float = 0.0
    match_len: int = 0


def walk(rows: list[list[int]], match_len: int, limit: int, min_prob: float) -> Draft:
    """Follow the most frequent continuation of the occurrences `rows` (each the tokens after
    one occurrence, oldest first, SEP or nothing past its end) while the product of the
    chosen tokens' frequencies stays >= min_prob; ties go to the most recent occurrence."""
    out = Draft(match_len=match_len)
    path = 1.0
    for j in range(limit):
        if len(rows) == 1:  # one occurrence left: its text, with frequency 1 per token
            for tok in rows[0][j:limit]:
                if tok < 0:
                    break
                out.tokens.append(tok)
                out.probs.append(1.0)
                out.score += path
            return out
        nxt = [r[j] if j < len(r) else SEP for r in rows]
        counts = Counter(t for t in nxt if t >= 0)
        if not counts:
            break
        best_n = max(counts.values())
        tok = next(t for t in reversed(nxt) if counts.get(t) == best_n)  # the most recent of the best
        p = best_n / len(rows)
        if path * p < min_prob:
            break
        path *= p
        out.tokens.append(tok)
        out.probs.append(p)
        out.score += path
        rows = [r for r, t in zip(rows, nxt) if t == tok]
    return out
