"""A watched folder: watchdog's observer notes which paths under it were created, changed,
moved or deleted, so a long-lived process (the app, `tandem serve`) re-indexes only those on
the next question, without walking the folder. Reading a file (the indexer's own opens) marks
nothing. watchdog is the optional extra `library`, imported only when a watch starts."""

from __future__ import annotations

import threading
from pathlib import Path

from ..errors import TandemError
from .indexer import inside

MAX_NOTED = 10_000  # more changed paths than this: the next update walks the whole folder instead
_CHANGES = ("created", "modified", "deleted", "moved", "closed")  # not "opened", not "closed_no_write"


class FolderWatch:
    """Paths changed under `folder` since the last `take()`. Thread-safe: the observer's thread
    notes, the asking thread takes."""

    def __init__(self, folder: Path, excluded: frozenset[str] = frozenset()):
        """`excluded`: folders under `folder` whose changes are not noted (Tandem's own, which
        it writes to on every question)."""
        try:
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError:
            raise TandemError("watching a folder needs watchdog (pip install 'tandem-studio[library]')") from None
        self.folder = Path(folder).resolve()
        self.excluded = excluded
        self._lock = threading.Lock()
        self._noted: set[Path] = set()
        self._overflow = False
        watch = self

        class _Handler(FileSystemEventHandler):
            def on_any_event(self, event) -> None:  # watchdog's thread
                # a folder's own "modified" only says a file in it changed: that file has its own event
                if event.event_type in _CHANGES and not (event.is_directory and event.event_type == "modified"):
                    watch._note(event.src_path)
                    if getattr(event, "dest_path", ""):
                        watch._note(event.dest_path)

        self._observer = Observer()
        self._observer.schedule(_Handler(), str(self.folder), recursive=True)
        self._observer.daemon = True
        self._observer.start()

    def _note(self, path: str | bytes) -> None:
        p = Path(path.decode("utf-8", "surrogateescape") if isinstance(path, bytes) else path)
        if inside(p, self.excluded):
            return
        with self._lock:
            if len(self._noted) >= MAX_NOTED:
                self._overflow = True
            else:
                self._noted.add(p)

    @property
    def dirty(self) -> bool:
        with self._lock:
            return bool(self._noted) or self._overflow

    def take(self) -> set[Path] | None:
        """The paths noted since the last take, now forgotten; None when too many were noted
        to list (walk the folder)."""
        with self._lock:
            noted, overflow = self._noted, self._overflow
            self._noted, self._overflow = set(), False
        return None if overflow else noted

    def close(self) -> None:
        self._observer.stop()
        self._observer.join(timeout=5)
