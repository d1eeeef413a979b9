"""One generation at a time per loaded target, in arrival order, shared by every consumer.

Each engine owns one `GenerationQueue` (`engine.queue`), the only thing that serialises
generations: the HTTP server's requests, the desktop app's chat, a race or a benchmark
holding a turn, and plain `Engine.stream` calls from any thread (each decoder run takes a
turn through `hold`). They wait behind each other instead of sharing one CPU/GPU at once,
which would slow both and distort every speed figure. The queue is bounded for callers
that ask for it (the server answers 503 beyond it); the app's own chat is never refused.
Listeners see every event of every generation, which is how the app draws server requests
in its live charts. Qt-free.
"""

from __future__ import annotations

import itertools
import logging
import math
import queue as _queue
import threading
import time
import weakref
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..errors import Cancelled, TandemError
from .events import Event
from .cancel import CancelToken

log = logging.getLogger("tandem.serving")

Listener = Callable[["Job", Event], None]


class QueueFull(TandemError):
    """More requests are waiting than the queue allows."""

    def __init__(self, waiting: int, limit: int, retry_after_s: int):
        super().__init__(f"the server is busy: {waiting} request(s) already waiting (limit {limit}); retry in {retry_after_s} s")
        self.waiting, self.limit, self.retry_after_s = waiting, limit, retry_after_s


@dataclass(eq=False)
class Job:
    """One generation's place in the queue."""

    id: str
    source: str  # who asked: "server", "chat", ...
    cancel: CancelToken = field(default_factory=CancelToken)
    enqueued: float = field(default_factory=time.monotonic)
    started: float | None = None
    info: dict[str, Any] = field(default_factory=dict)  # free-form: endpoint, model, draft
    thread: int | None = None  # the thread holding the turn, while it runs
    generating: bool = False  # a decoder run is inside this turn now
    side_by_side: bool = False  # runs in a parallel slot: beside other such jobs, up to the queue's `slots`
    beside: bool = False  # needs no slot (embeddings, in a context of their own): runs beside the slots' jobs


