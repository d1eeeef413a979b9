"""The Library: folders of documents asked as one, answers with sources. A folder's files are
read through engine/documents/, cut into passages anchored by page, sheet, slide, heading or
line range (chunks.py), kept in a SQLite index with FTS5 under Tandem's data folder
(store.py), brought up to date by modification time and content digest with progress, cancel
and unreadable files listed (indexer.py), optionally watched with watchdog so a long-lived
process re-reads only what changed (watch.py), ranked by BM25 (search.py), and put into a
prompt within its token budget with numbered sources to cite (asking.py). `Library`
(library.py) holds them together for `tandem ask` and the app.

With an embedding model (the catalog's nomic-embed-text once pulled, or one named), each
passage also gets a vector, kept in the same SQLite file as float32 BLOBs and scored with numpy
(vectors.py), and BM25 and the vectors are fused by reciprocal rank (k = 60); without one,
ranking is BM25 alone. The model is loaded by the caller (engine/llamacpp/text_embedder.py)
and handed in as an `Embedder`: nothing here loads a model, and nothing leaves the machine.
This room may import only engine's helpers (errors, paths, units) and engine.documents; the
token count a prompt is fitted with is handed in by the caller.
"""

from .asking import AskPrompt, DraftRuns, drafted_from, fit_prompt, fit_to_context, source_entry, sources_lines
from .indexer import IndexReport
from .library import Library
from .search import Hit
from .store import index_path
from .vectors import Embedder

__all__ = ["Library", "IndexReport", "Hit", "AskPrompt", "fit_prompt", "fit_to_context", "source_entry",
           "sources_lines", "DraftRuns", "drafted_from", "index_path", "Embedder"]
