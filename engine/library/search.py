"""The passages that best answer a question, ranked by BM25 over the index's FTS5 table (the
question's words, stemmed, any of them: a rare word such as a project's name weighs most)."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

# Words that say nothing about which passage holds the answer (English; others stay as they are).
STOPWORDS = frozenset("""a an and are as at be by can could did do does for from had has have how i if in into is it
its me my of on or our should so than that the their them then there these they this to was we were what when where
which who whom whose why will with would you your about tell give list show please""".split())
NAME_WEIGHT = 0.5  # a word in the file's name counts half as much as one in its text
# A passage scoring under this share of the best one matched only the question's common words
# ("project", "budget" in every brief): offered as a source it invites a small model to mix
# another file's facts into the answer.
RELATIVE_FLOOR = 0.25


@dataclass(frozen=True)
class Hit:
    """One ranked passage. `score` is BM25 (higher is better; comparable within one question)."""

    path: str
    unit: str
    anchor: str
    text: str
    score: float

    @property
    def where(self) -> str:
        """How a citation names the place: "page 3", "sheet Budget", "lines 12-40", "section Overview"."""
        return f"{self.unit} {self.anchor}"


def query_terms(question: str) -> list[str]:
    """The question's words that can tell passages apart, each once, in order."""
    words = re.findall(r"\w+", question.lower())
    return list(dict.fromkeys(w for w in words if w not in STOPWORDS and (len(w) > 1 or w.isdigit())))


def search(db: sqlite3.Connection, question: str, top: int) -> list[Hit]:
    """The `top` best passages for `question` (none when it has no searchable word), less those
    far below the best (RELATIVE_FLOOR)."""
    terms = query_terms(question)
    if not terms or top < 1:
        return []
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    rows = db.execute(
        "SELECT p.path, p.unit, p.anchor, p.text, bm25(passages_fts, 1.0, ?) AS rank "
        "FROM passages_fts JOIN passages p ON p.id = passages_fts.rowid "
        "WHERE passages_fts MATCH ? ORDER BY rank, p.path, p.ord LIMIT ?", (NAME_WEIGHT, match, top)).fetchall()
    hits = [Hit(path, unit, anchor, text, round(-rank, 4)) for path, unit, anchor, text, rank in rows]
    best = hits[0].score if hits else 0.0
    return [h for h in hits if h.score >= RELATIVE_FLOOR * best]