class GenerationQueue:
    """FIFO turns for one engine: `submit` a job, `stream` runs it when its turn comes."""

    def __init__(self, max_waiting: int = 16):
        self.max_waiting = max_waiting
        self.slots = 1  # side-by-side jobs that may run at once (the server's parallel slots)
        self._side: set[Job] = set()  # side-by-side jobs running now
        self._beside: set[Job] = set()  # jobs that need no slot, running now beside them
        self._cond = threading.Condition()
        self._waiting: deque[Job] = deque()
        self._preparing: set[Job] = set()  # admitted, still being checked (prompt counted): not in line yet
        self._running: Job | None = None
        self._listeners: list[Listener] = []
        self._ids = itertools.count(1)
        self._durations: deque[float] = deque(maxlen=20)
        self._tasks: _queue.SimpleQueue[Callable[[], None] | None] | None = None

    # -- state ---------------------------------------------------------------------------
    @property
    def waiting(self) -> int:
        with self._cond:
            return len(self._waiting)

    @property
    def running(self) -> Job | None:
        """The job running now (with parallel slots: one of those running)."""
        return self._running if self._running is not None else next(iter(self._side), None)

    @property
    def running_side_by_side(self) -> int:
        with self._cond:
            return len(self._side)

    @property
    def preparing(self) -> int:
        """Admitted requests still being checked before they take their place in line."""
        with self._cond:
            return len(self._preparing)

    @property
    def busy(self) -> bool:
        with self._cond:
            return (self._running is not None or bool(self._side) or bool(self._beside) or bool(self._waiting)
                    or bool(self._preparing))

    def retry_after_s(self) -> int:
        """A guess at when a refused request could get in: the queue ahead times a typical job."""
        with self._cond:
            return self._retry_after_locked()

    # -- turns ---------------------------------------------------------------------------
    def submit(self, source: str, *, bounded: bool = True, cancel: CancelToken | None = None, ready: bool = True,
               side_by_side: bool = False, beside: bool = False, **info: Any) -> Job:
        """Take a place in line; raises `QueueFull` when `bounded` and the line is full.

        `ready=False` admits the job without a place in line yet (call `ready(job)` once its
        prompt is checked, or `finish(job)` to give up): the server counts prompts while they
        hold a place in the limit, so a flood of large prompts is refused, not tokenised at once.
        `beside`: the job needs no parallel slot (embeddings, in a context of their own): with
        slots it runs beside theirs at once; without, it takes its turn as any other."""
        with self._cond:
            ahead = len(self._waiting) + len(self._preparing)
            if bounded and ahead >= self.max_waiting and (self._running is not None or self._side or ahead):
                raise QueueFull(ahead, self.max_waiting, self._retry_after_locked())
            beside = beside and self.slots > 1  # a job needing no slot: beside the slots, when there are some
            job = Job(f"{next(self._ids):06d}", source, cancel or CancelToken(), info=info,
                      side_by_side=side_by_side and not beside, beside=beside)
            if ready:
                self._waiting.append(job)
            else:
                self._preparing.add(job)
            return job

    def ready(self, job: Job) -> None:
        """A job admitted with `ready=False` takes its place at the end of the line."""
        with self._cond:
            if job in self._preparing:
                self._preparing.discard(job)
                self._waiting.append(job)
                self._cond.notify_all()

    def _retry_after_locked(self) -> int:
        typical = sorted(self._durations)[len(self._durations) // 2] if self._durations else 2.0
        return max(1, math.ceil(typical * (len(self._waiting) + len(self._preparing) + 1)))

    def wait_turn(self, job: Job, poll_s: float = 0.05) -> None:
        """Block until `job` is first in line and nothing runs (a side-by-side job: nothing but
        side-by-side jobs, fewer than `slots`; a job that needs no slot: nothing exclusive, and
        it passes the jobs waiting for a slot); then it runs.

        Raises `Cancelled` (and leaves the line) if the job's cancel token fires first.
        """
        with self._cond:
            if self._running is job or job in self._side or job in self._beside:
                return
            # A job that needs no slot does not queue behind the ones waiting for a slot.
            while not (self._waiting and (job.beside or self._waiting[0] is job) and self._room_for(job)):
                if job.cancel.cancelled:
                    self._drop(job)
                    raise Cancelled("cancelled while waiting in the queue")
                self._cond.wait(poll_s)
            self._waiting.remove(job)
            if job.beside:
                self._beside.add(job)
            elif job.side_by_side:
                self._side.add(job)
            else:
                self._running = job
            job.started = time.monotonic()
            self._cond.notify_all()  # the next side-by-side job may start beside this one

    def _room_for(self, job: Job) -> bool:
        if self._running is not None:
            return False
        if job.beside:
            return True
        return len(self._side) < self.slots if job.side_by_side else not self._side and not self._beside

    def _drop(self, job: Job) -> None:
        self._preparing.discard(job)
        try:
            self._waiting.remove(job)
        except ValueError:
            pass
        self._cond.notify_all()

    def finish(self, job: Job) -> None:
        """End `job`'s turn (or its wait) and let the next one in."""
        with self._cond:
            if self._running is job or job in self._side or job in self._beside:
                if self._running is job:
                    self._running = None
                self._side.discard(job)
                self._beside.discard(job)
                if job.started is not None:
                    self._durations.append(time.monotonic() - job.started)
            self._drop(job)

    def cancel_all(self, source: str | None = None) -> int:
        """Cancel the running and waiting jobs (of one source, or all); returns how many."""
        with self._cond:
            jobs = (list(self._waiting) + list(self._preparing) + list(self._side) + list(self._beside)
                    + ([self._running] if self._running is not None else []))
        hit = [j for j in jobs if source is None or j.source == source]
        for j in hit:
            j.cancel.cancel()
        return len(hit)

    @contextmanager
    def turn(self, job: Job) -> Iterator[Job]:
        """Hold the line for work that is more than one `engine.stream` (a race, a benchmark):
        nothing else generates on this engine until the block ends. Raises `Cancelled` if the
        job's token fires while it waits."""
        try:
            self.wait_turn(job)
            job.thread = threading.get_ident()
            yield job
        finally:
            job.thread = None
            self.finish(job)

    @contextmanager
    def hold(self) -> Iterator[None]:
        """The turn one decoder run needs: inside a turn this thread already holds (a queued
        request, a race), run in it; otherwise wait for a turn of its own, unbounded.

        The same thread starting a second run while its first is suspended (two `stream()`
        generators advanced in turn) would wait for itself forever: it gets an error at once.
        """
        me = threading.get_ident()
        with self._cond:  # this thread's own turn: the one running, or one beside it (a slot's, an embedding's)
            mine = [j for j in (self._running, *self._side, *self._beside) if j is not None and j.thread == me]
        running = mine[0] if mine else None
        if running is not None:
            if running.generating:
                raise TandemError(
                    "this engine is already generating in this thread: finish or close the first "
                    "stream before starting another (or use a second Engine)"
                )
            running.generating = True
            try:
                yield
            finally:
                running.generating = False
            return
        job = self.submit("direct", bounded=False)
        with self.turn(job):
            job.generating = True
            yield

    def stream(self, engine: Any, prompt: Any, job: Job, **kw: Any) -> Iterator[Event]:
        """Wait for `job`'s turn, then `engine.stream(prompt, cancel=job.cancel, **kw)`.

        The turn is held until the generation ends, fails, or the iterator is closed.
        """
        with self.turn(job):
            for ev in engine.stream(prompt, cancel=job.cancel, **kw):
                self._notify(job, ev)
                yield ev

    def run_on_worker(self, fn: Callable[[], None]) -> None:
        """Run `fn` on this engine's one long-lived generation thread, in submission order.

        Not a new thread per request: then each served request decoded slower than the last
        (likely llama.cpp's OpenMP, a thread team per calling thread; docs/benchmarks.md, 5).
        """
        with self._cond:
            if self._tasks is None:
                self._tasks = _queue.SimpleQueue()
                threading.Thread(target=self._worker, args=(self._tasks,), name="tandem-generate", daemon=True).start()
                weakref.finalize(self, self._tasks.put, None)  # the thread ends with its queue
            self._tasks.put(fn)

    @staticmethod
    def _worker(tasks: "_queue.SimpleQueue[Callable[[], None] | None]") -> None:
        while (fn := tasks.get()) is not None:
            try:
                fn()
            except Exception:  # callers report their own errors; this thread must live on
                log.exception("generation task failed")

    # -- listeners -----------------------------------------------------------------------
    def add_listener(self, fn: Listener) -> None:
        """`fn(job, event)` is called on the generating thread for every event."""
        with self._cond:
            self._listeners.append(fn)

    def remove_listener(self, fn: Listener) -> None:
        with self._cond:
            if fn in self._listeners:
                self._listeners.remove(fn)

    def notify(self, job: Job, ev: Event) -> None:
        """Hand `ev` of `job` to the listeners (a generation that runs outside `stream`: a slot's)."""
        self._notify(job, ev)

    def _notify(self, job: Job, ev: Event) -> None:
        for fn in list(self._listeners):
            try:
                fn(job, ev)
            except Exception:  # a listener's bug must not stop a generation
                log.exception("generation listener failed")
