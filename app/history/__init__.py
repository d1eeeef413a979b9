"""Conversations on disk: store.py (the SQLite history: conversations with their pins and
folders, messages, answer versions), markdown.py (a message as Markdown, why an answer
stopped, an answer's tool calls, a Library answer's references), search.py (the full-text index and search with snippets), branches.py (edited
questions kept as versions), settings.py (each chat's own generation settings), pictures.py (a
question's pictures: named in its parts, their bytes kept once by sha256), archive.py
with archive_check.py (every chat out to one JSON file and back in, checked before it is
written), editing.py (delete a message as shown, fork a chat at an answer), readonly.py (a read-only file: a copy to work in) and repair.py (a damaged file
moved aside and salvaged).

Plain sqlite3, no Qt. May import engine/ and the standard library; never app's other rooms
(workers, widgets, views, main_window). Its public names are importable from `app.history`.
"""

from .markdown import call_state, calls_markdown
from .store import (Conversation, History, HistoryError, Message, answer_sources, close_open_fence, message_markdown,
                    references_markdown, source_place, stop_reason)

__all__ = ["Conversation", "History", "HistoryError", "Message", "answer_sources", "call_state", "calls_markdown",
           "close_open_fence", "message_markdown", "references_markdown", "source_place", "stop_reason"]
