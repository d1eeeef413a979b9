"""QObject workers on QThreads: load, generate, race, download, bench, a Library folder's index.

They consume the engine's event stream and emit Qt signals. Cancellation is a flag the
engine checks between steps (and between prefill chunks). Any exception becomes a
`failed` signal with one line of text: the window shows it and stays alive. Token
signals are coalesced to about one per frame (FRAME_S) so a fast model cannot flood the
GUI thread, and what waits longer than a frame is handed over by a small timer thread.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot

from engine.errors import Cancelled, TandemError

if TYPE_CHECKING:  # pragma: no cover
    from engine import GenerationRequest, RuntimeParams

log = logging.getLogger("tandem.app")
# How often a generating worker hands its tokens and steps to the GUI thread: ~12 times a
# second. Every wake of the GUI thread (a slot call, a text edit, its repaint) preempts one
# of llama.cpp's compute threads on a machine with as many threads as cores, and the other
# one then waits for it at the next barrier; per token (25/s on 2 cores) that cost ~10% of
# decode speed, measured with `python -m tools.bench_gui` (docs/benchmarks.md section 7).
FRAME_S = 0.08


class Worker(QObject):
    """Base: subclasses implement `work()`; errors become `failed(str)`; always `finished()`."""

    failed = Signal(str)
    finished = Signal()

    def __init__(self) -> None:
        super().__init__()
        self._cancel = threading.Event()

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def run(self) -> None:
        try:
            self.work()
        except Cancelled:
            pass
        except TandemError as e:
            self.failed.emit(str(e))
        except MemoryError:
            self.failed.emit("out of memory: try a smaller pair or a shorter context")
        except Exception as e:  # a bug, but the window must survive it
            log.error("worker failed:\n%s", traceback.format_exc())
            self.failed.emit(f"{type(e).__name__}: {e}")
        finally:
            self.finished.emit()

    def work(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class EngineWorker(Worker):
    """A worker that runs the engine: `token` (a CancelToken) also stops a running prefill and
    a wait in the engine's queue, so cancel() sets both flags."""

    def __init__(self) -> None:
        super().__init__()
        from engine.decoding.cancel import CancelToken  # lazily: it loads llama.cpp

        self.token = CancelToken()

    def cancel(self) -> None:
        super().cancel()
        self.token.cancel()


@contextmanager
def engine_turn(engine: Any, source: str, token: Any) -> Iterator[None]:
    """Hold `engine`'s generation queue (engine/decoding/queue.py) for a whole race or benchmark, so a
    local-server request or a chat answer waits for it instead of running between its runs."""
    queue = engine.queue
    with queue.turn(queue.submit(source, bounded=False, cancel=token)):
        yield


def start(worker: Worker) -> QThread:
    """Run `worker.run()` on a new thread; the thread is cleaned up when it finishes.

    The worker object stays on the GUI thread and only its `run()` executes on the new one
    (a direct call from `started`). So every signal it emits, from its thread or from a
    `LateFlush`, is queued to the GUI thread, for plain callables too: moved to its thread,
    a callable connected without a QObject would run there directly when the worker emits
    and wait for an event loop that never runs when another thread emits.
    """
    # No parent: a view destroyed just as its worker ends (closed on `finished`) would take a
    # child QThread that is still ending with it, which Qt answers with an abort. The keeper
    # holds the thread instead, until it has ended.
    thread = QThread()
    thread.started.connect(worker.run, Qt.ConnectionType.DirectConnection)
    worker.finished.connect(thread.quit)
    _keeper().hold(thread, worker)
    thread.start()
    return thread


class _Keeper(QObject):
    """Holds every started thread and its worker until the thread has ended, then lets both go
    on the GUI thread. Destroying a QThread that is still ending aborts the process ("QThread:
    Destroyed while thread is still running": 1 in 7 runs of the optimiser dialog's test, whose
    dialog, the thread's parent then, was freed right after its worker's `finished`), and
    `QThread.finished` is emitted while the thread is still ending. A view also drops its
    worker on `finished`, which is emitted inside `run()` on the worker's thread."""

    def __init__(self) -> None:
        super().__init__()
        self._held: dict[int, tuple[QThread, Worker]] = {}

    def hold(self, thread: QThread, worker: Worker) -> None:
        self._held[id(thread)] = (thread, worker)
        thread.finished.connect(self._release)  # queued: this object lives on the GUI thread

    @Slot()
    def _release(self) -> None:
        held = self._held.pop(id(self.sender()), None)
        if held is not None:
            thread, _ = held
            thread.wait()  # it has emitted `finished`: only its last instructions remain
            thread.deleteLater()


