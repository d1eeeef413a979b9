"""The Library page: how passages are ranked (words, or meaning too with an embedding model:
ranking.py), the folders the user asks from the chat, each with its indexing progress, its
counts and the files that could not be read (one line each); Add folder, Re-index, Stop and
Remove. The folders and their updates are app/library_shelf.py's (LibraryShelf); the
chat asks them through it.

May import widgets/, app's core modules (library_shelf, workers) and engine/; never another
page, main_window or main."""

from .page import LibraryView

__all__ = ["LibraryView"]
