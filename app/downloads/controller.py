"""The app's one download at a time, owned by the Session: a thin Qt adapter around
`DownloadJob` (the Qt-free state machine) and the download worker.

Every update goes out as one `DownloadStatus` on `changed`, so the Models page and the
first-run banner show the same bar and line whoever started the download. When asked,
the pair is loaded as soon as it has arrived and the session is free.
"""

from __future__ import annotations

from typing import Any, Protocol

from PySide6.QtCore import QObject, Signal, SignalInstance, Slot

from engine.models.catalog import PairSpec

from .. import workers
from .job import DownloadJob, DownloadStatus, Fetched


class DownloadHost(Protocol):
    """What the controller needs from its owner (the Session), so neither imports the other."""

    busyChanged: SignalInstance  # emitted with the new `busy` text ("" when free)

    @property
    def busy(self) -> str: ...  # what the session is doing, "" when free

    def run(self, worker: Any) -> None: ...

    def load_pair(self, pair: PairSpec) -> Any: ...


class DownloadController(QObject):
    started = Signal(object)  # DownloadStatus of a new download
    changed = Signal(object)  # DownloadStatus, at every step
    finished = Signal(object)  # the final DownloadStatus
    failed = Signal(str)  # why a download failed, once
    notice = Signal(str)  # something the store wants a person to know (nothing transferred)

    def __init__(self, session: DownloadHost):
        super().__init__(session if isinstance(session, QObject) else None)
        self.session = session
        self.job: DownloadJob | None = None
        self._worker: workers.DownloadWorker | None = None
        self._pending_load: PairSpec | None = None
        session.busyChanged.connect(self._busy_changed)

    @property
    def active(self) -> bool:
        """A download worker is running (also while it winds down after a cancel or failure)."""
        return self._worker is not None

    @property
    def status(self) -> DownloadStatus | None:
        """The latest status, also after the download ended; None before the first."""
        return self.job.status if self.job is not None else None

    def download(self, pair: Fetched, *, source: str = "auto", then_load: bool = False) -> bool:
        """Fetch both models of a pair, or one model (`OneModel`: loaded by no pair, so never
        `then_load`), verified and resumable; False when a download is already running."""
        if self.active:
            return False
        job = DownloadJob(pair, then_load=then_load and isinstance(pair, PairSpec))
        w = workers.DownloadWorker(job.models, source=source)
        # Bound methods, not lambdas: they run in the GUI thread (see Session.run).
        w.progress.connect(self._on_progress)
        w.file_done.connect(self._on_file_done)
        w.all_done.connect(self._on_all_done)
        w.failed.connect(self._on_failed)
        w.finished.connect(self._on_finished)
        self.job, self._worker = job, w
        self.session.run(w)  # not an inference job: chat and races may go on meanwhile
        self.started.emit(job.status)
        self.changed.emit(job.status)
        return True

    def cancel(self) -> None:
        """Stop the running download; the partial file is kept and a new download resumes it."""
        if self.job is not None and self._worker is not None and self.job.cancel():
            self._worker.cancel()
            self.changed.emit(self.job.status)

    def shutdown(self) -> None:
        self._pending_load = None
        if self._worker is not None:
            self._worker.cancel()

    # -- the worker's events ---------------------------------------------------------------
    @Slot(object)
    def _on_progress(self, p: object) -> None:
        if self.job is None:
            return
        st = self.job.progress(p)  # type: ignore[arg-type]
        if st.notice:
            self.notice.emit(st.notice)
        self.changed.emit(st)

    @Slot(str, str)
    def _on_file_done(self, _model_id: str, _path: str) -> None:
        if self.job is not None:
            self.changed.emit(self.job.file_done())

    @Slot()
    def _on_all_done(self) -> None:
        if self.job is not None:
            self.job.all_done()

    @Slot(str)
    def _on_failed(self, message: str) -> None:
        if self.job is not None:
            self.changed.emit(self.job.fail(message))
        self.failed.emit(message)

    @Slot()
    def _on_finished(self) -> None:
        job = self.job
        self._worker = None
        if job is None:
            return
        st = job.finish()
        self.changed.emit(st)
        self.finished.emit(st)
        if st.ok and job.then_load and isinstance(job.pair, PairSpec):
            self._pending_load = job.pair
            self._load_pending()

    # -- load when it arrived --------------------------------------------------------------
    @Slot(str)
    def _busy_changed(self, job: str) -> None:
        if not job:
            self._load_pending()

    def _load_pending(self) -> None:
        pair = self._pending_load
        if pair is None or self.session.busy:
            return  # busyChanged("") calls again when the session is free
        self._pending_load = None
        self.session.load_pair(pair)