_KEEPER: _Keeper | None = None


def _keeper() -> _Keeper:
    global _KEEPER
    if _KEEPER is None:
        _KEEPER = _Keeper()
    return _KEEPER


class FrameCoalescer:
    """Collects items and flushes them through `emit` at most once per frame (FRAME_S).

    `lead`'s items go out first at every flush: a step's coalescer leads with the tokens of
    its steps, so text and steps reach the GUI together, once per frame. A coalescer and
    its lead share one lock, so the worker and a `LateFlush` never interleave flushes.
    """

    def __init__(self, emit: Callable[[list], None], lead: "FrameCoalescer | None" = None):
        self.emit = emit
        self.lead = lead
        self.lock = lead.lock if lead is not None else threading.RLock()
        self.items: list = []
        self.last = time.perf_counter()

    def add(self, item: Any) -> None:
        with self.lock:
            self.items.append(item)
            now = time.perf_counter()
            if now - self.last >= FRAME_S:
                self.flush(now)

    def hold(self, item: Any) -> None:
        """Keep an item for the next flush without checking the clock."""
        with self.lock:
            self.items.append(item)

    @property
    def pending(self) -> bool:
        return bool(self.items) or (self.lead is not None and self.lead.pending)

    def flush(self, now: float | None = None) -> None:
        with self.lock:
            if self.lead is not None:
                self.lead.flush(now)
            if self.items:
                items, self.items = self.items, []
                self.emit(items)
            self.last = now if now is not None else time.perf_counter()

    def flush_if_late(self) -> None:
        """Flush what has waited a frame or more (see `LateFlush`)."""
        with self.lock:
            now = time.perf_counter()
            if self.pending and now - self.last >= FRAME_S:
                self.flush(now)


class LateFlush:
    """A small thread that hands over what coalescers still hold once it is a frame old.

    A coalescer flushes only when the next item arrives, and the worker has no event loop:
    without this, the last tokens before a long pause (Auto's first draft catch-up, a slow
    step over RPC workers) would show only when the pause ends. It wakes twice a frame and
    does nothing while items flow; it never runs llama.cpp, so it takes microseconds from
    the compute threads, not milliseconds.
    """

    def __init__(self, coalescers: Callable[[], tuple]):
        self._coalescers = coalescers  # read at each wake: the race swaps them per side
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tandem-late-flush", daemon=True)

    def __enter__(self) -> "LateFlush":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(FRAME_S / 2):
            for c in self._coalescers():
                if c is not None:
                    c.flush_if_late()


class LoadWorker(Worker):
    """Load a target (and prepare a drafter) off the GUI thread, with progress 0..1."""

    progress = Signal(str, float)
    loaded = Signal(object)  # engine.Engine

    def __init__(self, target: str, draft: Any, runtime: "RuntimeParams"):
        super().__init__()
        self.target, self.draft = target, draft
        self.runtime = runtime  # context, threads and GPU layers (Settings and the model bar)
        self.history_draft = True  # the suffix draft keeps past answers in a file (Settings)
        self.mmproj: str | None = None  # the target's vision projector: the loaded model then sees pictures
        self.projector_note = ""  # why a projector found beside the target was not loaded ("": it was, or none)

    def open_engine(self, on_progress: Callable[[float], bool]) -> Any:
        """The target, loaded here (app/rpc_loading.py loads it over RPC workers instead), with
        its projector when one was found; a projector llama.cpp refuses leaves the model text
        only, with `projector_note` saying why, rather than no model at all."""
        from engine import Engine

        def load(mmproj: str | None) -> Any:
            return Engine(self.target, runtime=self.runtime, on_progress=on_progress, history_draft=self.history_draft,
                          mmproj=mmproj)

        if self.mmproj is None:
            return load(None)
        try:
            return load(self.mmproj)
        except Cancelled:
            raise
        except TandemError as e:
            if self.cancelled:
                raise
            self.projector_note = f"{Path(self.mmproj).name} was not loaded ({e}): this model reads text only"
            return load(None)

    def work(self) -> None:
        def cb(label: str) -> Callable[[float], bool]:
            def f(x: float) -> bool:
                self.progress.emit(label, x)
                return not self.cancelled
            return f

        eng = self.open_engine(cb("target"))
        try:
            if self.draft is not None:
                eng.decoder(self.draft, on_progress=cb("draft"))
            eng.decoder(None)
        except BaseException:
            eng.close()
            raise
        if self.cancelled:
            eng.close()
            raise Cancelled("loading cancelled")
        self.loaded.emit(eng)


