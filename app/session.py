"""The app's model layer: the loaded pair, the one-job-at-a-time rule, running workers.

Views never create engines or threads themselves; they ask the session. Only one
inference job (chat, race, bench) runs at a time — two at once would share the CPU/GPU and
distort both measurements.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QThread, Signal, Slot

from engine.models import store
from engine.llamacpp.runtime import RuntimeParams
from engine.models.catalog import PairSpec
from engine.models.projector import find_projector

from . import workers
from .downloads.controller import DownloadController

log = logging.getLogger("tandem.app")


@dataclass
class LoadedPair:
    target: Path
    draft: Any  # Path | "lookup" | None
    label: str
    pair_id: str | None = None


class Session(QObject):
    pairChanged = Signal(object)  # LoadedPair | None
    loadProgress = Signal(str, float)
    loadFailed = Signal(str)
    busyChanged = Signal(str)  # "" when idle, else what runs
    liveSpeed = Signal(float)  # tok/s of the running generation
    engineClosing = Signal(object)  # an engine is about to be closed (the local server stops serving it)
    workerLost = Signal(str)  # [rpc] a worker holding the target was lost; the engine is gone (see reload_locally)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.engine: Any = None
        self.pair: LoadedPair | None = None
        self.n_ctx = 4096
        self.n_threads: int | None = None  # Settings → Performance; None: the engine's default
        self.n_gpu_layers: int | None = None
        self.history_draft = True  # Settings → Suffix draft memory: past answers kept in a file
        self.slots: Any = None  # the local server's parallel slots (a SlotScheduler) while it runs them: chat answers run in one
        self.slots_draft: Any = None  # the draft file they were built with (their "model" draft)
        self.projector_note = ""  # why the projector beside the loaded target was not loaded ("": none to say)
        self._busy = ""
        self._threads: list[tuple[QThread, workers.Worker]] = []
        self._jobs: set[workers.Worker] = set()
        self._loader: workers.LoadWorker | None = None
        self._pending: LoadedPair | None = None
        self._failures: dict[workers.Worker, str] = {}  # a job's error, said once the session is free
        self.downloads = DownloadController(self)  # one download at a time, whichever view started it
        self.workerLost.connect(self._worker_lost)  # [rpc]

    # -- jobs ----------------------------------------------------------------------------
    @property
    def busy(self) -> str:
        return self._busy

    def run(self, worker: workers.Worker, job: str = "") -> QThread:
        """Start a worker; `job` marks the session busy until it finishes.

        Workers stay on the GUI thread (only their run() executes on the new thread, see
        `workers.start`), so their signals reach bound methods and plain callables alike on
        the GUI thread.
        """
        if job:
            if self._busy:
                raise RuntimeError(f"busy with {self._busy}")
            self._set_busy(job)
            self._jobs.add(worker)
        # Connected before the thread starts: a worker that ends at once (a file that is not a
        # model) would otherwise emit `finished` before anyone listens, its error never said
        # and the session busy for good (seen on a loaded machine).
        worker.finished.connect(self._worker_finished)
        thread = workers.start(worker)
        self._threads.append((thread, worker))
        return thread

    @Slot()
    def _worker_finished(self) -> None:
        worker = self.sender()
        self._threads = [(t, w) for t, w in self._threads if w is not worker]
        if worker in self._jobs:
            self._jobs.discard(worker)
            self._set_busy("")
        failure = self._failures.pop(worker, None)  # a load's error, kept until the session is free:
        if failure is not None:  # said while it still counted as busy, a Send right after was refused
            self.loadFailed.emit(failure)

    def _set_busy(self, job: str) -> None:
        self._busy = job
        self.busyChanged.emit(job)

    def shutdown(self, timeout_ms: int = 10000) -> None:
        """Cancel everything and wait: closing mid-generation must stop cleanly."""
        self.downloads.shutdown()
        for thread, worker in list(self._threads):
            worker.cancel()
        for thread, worker in list(self._threads):
            try:
                if thread.isRunning():
                    thread.quit()
                    thread.wait(timeout_ms)
            except RuntimeError:  # already deleted
                pass
        if self.engine is not None:
            self.engineClosing.emit(self.engine)
            self.engine.close()
            self.engine = None

    # -- the loaded pair -----------------------------------------------------------------
    def load(self, target: str | Path, draft: Any, *, label: str = "", pair_id: str | None = None,
             n_ctx: int | None = None) -> None:
        """Load a target and its drafter off the GUI thread. `n_ctx`: the context length
        (None = the Settings default, 4096 when unset), capped at the target's trained length."""
        if self._busy:
            self.loadFailed.emit(f"cannot load a pair while {self._busy} is running")
            return
        self.n_ctx = self._context_for(Path(target), n_ctx if n_ctx is not None else self.default_n_ctx())
        w = workers.LoadWorker(str(target), str(draft) if isinstance(draft, Path) else draft, self.runtime())
        w.history_draft = self.history_draft
        if self.rpc_endpoints:  # [rpc] the target goes to the workers, in a child process (text only)
            w = self._remote_loader(w)
        else:  # its projector (beside the target, or the catalog's): the model then sees pictures
            found = find_projector(target)
            w.mmproj = str(found) if found is not None else None
        self.projector_note = ""
        w.loaded.connect(lambda _engine, w=w: setattr(self, "projector_note", w.projector_note))
        w.progress.connect(self.loadProgress)
        w.failed.connect(lambda message, w=w: self._failures.__setitem__(w, message))  # said once free
        self._pending = LoadedPair(Path(target), draft, label or Path(target).name, pair_id)
        w.loaded.connect(self._loaded)
        self._loader = w
        self.run(w, "loading")

    @property
    def sees_images(self) -> bool:
        """The loaded model was loaded with its vision projector: it reads pictures."""
        return getattr(self.engine, "projector", None) is not None

    @property
    def projector_name(self) -> str:
        """The loaded projector's file name ("" when the model reads text only)."""
        path = getattr(getattr(self.engine, "projector", None), "path", None)
        return Path(path).name if path else ""

    def runtime(self) -> RuntimeParams:
        """How the next load runs its models: the context chosen for it, Settings' threads
        and GPU layers (None: the engine's defaults)."""
        return RuntimeParams(n_ctx=self.n_ctx, n_threads=self.n_threads, n_gpu_layers=self.n_gpu_layers)

    def default_n_ctx(self) -> int:
        """The context length chosen in Settings (QSettings "performance/n_ctx"; 0 or missing = 4096)."""
        from engine.models.context_window import DEFAULT_N_CTX

        settings = getattr(self.parent(), "settings", None)  # the main window's QSettings
        try:
            n = int(settings.value("performance/n_ctx", 0) or 0) if settings is not None else 0
        except (TypeError, ValueError):
            n = 0
        return n if n > 0 else DEFAULT_N_CTX

    @staticmethod
    def _context_for(target: Path, wanted: int | None) -> int:
        from engine.models.context_window import clamp_n_ctx, trained_length
        from engine.errors import TandemError
        from engine.models.gguf_header import read_header

        try:
            trained = trained_length(read_header(target, with_tensors=False, arrays=False))
        except (OSError, TandemError):
            trained = None  # the load itself will say what is wrong with the file
        return clamp_n_ctx(wanted, trained)

    def load_pair(self, pair: PairSpec, n_ctx: int | None = None) -> bool:
        """Load a catalog pair from the model cache; loadFailed says why not (not downloaded, busy)."""
        from engine.llamacpp.ggml_devices import current_backend
        from engine.models import draft_variants

        t, d = store.locate_model(pair.target), store.locate_model(pair.draft)
        if t is None or d is None:
            self.loadFailed.emit(f"{pair.title} is not downloaded yet: Download it first")
            return False
        d = draft_variants.preferred(d, current_backend)  # the faster draft `tandem optimize-draft` kept, if any
        self.load(t, pair.draft_spec(d), label=pair.title, pair_id=pair.id, n_ctx=n_ctx)
        return True

    def cancel_load(self) -> None:
        if self._loader is not None:
            self._loader.cancel()

    @Slot(object)
    def _loaded(self, engine: Any) -> None:
        pair = self._pending
        old = self.engine
        self.engine, self.pair = engine, pair
        if old is not None:
            self.engineClosing.emit(old)
            old.close()
        self.pairChanged.emit(pair)

    def unload(self) -> None:
        if self._busy:
            return
        if self.engine is not None:
            self.engineClosing.emit(self.engine)
            self.engine.close()
        self.engine, self.pair = None, None
        self.pairChanged.emit(None)

    # -- [rpc] a target split over llama.cpp RPC workers (issue 14) ----------------------------
    rpc_endpoints: tuple[str, ...] = ()  # set by `tandem app --rpc` and the Workers dialog; () = this machine only
    lost_pair: LoadedPair | None = None  # the pair whose worker was lost, for reload_locally

    def _remote_loader(self, local: workers.LoadWorker) -> workers.LoadWorker:
        """The same load with the target split over `rpc_endpoints` (app/rpc_loading.py):
        a worker lost later ends that child process, not the app."""
        from .rpc_loading import RemoteLoadWorker

        # The context only: threads and GPU layers in Settings are this machine's, not the workers'.
        return RemoteLoadWorker(local.target, local.draft, list(self.rpc_endpoints), RuntimeParams(n_ctx=local.runtime.n_ctx),
                                on_lost=self._remote_lost)

    def _remote_lost(self, error: Exception) -> None:
        """On the generating thread: hand the news to the GUI thread (a queued signal)."""
        self.workerLost.emit(str(error))

    @Slot(str)
    def _worker_lost(self, message: str) -> None:
        """The split engine is dead: drop it (the chat keeps its partial answer itself)."""
        eng = self.engine
        if eng is None or getattr(eng, "lost", None) is None:
            return
        self.lost_pair = self.pair
        self.engineClosing.emit(eng)
        eng.close()
        self.engine, self.pair = None, None
        self.pairChanged.emit(None)

    def reload_locally(self) -> bool:
        """Load the pair whose worker was lost again, on this machine only (workers off)."""
        pair = self.lost_pair or self.pair
        if pair is None:
            return False
        self.rpc_endpoints = ()
        self.lost_pair = None
        self.load(pair.target, pair.draft, label=pair.label, pair_id=pair.pair_id)
        return True
