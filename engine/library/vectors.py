"""Passages as vectors beside the text index, when an embedding model is given: ranking by
meaning, so a question that shares no word with the passage that answers it still finds it.

The vectors are float32 BLOBs in the index's own SQLite file (table `vectors`, one row per
passage, keyed by its id) and a question is scored against all of them with numpy (the rows
are L2-normalised, so the cosine is a dot product). That is plenty for a folder's thousands
of passages (10,000 passages of 768 dimensions are 30 MB read per question); sqlite-vec would
index them but is another native extension, not installed here.

Kept current as the text index is: a changed file's passages are replaced (new ids, no
vectors yet), so an update embeds only those; an unchanged file keeps its vectors; the model
that made them is named in `meta`, and another model's vectors are dropped and rebuilt. An
update embeds at most MAX_VECTORS passages, in batches, cancelled between texts (what was
embedded is kept).
"""

from __future__ import annotations

import sqlite3
import time
from typing import Callable, Protocol, Sequence

import numpy as np

from ..errors import Cancelled
from .store import IndexStore

MAX_VECTORS = 50_000  # passages embedded in one index; past it the rest are ranked by their words alone
BATCH = 16  # passages per embed call (a cancel is seen between texts, a commit between batches)
COMMIT_EVERY_S = 1.0
META_KEY = "embed_model"
Progress = Callable[[int, int, str], None]


class Embedder(Protocol):
    """What the Library embeds with (engine/llamacpp/text_embedder.py's TextEmbedder, or a
    test's stand-in): `name` identifies the model (another name: the vectors are rebuilt)."""

    name: str
    dims: int

    def embed(self, texts: Sequence[str], *, query: bool = False,
              stop: Callable[[], bool] | None = None) -> np.ndarray:
        """One L2-normalised float32 row per text; `query`: a question, not a passage."""
        ...


def passage_text(path: str, unit: str, anchor: str, text: str) -> str:
    """What a passage's vector is made of: where it is (its file and place) and its words."""
    return f"{path}, {unit} {anchor}\n{text}"


def embedded_by(db: sqlite3.Connection) -> str:
    """The name of the model the index's vectors were made by ("" when none)."""
    row = db.execute("SELECT value FROM meta WHERE key=?", (META_KEY,)).fetchone()
    return row[0] if row else ""


def vector_count(db: sqlite3.Connection) -> int:
    return db.execute("SELECT count(*) FROM vectors").fetchone()[0]


def embed_missing(store: IndexStore, embedder: Embedder, progress: Progress | None = None,
                  cancelled: Callable[[], bool] = lambda: False) -> tuple[int, int, bool]:
    """Embed the passages that have no vector (all of them after a change of model).
    Returns (embedded now, left out past MAX_VECTORS, cancelled)."""
    db = store.db
    if embedded_by(db) != embedder.name:
        db.execute("DELETE FROM vectors")
        db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (META_KEY, embedder.name))
        db.commit()
    room = max(0, MAX_VECTORS - vector_count(db))
    missing = db.execute("SELECT count(*) FROM passages p LEFT JOIN vectors v ON v.id = p.id "
                         "WHERE v.id IS NULL").fetchone()[0]
    total, left_out = min(missing, room), max(0, missing - room)
    done, last_id, last_commit = 0, -1, time.monotonic()
    try:
        while done < total:
            if cancelled():
                return done, left_out, True
            rows = db.execute("SELECT p.id, p.path, p.unit, p.anchor, p.text FROM passages p "
                              "LEFT JOIN vectors v ON v.id = p.id WHERE v.id IS NULL AND p.id > ? "
                              "ORDER BY p.id LIMIT ?", (last_id, min(BATCH, total - done))).fetchall()
            if not rows:
                break
            if progress:
                progress(done, total, f"meaning of {rows[0][1]}")
            vecs = embedder.embed([passage_text(*r[1:]) for r in rows], stop=cancelled)
            db.executemany("INSERT OR REPLACE INTO vectors(id, vec) VALUES (?, ?)",
                           [(r[0], np.ascontiguousarray(v, dtype="<f4").tobytes()) for r, v in zip(rows, vecs)])
            done, last_id = done + len(rows), rows[-1][0]
            if time.monotonic() - last_commit > COMMIT_EVERY_S:
                db.commit()
                last_commit = time.monotonic()
    except Cancelled:
        return done, left_out, True
    finally:
        db.commit()
    if progress and total:
        progress(total, total, "")
    return done, left_out, False


def nearest(db: sqlite3.Connection, query: np.ndarray, model: str, limit: int) -> list[tuple[int, float]]:
    """(passage id, cosine) of the `limit` passages nearest `query`, best first; none when the
    index's vectors were made by another model than `model` (they are rebuilt at the next update)."""
    if limit < 1 or embedded_by(db) != model:
        return []
    rows = db.execute("SELECT id, vec FROM vectors ORDER BY id").fetchall()
    width = 4 * len(query)
    rows = [r for r in rows if len(r[1]) == width]
    if not rows:
        return []
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), len(query))
    scores = matrix @ np.asarray(query, dtype=np.float32)
    order = np.lexsort((ids, -scores))[:limit]  # best first; a tie by passage id, so runs agree
    return [(int(ids[i]), float(scores[i])) for i in order]