class GenerationWorker(EngineWorker):
    """One generation through `engine.stream`; the lookahead may change while it runs."""

    tokens = Signal(list)  # [TokenEvent, ...] coalesced per frame
    steps = Signal(list)  # [StepEvent, ...]
    prefill = Signal(int, int, int)  # done, total to read, and the prompt tokens that needed no reading
    draft_reading = Signal(int, int)  # the model draft catching up with the prompt: done, total
    done = Signal(object)  # DoneEvent

    def __init__(self, engine: Any, request: "GenerationRequest", slots: Any = None, model_draft: Any = None):
        """`slots`: the local server's parallel slots (a `SlotScheduler` over `engine`'s target):
        the answer runs in one beside the server's requests when they run its draft (`model_draft`:
        the draft file they were built with); otherwise, and without slots, it takes its turn."""
        super().__init__()
        from engine import LiveLookahead
        from engine.decoding.slots.turn import slot_draft

        self.engine = engine
        if not isinstance(request.lookahead, LiveLookahead):  # the view passes one; a test may not
            request = request.with_(lookahead=LiveLookahead(request.lookahead))
        self.request = request
        self.live: LiveLookahead = request.lookahead  # the slider and Auto switch change this, mid-answer
        self.slots = slots
        self.slot_draft = slot_draft(request.draft, slots.drafts, model_draft) if slots is not None else None

    def set_lookahead(self, value: Any) -> None:
        """From the GUI thread: applies from the next step."""
        self.live.set(value)

    def work(self) -> None:
        from engine.decoding.events import DoneEvent, RunStats

        toks = FrameCoalescer(self.tokens.emit)
        steps = FrameCoalescer(self.steps.emit, lead=toks)  # one frame: its tokens, then its steps
        from engine.decoding.slots.turn import take_turn

        # in a slot of the local server's, beside its requests, or through the engine's queue
        # (a local-server request and this answer wait for each other)
        events = take_turn(self.engine, self.request, self.token, slots=self.slots, draft=self.slot_draft)
        try:
            with LateFlush(lambda: (steps,)):
                self._consume(events, toks, steps)
        except Cancelled:  # stopped while a server request was running: an empty, stopped answer
            self.done.emit(DoneEvent("", [], RunStats(finish_reason="cancelled", stopped_by="cancel")))

    def _consume(self, events: Any, toks: FrameCoalescer, steps: FrameCoalescer) -> None:
        from engine.decoding.events import DoneEvent, DraftReadEvent, PrefillEvent, StepEvent, TokenEvent

        for ev in events:
            if isinstance(ev, TokenEvent):
                toks.hold(ev)  # a step's tokens come before its StepEvent, which flushes them
            elif isinstance(ev, StepEvent):
                steps.add(ev)
            elif isinstance(ev, PrefillEvent):
                self.prefill.emit(ev.done, ev.total, ev.cached)
            elif isinstance(ev, DraftReadEvent):
                self.draft_reading.emit(ev.done, ev.total)
            elif isinstance(ev, DoneEvent):
                steps.flush()
                self.done.emit(ev)


