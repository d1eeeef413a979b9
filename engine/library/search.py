"""The passages that best answer a question, ranked by BM25 over the index's FTS5 table (the
question's words, stemmed, any of them: a rare word such as a project's name weighs most).

With an embedding model, the passages nearest the question's vector (vectors.py) are a second
ranking, and the two are combined by reciprocal rank fusion (Cormack et al. 2009: each passage
scores the sum of 1 / (RRF_K + its rank) over the rankings it is in, k = 60): a passage both
find rises, one only the vectors find (no word shared with the question) still comes. Without
vectors the ranking is BM25 alone, as before."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .vectors import nearest

# Words that say nothing about which passage holds the answer (English; others stay as they are).
STOPWORDS = frozenset("""a an and are as at be by can could did do does for from had has have how i if in into is it
its me my of on or our should so than that the their them then there these they this to was we were what when where
which who whom whose why will with would you your about tell give list show please""".split())
NAME_WEIGHT = 0.5  # a word in the file's name counts half as much as one in its text
# A passage scoring under this share of the best one matched only the question's common words
# ("project", "budget" in every brief): offered as a source it invites a small model to mix
# another file's facts into the answer.
RELATIVE_FLOOR = 0.25
RRF_K = 60  # reciprocal rank fusion's constant (the paper's, and the usual one)
POOL = 50  # passages taken from each ranking before they are fused


@dataclass(frozen=True)
class Hit:
    """One ranked passage. `score` is BM25, or with vectors the fused score (higher is better;
    comparable within one question); `cosine` its similarity to the question when vectors ranked."""

    path: str
    unit: str
    anchor: str
    text: str
    score: float
    cosine: float | None = None
    fused: bool = False  # `score` is reciprocal rank fusion's, not BM25's

    @property
    def where(self) -> str:
        """How a citation names the place: "page 3", "sheet Budget", "lines 12-40", "section Overview"."""
        return f"{self.unit} {self.anchor}"


def query_terms(question: str) -> list[str]:
    """The question's words that can tell passages apart, each once, in order."""
    words = re.findall(r"\w+", question.lower())
    return list(dict.fromkeys(w for w in words if w not in STOPWORDS and (len(w) > 1 or w.isdigit())))


def search(db: sqlite3.Connection, question: str, top: int,
           vector: tuple[str, Sequence[float]] | None = None) -> list[Hit]:
    """The `top` best passages for `question`. `vector`: (the model's name, the question's
    vector) to fuse with the nearest passages; without it, BM25 alone (none when the question
    has no searchable word), less those far below the best (RELATIVE_FLOOR)."""
    if top < 1:
        return []
    if vector is None:
        return _bm25(db, question, top)
    model, query = vector
    text = _bm25(db, question, max(POOL, top), with_ids=True)
    near = nearest(db, np.asarray(query, dtype=np.float32), model, max(POOL, top))
    fused: dict[int, float] = {}
    for ranking in ([pid for pid, _ in text], [pid for pid, _ in near]):
        for rank, pid in enumerate(ranking, 1):
            fused[pid] = fused.get(pid, 0.0) + 1.0 / (RRF_K + rank)
    cosines = dict(near)
    best = sorted(fused, key=lambda pid: (-fused[pid], pid))[:top]
    rows = {r[0]: r[1:] for r in db.execute(
        f"SELECT id, path, unit, anchor, text FROM passages WHERE id IN ({','.join('?' * len(best))})", best)}
    return [Hit(*rows[pid], round(fused[pid], 6), None if pid not in cosines else round(cosines[pid], 4), True)
            for pid in best if pid in rows]


def _bm25(db: sqlite3.Connection, question: str, top: int, *, with_ids: bool = False) -> list:
    """BM25's `top` (less those under RELATIVE_FLOOR of the best): Hits, or (passage id, Hit)."""
    terms = query_terms(question)
    if not terms:
        return []
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    rows = db.execute(
        "SELECT p.id, p.path, p.unit, p.anchor, p.text, bm25(passages_fts, 1.0, ?) AS rank "
        "FROM passages_fts JOIN passages p ON p.id = passages_fts.rowid "
        "WHERE passages_fts MATCH ? ORDER BY rank, p.path, p.ord LIMIT ?", (NAME_WEIGHT, match, top)).fetchall()
    hits = [(pid, Hit(path, unit, anchor, text, round(-rank, 4))) for pid, path, unit, anchor, text, rank in rows]
    best = hits[0][1].score if hits else 0.0
    kept = [(pid, h) for pid, h in hits if h.score >= RELATIVE_FLOOR * best]
    return kept if with_ids else [h for _, h in kept]
