"""Keeping chats: every chat out to one JSON file and back in (File → Export all chats…,
Import chats…), a message deleted, a chat forked from an answer.

Export and import run on a worker thread (a history of years with documents in it is tens of
megabytes of JSON), each ending in one line: how many chats went where, or why not (a file
that is not an export, a field that is wrong, a disk that is full) with the history as it was.
What deleting and forking do to versions and branches is app/history/editing.py's.

`ChatKeeping` is the page's: it is given the history, the page (dialogs' parent), whether an
answer is being written, and where its lines go; it tells the page with `changed` that the
list must be read again, with `reopen` that a chat must be shown again (or a fork opened).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from ... import workers
from ...history import History, HistoryError
from ...history.archive import import_chats, read_archive, write_archive
from ...history.archive_check import ArchiveError
from ...history.editing import delete_shown, fork_at
from ...widgets.controls.toast import toast

ARCHIVE_FILTER = "Tandem chat export (*.json);;All files (*)"


class ArchiveJob(workers.Worker):
    """An export or an import off the GUI thread: `job` returns the line that says what it did."""

    done = Signal(str)

    def __init__(self, job: Callable[[], str], path: str) -> None:
        super().__init__()
        self._job, self._path = job, path

    def work(self) -> None:
        try:
            self.done.emit(self._job())
        except ArchiveError as e:
            self.failed.emit(str(e))
        except HistoryError:
            pass  # the history told the window already (on_write_error)
        except OSError as e:
            self.failed.emit(f"{self._path}: cannot write it ({e.strerror or e})")


def default_archive_name() -> str:
    return f"Tandem chats {time.strftime('%Y-%m-%d')}.json"


class ChatKeeping(QObject):
    """Export all, import, delete a message, fork a chat (see the module's docstring)."""

    changed = Signal()  # chats were added: the list is read again
    reopen = Signal(int)  # this chat changed (a message deleted) or is new (a fork): show it

    def __init__(self, history: History, page: QWidget, *, busy: Callable[[], bool],
                 notify: Callable[[str], None], fail: Callable[[str], None]) -> None:
        super().__init__(page)
        self._history, self._page, self._busy, self._notify, self._fail = history, page, busy, notify, fail
        self.job: ArchiveJob | None = None  # the export or import running, if any

    # -- every chat, out and in --------------------------------------------------------------
    def export_all(self, path: str | None = None) -> None:
        """Every chat to one JSON file (a save dialog when `path` is None)."""
        if path is None:
            start = str(Path.home() / default_archive_name())
            path, _ = QFileDialog.getSaveFileName(self._page, "Export all chats", start, ARCHIVE_FILTER)
            if not path:
                return
            if not Path(path).suffix:
                path += ".json"
        target = path

        def job() -> str:
            n = write_archive(self._history, target)
            return f"Exported {n} chat{'' if n == 1 else 's'} to {target}"
        self._run(job, target)

    def import_chats(self, path: str | None = None) -> None:
        """Add the chats of an export to this profile (an open dialog when `path` is None)."""
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self._page, "Import chats", str(Path.home()), ARCHIVE_FILTER)
            if not path:
                return
        source = path

        def job() -> str:
            return f"{import_chats(self._history, read_archive(source)).line()} from {Path(source).name}"
        self._run(job, source, changes=True)

    def _run(self, job: Callable[[], str], path: str, changes: bool = False) -> None:
        if self.job is not None:
            self._notify("An export or import is already running")
            return
        self.job = worker = ArchiveJob(job, path)
        worker.done.connect(self._done)
        worker.failed.connect(self._fail)
        if changes:
            worker.finished.connect(self.changed.emit)
        worker.finished.connect(self._finished)
        workers.start(worker)

    def _done(self, line: str) -> None:
        self._notify(line)
        toast(self._page, line.split(" to ")[0].split(" from ")[0])

    def _finished(self) -> None:
        self.job = None

    # -- one message ---------------------------------------------------------------------------
    def act(self, action: str, message_id: int) -> None:
        """A message's link: Delete or Fork (the others are asking.py's)."""
        if action not in ("delete", "fork"):
            return
        if self._busy():
            self._notify("Stop the running answer first")
            return
        try:
            self.fork(message_id) if action == "fork" else self.delete(message_id)
        except KeyError:
            self._notify("That message is not in the history any more")
        except HistoryError:
            pass  # the window has said so; the chat is as it was

    def delete(self, message_id: int) -> None:
        m = self._history.message(message_id)
        what = ("this version of the answer" if m.role == "assistant" and m.versions > 1 else
                "this version of the message, with what followed it" if m.versions > 1 else
                "this answer" if m.role == "assistant" else "this message and its answer")
        if QMessageBox.question(self._page, "Delete", f"Delete {what}? This cannot be undone.") \
                != QMessageBox.StandardButton.Yes:
            return
        gone = delete_shown(self._history, message_id)
        self._notify(f"Deleted {gone}")
        self.reopen.emit(m.conversation_id)

    def fork(self, answer_id: int) -> None:
        conv = fork_at(self._history, answer_id)
        self._notify(f"Forked into “{conv.title}”: the conversation up to that answer")
        toast(self._page, "Forked into a new chat")
        self.reopen.emit(conv.id)