class RaceWorker(EngineWorker):
    """`engine.race`: target alone, then speculative, same prompt and settings, streaming both."""

    started_side = Signal(str)
    tokens = Signal(str, list)
    steps = Signal(str, list)
    side_done = Signal(str, object)  # side, DoneEvent
    result = Signal(object)  # dict: both results, speedups, identical, divergence, headline (and "race": RaceResult)

    def __init__(self, engine: Any, request: "GenerationRequest"):
        super().__init__()
        self.engine = engine
        self.request = request  # run twice by engine.measure.racing.race: target alone, then with the drafter
        self._side = ""
        self._toks: FrameCoalescer | None = None
        self._steps: FrameCoalescer | None = None

    def _on_event(self, side: str, ev: Any) -> None:
        from engine.decoding.events import DoneEvent, StepEvent, TokenEvent

        if side != self._side:
            self._side = side
            self.started_side.emit(side)
            toks = FrameCoalescer(lambda items, s=side: self.tokens.emit(s, items))
            self._toks, self._steps = toks, FrameCoalescer(lambda items, s=side: self.steps.emit(s, items), lead=toks)
        assert self._toks is not None and self._steps is not None
        if isinstance(ev, TokenEvent):
            self._toks.add(ev)
        elif isinstance(ev, StepEvent):
            self._steps.add(ev)
        elif isinstance(ev, DoneEvent):
            self._steps.flush()  # its tokens first
            self.side_done.emit(side, ev)

    def work(self) -> None:
        from engine.measure.racing import race

        with engine_turn(self.engine, "race", self.token), LateFlush(lambda: (self._steps,)):
            r = race(self.engine, self.request, on_event=self._on_event, cancel=self.token)
        if r is None:
            return
        self.result.emit({
            "target": r.target, "speculative": r.speculative, "speedup": r.decode_speedup,
            "wall_speedup": r.wall_speedup, "identical": r.identical, "divergence": r.divergence,
            "headline": r.headline, "detail": r.detail, "race": r,
        })


class DownloadWorker(Worker):
    """Fetch every file of some catalog models (Hub or mirror), with progress."""

    progress = Signal(object)  # engine.models.store.Progress
    file_done = Signal(str, str)  # model id, path
    all_done = Signal()

    def __init__(self, models: list, *, source: str = "auto"):
        super().__init__()
        self.models, self.source = models, source

    def work(self) -> None:
        from engine.models import download

        for m in self.models:
            for f in m.downloads:
                if self.cancelled:
                    raise Cancelled("download cancelled")
                path = download.obtain(f, source=self.source, progress=self.progress.emit, cancel=self._cancel)
                self.file_done.emit(m.id, str(path))
        self.all_done.emit()


class CallWorker(Worker):
    """Run any function off the GUI thread and emit its result (compat checks, imports)."""

    result = Signal(object)

    def __init__(self, fn: Callable[[], Any]):
        super().__init__()
        self.fn = fn

    def work(self) -> None:
        self.result.emit(self.fn())


class BenchWorker(EngineWorker):
    """`engine.measure.bench.run_bench` off the GUI thread, with progress and cancel."""

    progress = Signal(int, int, str)
    result = Signal(object)  # engine.measure.bench.BenchResult

    def __init__(self, engine: Any, suites: list, configs: list, **options: Any):
        super().__init__()
        self.engine, self.suites, self.configs, self.options = engine, suites, configs, options

    def work(self) -> None:
        from engine.measure import bench

        with engine_turn(self.engine, "bench", self.token):
            res = bench.run_bench(self.engine, self.suites, self.configs, progress=self.progress.emit, cancel=self._cancel,
                                  **self.options)
        self.result.emit(res)


class IndexWorker(Worker):
    """A Library folder's index brought up to date (engine.library.Library.update) off the GUI
    thread: progress at most every FRAME_S and at the end, Stop between files (what was
    indexed is kept), the report at the end."""

    progress = Signal(int, int, str)  # files done, files in all, the file now
    result = Signal(object)  # engine.library.IndexReport

    def __init__(self, library: Any, prepare: Callable[[], None] | None = None):
        """`prepare`: run on this thread before the update (the shelf loads its embedding model)."""
        super().__init__()
        self.library = library
        self._prepare = prepare
        self._shown = 0.0

    def _progress(self, done: int, total: int, name: str) -> None:
        now = time.monotonic()
        if done == total or now - self._shown >= FRAME_S:
            self._shown = now
            self.progress.emit(done, total, name)

    def work(self) -> None:
        if self._prepare is not None:
            self._prepare()
        self.result.emit(self.library.update(progress=self._progress, cancelled=lambda: self.cancelled))
