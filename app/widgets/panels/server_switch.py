"""The status bar's "Local server" switch: the OpenAI-compatible server on the loaded pair,
in the app's own process and on the app's own engine.

Server requests and chat answers share the engine's `GenerationQueue`, so they wait
behind each other. Each server request is drawn live in the chat's charts, as a chat
answer is. The server stops before the engine it serves is replaced or closed, and starts
again on the new pair if the switch is still on.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSpinBox, QWidget

from ...workers import FrameCoalescer

DEFAULT_PORT = 8080


class ServerSwitch(QWidget):
    message = Signal(str)
    error = Signal(str)
    jobStarted = Signal(object)  # engine.decoding.queue.Job of a server request that began generating
    steps = Signal(list)  # its StepEvents, about one batch per frame
    jobDone = Signal(object)  # its DoneEvent
    _started = Signal(object)  # from the starter thread: a ServerThread, or an error text

    def __init__(self, session: Any, charts: Any = None, port: int = DEFAULT_PORT, parent: QWidget | None = None):
        super().__init__(parent)
        self.session, self.charts = session, charts
        self.server: Any = None  # engine.serving.server.ServerThread while running
        self._engine: Any = None  # the engine being served (its queue has our listener)
        self._starting = False
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
        self.url = QLabel("")
        self.url.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        for w in (self.button, self.port, self.url):
            lay.addWidget(w)
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
        self.url.setText("starting…")
        port = self.port.value()
        served_id = pair.pair_id or Path(pair.target).stem
        threading.Thread(target=self._start_in_thread, args=(engine, pair.draft, served_id, port),
                         name="tandem-server-start", daemon=True).start()

    def _start_in_thread(self, engine: Any, draft: Any, served_id: str, port: int) -> None:
        """Off the GUI thread: importing FastAPI and starting uvicorn take a moment."""
        try:
            from engine.serving.server import ServedModel, ServerThread, create_app

            app = create_app(ServedModel(engine, served_id, draft=draft, lookahead="auto"))
            self._started.emit((engine, ServerThread(app, "127.0.0.1", port).start()))
        except ImportError as e:
            self._started.emit(f"the local server needs the 'server' extra ({e.name} is missing): "
                               "pip install 'tandem-studio[server]'")
        except Exception as e:  # port in use, ...: a message, never a dead window
            self._started.emit(str(e))

    @Slot(object)
    def _on_started(self, result: Any) -> None:
        self._starting = False
        if isinstance(result, str):
            self.port.setEnabled(True)
            self.button.setChecked(False)
            self.error.emit(f"Local server: {result}")
            return
        engine, server = result
        if not self.button.isChecked() or engine is not self.session.engine:
            server.stop()  # switched off, or the pair changed, while it was starting
            self.port.setEnabled(True)
            if self.button.isChecked():
                self._start()
            return
        self.server, self._engine = server, engine
        engine.queue.add_listener(self._on_event)
        self.url.setText(f"{server.url}/v1")
        self.message.emit(f"Local server on {server.url}/v1")

    def _stop(self) -> None:
        """Stop serving (running and waiting requests are cancelled) and wait for it."""
        if self._engine is not None:
            self._engine.queue.remove_listener(self._on_event)
        if self.server is not None:
            self.server.stop()
        self.server, self._engine = None, None
        self.port.setEnabled(True)

    def shutdown(self) -> None:
        self._stop()

    # -- the engine changes under us ------------------------------------------------------
    @Slot(object)
    def _engine_closing(self, engine: Any) -> None:
        if engine is self._engine:
            self._stop()
            if self.button.isChecked():
                self.url.setText("waiting for a pair…")

    @Slot(str)
    def _busy_changed(self, job: str) -> None:
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
        """On the generating thread: forward server requests' events as Qt signals."""
        if job.source != "server":
            return
        kind = getattr(ev, "kind", "")
        if kind == "prefill" and ev.done == 0:
            self.jobStarted.emit(job)
        elif kind == "step":
            self._steps.add(ev)
        elif kind == "done":
            self._steps.flush()
            self.jobDone.emit(ev)

    @Slot(object)
    def _job_started(self, job: Any) -> None:
        if self.charts is not None:
            self.charts.reset()

    @Slot(list)
    def _on_steps(self, steps: list) -> None:
        if self.charts is None or not steps:
            return
        self.charts.add_steps(steps)
        t, rate = self.charts.series.tokens_per_s()
        if len(rate):
            self.session.liveSpeed.emit(float(rate[-1]))

    @Slot(object)
    def _job_done(self, ev: Any) -> None:
        s = ev.stats
        self.session.liveSpeed.emit(0.0)
        acc = f", acceptance {s.acceptance_rate:.0%}" if s.drafted else ""
        self.message.emit(f"Server request: {s.generated_tokens} tokens, {s.decode_tokens_per_s:.1f} tok/s{acc}")
