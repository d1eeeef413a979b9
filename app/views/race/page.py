"""Race: the same prompt and settings through the target alone, then target + drafter, one
after the other on the same device, streamed side by side; then a synchronised replay of
both from their recorded token timestamps, and the honest result from engine.race (the
speedup, or "about the same" when nothing was drafted or the gap is noise; acceptance,
tokens per step, first-token latency, and whether the outputs are identical). The page
runs the race; its widgets are built by layout.py (RaceParts) and it owns the components
that fill them: `verdict` (verdict.py: the result box) and `replayer` (replaying.py: the
synchronised replay). The widgets are the page's attributes too (the tests reach them)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QVBoxLayout, QWidget

from engine.measure.demo import first_demo

from ... import workers
from ...replay import live_rate
from ...session import Session
from ...widgets.charts.live_stats import REFRESH_MS
from ...widgets.transcript.provenance import Legend
from ...widgets.controls.reflow import HeightClaim, Reflow
from .layout import PANE_MIN_WIDTH, SIDES, RaceParts
from .replaying import Replay
from .verdict import Verdict, side_summary


class RaceView(QWidget):
    message = Signal(str)
    error = Signal(str)
    raceFinished = Signal(object)  # the RaceWorker's result dict
    replayFinished = Signal()

    def __init__(self, session: Session, parent: QWidget | None = None, *, gpu: bool | None = None):
        """`gpu`: the first race is this machine's demo (engine/measure/demo.py): an edit with
        prompt lookup on a CPU, new code with the draft model on a GPU; None keeps the
        generic prompt and the draft model."""
        super().__init__(parent)
        self.session = session
        self.worker: workers.RaceWorker | None = None
        self.result: dict[str, Any] | None = None
        self.tokens: dict[str, list] = {s: [] for s in SIDES}
        self.done: dict[str, Any] = {}
        # The live tok/s of the running side, rewritten a few times a second rather than per
        # token: a label's new text re-lays out the window, which would take CPU from the
        # compute threads the figure measures.
        self._live_side = ""
        self._live_timer = QTimer(self)
        self._live_timer.setInterval(REFRESH_MS)
        self._live_timer.timeout.connect(self._show_live_speed)
        self._race_lookahead: Any = "auto"
        self._race_temperature = 0.0
        self._build()
        self.verdict = Verdict(self.parts, session)
        self.replayer = Replay(self.panes, self.replay_btn, self.replay_speed, self.replay_label,
                               lambda: (self.tokens, self.done), self)
        self.replayer.changed.connect(self._sync_buttons)
        self.replayer.finished.connect(self._replay_finished)
        self.start_btn.clicked.connect(self.start)
        self.stop_btn.clicked.connect(self.stop)
        self.replay_btn.clicked.connect(self.replay)
        if gpu is not None:
            demo = first_demo(gpu)
            self.prompt.setPlainText(demo.prompt)
            self.drafter.setCurrentIndex(self.drafter.findData(demo.draft))
        # Bound methods, not lambdas: PySide6 runs a lambda slot in the emitting thread, and
        # these signals may come from a worker thread; a QObject's method is queued to ours.
        session.busyChanged.connect(self._session_changed)
        session.pairChanged.connect(self._session_changed)
        self._sync_buttons()

    # -- layout --------------------------------------------------------------------------
    def _build(self) -> None:
        """Prompt and settings, the result, the legend, the two panes, the replay row."""
        parts = self.parts = RaceParts()
        self.prompt, self.start_btn, self.stop_btn, self.status = parts.prompt, parts.start_btn, parts.stop_btn, parts.status
        self.drafter, self.lookahead, self.temperature, self.max_tokens, self.chat = (
            parts.drafter, parts.lookahead, parts.temperature, parts.max_tokens, parts.chat)
        self.speedup_label, self.speedup_detail, self.speedup_hint, self.bars = (
            parts.speedup_label, parts.speedup_detail, parts.speedup_hint, parts.bars)
        self.metric_labels, self.identical_label, self.panes = parts.metric_labels, parts.identical_label, parts.panes
        self.replay_btn, self.replay_speed, self.replay_label = parts.replay_btn, parts.replay_speed, parts.replay_label
        root = QVBoxLayout(self)
        root.setSpacing(8)
        top = QHBoxLayout()
        prompt, settings = parts.prompt_column, parts.settings
        top.addLayout(prompt, 1)
        top.addWidget(settings)
        root.addLayout(top)
        self._reflow = [Reflow(self, top, [prompt, settings])]  # stacked in a narrow window
        # The verdict above the panes: after a race it is what a person looks for, and in a
        # small window it would otherwise sit below two answers, out of sight.
        root.addWidget(parts.result)
        self._claim = HeightClaim(parts.result)
        self._reflow.append(Reflow(self, parts.result_row, parts.result_parts))
        legend_row = QHBoxLayout()
        legend_row.addWidget(Legend(show_toggle=False))
        root.addLayout(legend_row)
        root.addLayout(parts.panes_row, 1)
        self._reflow.append(Reflow(self, parts.panes_row, [lambda: PANE_MIN_WIDTH] * len(SIDES)))  # one above the other when narrow
        root.addLayout(parts.replay_row)

    def set_dark(self, dark: bool) -> None:
        self.verdict.set_dark(dark)

    # -- state ---------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.worker is not None

    @property
    def replaying(self) -> bool:
        return self.replayer.active

    @property
    def replay_frames(self) -> int:
        """Frames the last replay drew (the tests check that it played)."""
        return self.replayer.frames

    def replay_time(self) -> float:
        """Seconds of recorded time the replay has reached."""
        return self.replayer.time()

    def replay(self) -> None:
        """Play both recorded runs at once (not while a race runs)."""
        if not self.running:
            self.replayer.play()

    def stop_replay(self) -> None:
        self.replayer.stop()

    def _replay_finished(self) -> None:
        if self.result is not None:
            self.status.setText("Done.")
        self._sync_buttons()
        self.replayFinished.emit()

    def _has_draft_model(self) -> bool:
        pair = self.session.pair
        return pair is not None and pair.draft not in (None, "lookup", "mtp")

    def _has_mtp(self) -> bool:
        """The loaded target carries MTP layers (its own draft head)."""
        return getattr(getattr(self.session.engine, "target", None), "n_nextn", 0) > 0

    def _session_changed(self, *_: Any) -> None:
        self._sync_buttons()

    def _sync_buttons(self) -> None:
        running = self.running
        loaded = self.session.engine is not None
        self.start_btn.setEnabled(not running and loaded and not self.session.busy)
        self.stop_btn.setEnabled(running or self.replaying)
        self.replay_btn.setEnabled(not running and self.result is not None)
        has_draft, has_mtp = self._has_draft_model(), self._has_mtp()
        box = self.drafter.model()
        box.item(self.drafter.findData("model")).setEnabled(has_draft)
        box.item(self.drafter.findData("mtp")).setEnabled(has_mtp)
        key = self.drafter.currentData()
        if self.session.pair is not None and ((key == "model" and not has_draft) or (key == "mtp" and not has_mtp)):
            self.drafter.setCurrentIndex(self.drafter.findData("mtp" if has_mtp and key == "model" else "lookup"))
        if running:
            return
        if not loaded:
            self.status.setText("Load a pair in Models first.")
        elif self.session.busy and self.session.busy != "race":
            self.status.setText(f"Waiting: {self.session.busy} is running.")
        elif not self.status.text() or self.status.text().startswith(("Load a pair", "Waiting")):
            self.status.setText("Ready.")

    def _draft_spec(self) -> Any:
        key = self.drafter.currentData()
        if key == "mtp" and self._has_mtp():
            return "mtp"
        if key == "lookup" or not self._has_draft_model():
            return "lookup"
        return self.session.pair.draft  # type: ignore[union-attr]

    # -- the race ------------------------------------------------------------------------
    def start(self) -> None:
        text = self.prompt.toPlainText().strip()
        if not text:
            self.message.emit("Type a prompt for the race first")
            return
        if self.session.engine is None:
            self.error.emit("No model loaded: pick a pair in Models first")
            return
        if self.session.busy or self.running:
            self.message.emit(f"Busy: {self.session.busy or 'race'}")
            return
        self.stop_replay()
        self._reset_results()
        draft = self._draft_spec()
        self._race_lookahead = self.lookahead.value()
        self.panes["speculative"].subtitle.setText(
            {"lookup": "prompt lookup proposes, target verifies",
             "mtp": "the target's MTP head proposes, target verifies"}.get(draft, "draft model proposes, target verifies"))
        from engine import GenerationRequest

        request = GenerationRequest.from_options(
            text, draft_model=draft, lookahead=self._race_lookahead, max_tokens=self.max_tokens.value(),
            temperature=self.temperature.value(), chat=self.chat.isChecked(), tag="race",
        )
        w = workers.RaceWorker(self.session.engine, request)
        self._race_temperature = self.temperature.value()
        w.started_side.connect(self._on_started_side)
        w.tokens.connect(self._on_tokens)
        w.side_done.connect(self._on_side_done)
        w.result.connect(self._on_result)
        w.failed.connect(self._on_failed)
        w.finished.connect(self._on_finished)
        self.worker = w
        try:
            self.session.run(w, "race")
        except RuntimeError as e:  # someone else became busy in between
            self.worker = None
            self.error.emit(str(e))
            return
        self.status.setText("Running target alone…")
        self._sync_buttons()

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
            self.status.setText("Stopping…")
        elif self.replaying:
            self.stop_replay()

    def shutdown(self) -> None:
        self.stop_replay()
        if self.worker is not None:
            self.worker.cancel()

    def _reset_results(self) -> None:
        self.result = None
        self.done = {}
        self.tokens = {s: [] for s in SIDES}
        for p in self.panes.values():
            p.clear()
        self.verdict.clear()
        self.replay_label.setText("")

    def _on_started_side(self, side: str) -> None:
        self.status.setText("Running target alone…" if side == "target" else "Running target + draft…")
        self.panes[side].status.setText("running…")

    def _on_tokens(self, side: str, tokens: list) -> None:
        self.tokens[side].extend(tokens)
        self.panes[side].append(tokens)
        self._live_side = side
        if not self._live_timer.isActive():
            self._live_timer.start()

    def _show_live_speed(self) -> None:
        side = self._live_side
        rate = live_rate(self.tokens[side]) if side else 0.0
        if rate > 0 and side not in self.done:
            self.panes[side].speed.setText(f"{rate:.1f} tok/s")
            self.session.liveSpeed.emit(rate)

    def _on_side_done(self, side: str, ev: Any) -> None:
        self.done[side] = ev
        st = ev.stats
        pane = self.panes[side]
        pane.finish()  # the side's last tokens shown now, not a frame later
        pane.speed.setText(f"{st.decode_tokens_per_s:.1f} tok/s")
        pane.status.setText(side_summary(st))
        self.verdict.fill_metrics(side, st)
        if side == "target":
            self.bars.set_values(target=st.decode_tokens_per_s)

    def _on_result(self, r: dict) -> None:
        """The race's verdict (the RaceWorker's result dict) in the result box."""
        self.result = r
        self.verdict.show(r, lookahead=self._race_lookahead, temperature=self._race_temperature)
        self.status.setText("Done. Replaying both runs side by side…")
        self.raceFinished.emit(r)

    def _on_failed(self, msg: str) -> None:
        self.status.setText("The race failed.")
        self.error.emit(msg)

    def _on_finished(self) -> None:
        self.worker = None
        self._live_timer.stop()
        self._live_side = ""
        self.session.liveSpeed.emit(0.0)
        if self.result is None and not self.status.text().startswith("The race failed"):
            self.status.setText("Stopped." if self.done or any(self.tokens.values()) else "Ready.")
        self._sync_buttons()
        if self.result is not None:
            self.replay()

