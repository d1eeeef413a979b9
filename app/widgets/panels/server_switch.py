"""The status bar's "Local server" switch: the OpenAI-compatible server on the loaded pair,
in the app's own process and on the app's own engine.

With more than one slot (the box beside the port; its default is the machine's,
`hardware.default_parallel`) the server answers that many requests side by side in slots of
one context (engine/decoding/slots), and a chat answer sent while it runs takes a slot as one
more client (`Session.slots`): the chat and a client's answer stream at once, and the label
beside says how many slots are busy. With one slot, server requests and chat answers share the
engine's `GenerationQueue`, so they wait behind each other; so does a chat answer whose draft
the slots do not run, or one with tools on (the chat says so). One request at a time is drawn
live in the chat's charts, never over a chat answer. The server stops before the engine it
serves is replaced or closed, and starts again on the new pair if the switch is still on; its
slots are freed when it stops (once a chat answer running in one has ended).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSpinBox, QWidget

from ...workers import FrameCoalescer

DEFAULT_PORT = 8080
MAX_SLOTS = 16  # the box's top (tandem serve --parallel allows more)
SLOTS_REFRESH_MS = 250  # the slots label, read from the scheduler without waiting on it


class ServerSwitch(QWidget):
    message = Signal(str)
    error = Signal(str)
    jobStarted = Signal(object)  # engine.decoding.queue.Job of a server request that began generating
    steps = Signal(list)  # its StepEvents, about one batch per frame
    jobDone = Signal(object, bool)  # a server request's DoneEvent, and whether it was drawn
    _started = Signal(object)  # from the starter thread: (engine, ServerThread, slots, note), or an error text

    def __init__(self, session: Any, charts: Any = None, port: int = DEFAULT_PORT, parent: QWidget | None = None):
        super().__init__(parent)
        self.session, self.charts = session, charts
        self.server: Any = None  # engine.serving.server.ServerThread while running
        self._engine: Any = None  # the engine being served (its queue has our listener)
        self._starting = False
        self._slots: Any = None  # the running server's SlotScheduler (None: one request at a time)
        self._retiring: list[tuple[Any, Any]] = []  # a stopped server's (engine, slots): freed when the chat answer ends
        self._drawn: Any = None  # the server request drawn in the charts (one, and none over a chat answer)
        self._draw_lock = threading.Lock()
        self._chat = False  # a chat answer runs (it has the charts)
        self._steps = FrameCoalescer(self.steps.emit)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.button = QPushButton("Local server")
        self.button.setCheckable(True)
        self.button.setToolTip("Serve the loaded pair over the OpenAI API (chat, completions) on this machine only")
        self.port = QSpinBox()
        self.port.setRange(1, 65535)
        self.port.setValue(port)
        self.port.setToolTip("Port on 127.0.0.1")
        self.slots = QSpinBox()
        self.slots.setRange(1, MAX_SLOTS)
        self.slots.setValue(_machine_slots())
        self.slots.setPrefix("slots ")
        self.slots.setToolTip("Requests answered side by side, a chat answer among them (each slot holds a whole "
                              "context); 1: one at a time, the chat and the requests wait for each other")
        self.url = QLabel("")
        self.url.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.in_use = QLabel("")  # "slots 2/4 busy, 1 waiting" while the server runs slots
        self.in_use.setToolTip("The local server's slots answering now (a chat answer among them), "
                               "and the answers waiting for one")
        for w in (self.button, self.port, self.slots, self.url, self.in_use):
            lay.addWidget(w)
        self._in_use_timer = QTimer(self)
        self._in_use_timer.setInterval(SLOTS_REFRESH_MS)
        self._in_use_timer.timeout.connect(self.show_slots)
        self.button.toggled.connect(self._toggled)
        self._started.connect(self._on_started)
        self.jobStarted.connect(self._job_started)
        self.steps.connect(self._on_steps)
        self.jobDone.connect(self._job_done)
        session.pairChanged.connect(self._pair_changed)
        session.busyChanged.connect(self._busy_changed)
        session.engineClosing.connect(self._engine_closing)

    # -- on / off ------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.server is not None

    def set_on(self, on: bool) -> None:
        self.button.setChecked(on)

    @Slot(bool)
    def _toggled(self, on: bool) -> None:
        if on:
            self._start()
        else:
            self._stop()
            self.url.setText("")

    def _start(self) -> None:
        if self.server is not None or self._starting:
            return
        engine, pair = self.session.engine, self.session.pair
        if engine is None or pair is None:
            self.url.setText("starts when a pair is loaded")
            return
        self._starting = True
        self.port.setEnabled(False)
        self.slots.setEnabled(False)
        self.url.setText("starting…")
        served_id = pair.pair_id or Path(pair.target).stem
        threading.Thread(target=self._start_in_thread, args=(engine, pair.draft, served_id, self.port.value(),
                                                             self.slots.value()),
                         name="tandem-server-start", daemon=True).start()

    def _start_in_thread(self, engine: Any, draft: Any, served_id: str, port: int, n: int) -> None:
        """Off the GUI thread: importing FastAPI, making the slots' context and starting uvicorn
        take a moment. Slots the target cannot run (split over RPC workers, or the slots' context
        refused) leave one request at a time, with a line saying why."""
        try:
            from engine import Engine, TandemError
            from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

            served, note = ServedModel(engine, served_id, draft=draft, lookahead="auto"), ""
            if n > 1 and not (isinstance(engine, Engine) and engine.rpc is None):
                n, note = 1, "one request at a time: a target split over RPC workers runs no parallel slots"
            try:
                app = create_app(served, ServerConfig(parallel=n))
            except TandemError as e:
                if n == 1:
                    raise
                app, note = create_app(served), f"one request at a time ({e})"
            slots = app.state.slots
            try:
                server = ServerThread(app, "127.0.0.1", port).start()
            except BaseException:
                _free_slots(engine, slots, unused=True)
                raise
            self._started.emit((engine, server, slots, note))
        except ImportError as e:
            self._started.emit(f"the local server needs the 'server' extra ({e.name} is missing): "
                               "pip install 'tandem-studio[server]'")
        except Exception as e:  # port in use, ...: a message, never a dead window
            self._started.emit(str(e))

    @Slot(object)
    def _on_started(self, result: Any) -> None:
        self._starting = False
        if isinstance(result, str):
            self._enable_boxes()
            self.button.setChecked(False)
            self.error.emit(f"Local server: {result}")
            return
        engine, server, slots, note = result
        if not self.button.isChecked() or engine is not self.session.engine:
            server.stop()  # switched off, or the pair changed, while it was starting
            _free_slots(engine, slots, unused=True)
            self._enable_boxes()
            if self.button.isChecked():
                self._start()
            return
        self.server, self._engine, self._slots = server, engine, slots
        engine.queue.add_listener(self._on_event)
        self.url.setText(f"{server.url}/v1")
        self.port.hide()  # the address says the port and the label the slots: room for the pair's name
        self.slots.hide()
        if slots is not None:  # a chat answer takes one of them from now
            self.session.slots, self.session.slots_draft = slots, self.session.pair.draft
            self.show_slots()
            self._in_use_timer.start()
        self.message.emit(f"Local server on {server.url}/v1" + (f", {slots.n_slots} slots" if slots else "")
                          + (f"; {note}" if note else ""))

    def _stop(self, *, closing: bool = False) -> None:
        """Stop serving (running and waiting requests are cancelled) and wait for it; its slots
        are freed now, or once the chat answer running in one ends (`closing`: the engine is
        about to be closed, which frees them)."""
        engine, slots = self._engine, self._slots
        if engine is not None:
            engine.queue.remove_listener(self._on_event)
        if self.server is not None:
            self.server.stop()
        self.server, self._engine, self._slots, self._drawn = None, None, None, None
        if slots is not None:
            self.session.slots = self.session.slots_draft = None  # the next chat answer takes its turn
            engine.queue.slots = 1
            if not closing:
                self._retiring.append((engine, slots))
                self._free_retired()
        self._in_use_timer.stop()
        self.in_use.setText("")
        self._enable_boxes()

    def _free_retired(self) -> None:
        """Free a stopped server's slots, unless a chat answer still runs (maybe in one of them)."""
        if self._chat:
            return
        retiring, self._retiring = self._retiring, []
        for engine, slots in retiring:
            _free_slots(engine, slots)

    def _enable_boxes(self) -> None:
        for box in (self.port, self.slots):
            box.setEnabled(True)
            box.show()

    @Slot()
    def show_slots(self) -> None:
        """The slots in use, read from the scheduler (a list of flags: no lock, no wait) and the
        engine's queue (the answers waiting for a slot)."""
        slots, engine = self._slots, self._engine
        if slots is None or engine is None:
            return
        busy, waiting = sum(slots.busy()), slots.waiting + engine.queue.waiting
        self.in_use.setText(f"slots {busy}/{slots.n_slots} busy" + (f", {waiting} waiting" if waiting else ""))

    def shutdown(self) -> None:
        self._stop()

    # -- the engine changes under us ------------------------------------------------------
    @Slot(object)
    def _engine_closing(self, engine: Any) -> None:
        self._retiring = [(e, s) for e, s in self._retiring if e is not engine]  # closed with it (attached)
        if engine is self._engine:
            self._stop(closing=True)
            if self.button.isChecked():
                self.url.setText("waiting for a pair…")

    @Slot(str)
    def _busy_changed(self, job: str) -> None:
        self._chat = job == "chat"
        if self._chat:
            self._drawn = None  # the chat answer has the charts now
        elif not job:
            self._free_retired()
        if job == "loading" and self.server is not None:
            self._stop()  # the old engine is closed when the new one is ready
            self.url.setText("waiting for the new pair…")
        elif not job and self.button.isChecked() and self.server is None and self.session.engine is not None:
            self._start()  # loading failed or was cancelled: serve the pair still loaded

    @Slot(object)
    def _pair_changed(self, pair: Any) -> None:
        if pair is None or self.session.engine is not self._engine:
            self._stop()
        if self.button.isChecked() and pair is not None:
            self._start()
        elif self.button.isChecked():
            self.url.setText("starts when a pair is loaded")

    # -- live view of server requests -----------------------------------------------------
    def _on_event(self, job: Any, ev: Any) -> None:
        """On a generating thread: forward server requests' events as Qt signals, the steps of
        the one drawn (the first that starts while nothing is drawn and no chat answer runs)."""
        if job.source != "server":
            return
        kind = getattr(ev, "kind", "")
        if kind == "prefill" and ev.done == 0:
            with self._draw_lock:
                if self._drawn is not None or self._chat:
                    return
                self._drawn = job
            self.jobStarted.emit(job)
        elif kind == "step" and job is self._drawn:
            self._steps.add(ev)
        elif kind == "done":
            drawn = job is self._drawn
            if drawn:
                self._steps.flush()
                self._drawn = None
            self.jobDone.emit(ev, drawn)

    @Slot(object)
    def _job_started(self, job: Any) -> None:
        if self.charts is not None and not self._chat:
            self.charts.reset()

    @Slot(list)
    def _on_steps(self, steps: list) -> None:
        if self.charts is None or not steps or self._chat:
            return
        self.charts.add_steps(steps)
        t, rate = self.charts.series.tokens_per_s()
        if len(rate):
            self.session.liveSpeed.emit(float(rate[-1]))

    @Slot(object, bool)
    def _job_done(self, ev: Any, drawn: bool) -> None:
        s = ev.stats
        if drawn and not self._chat:
            self.session.liveSpeed.emit(0.0)
        acc = f", acceptance {s.acceptance_rate:.0%}" if s.drafted else ""
        self.message.emit(f"Server request: {s.generated_tokens} tokens, {s.decode_tokens_per_s:.1f} tok/s{acc}")


def _machine_slots() -> int:
    from engine.models.hardware import default_parallel  # psutil only: no llama.cpp, no FastAPI

    return default_parallel()


def _free_slots(engine: Any, slots: Any, *, unused: bool = False) -> None:
    """Close a server's slots (None: it ran none) unless the engine has closed them with it;
    `unused`: a server that never served, whose engine's queue is given back its one slot."""
    if slots is None:
        return
    if unused:
        engine.queue.slots = 1
    if engine.detach(slots):
        slots.close()
