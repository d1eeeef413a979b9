"""Race: the same prompt and settings through the target alone, then target + drafter, one
after the other on the same device, streamed side by side; then a synchronised replay of
both from their recorded token timestamps, and the honest result from engine.race (the
speedup, or "about the same" when nothing was drafted or the gap is noise; acceptance,
tokens per step, first-token latency, and whether the outputs are identical)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QGridLayout, QGroupBox, QHBoxLayout, QLabel, QPlainTextEdit,
    QPushButton, QSpinBox, QVBoxLayout, QWidget,
)

from .. import theme, workers
from ..replay import ReplayClock, live_rate
from ..session import Session
from ..widgets.live_stats import REFRESH_MS
from ..widgets.lookahead_control import LookaheadControl
from ..widgets.provenance import Legend
from ..widgets.race_pane import RacePane
from ..widgets.speed_bars import SpeedBars

SIDES = ("target", "speculative")
TITLES = {"target": "Target alone", "speculative": "Target + draft"}
FRAME_MS = 33  # replay at ~30 fps
REPLAY_SPEEDS = [("0.5×", 0.5), ("1×", 1.0), ("2×", 2.0), ("4×", 4.0)]
SPEEDUP_DEFINITION = "speedup = wall-clock of target alone ÷ wall-clock of target + draft"
DEFAULT_PROMPT = "Write a Python function that checks whether a string is a palindrome, with a docstring and two examples."


class RaceView(QWidget):
    message = Signal(str)
    error = Signal(str)
    raceFinished = Signal(object)  # the RaceWorker's result dict
    replayFinished = Signal()

    def __init__(self, session: Session, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.worker: workers.RaceWorker | None = None
        self.result: dict[str, Any] | None = None
        self.tokens: dict[str, list] = {s: [] for s in SIDES}
        self.done: dict[str, Any] = {}
        self.dark = False
        # replay state
        self._replay_timer = QTimer(self)
        self._replay_timer.setInterval(FRAME_MS)
        self._replay_timer.timeout.connect(self._replay_tick)
        self._replay: ReplayClock | None = None
        self.replay_frames = 0
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
        # Bound methods, not lambdas: PySide6 runs a lambda slot in the emitting thread, and
        # these signals may come from a worker thread; a QObject's method is queued to ours.
        session.busyChanged.connect(self._session_changed)
        session.pairChanged.connect(self._session_changed)
        self._sync_buttons()

    # -- layout --------------------------------------------------------------------------
    def _build(self) -> None:
        root = QVBoxLayout(self)
        root.setSpacing(8)

        top = QHBoxLayout()
        left = QVBoxLayout()
        intro = QLabel("<b>Race</b> — the same prompt and settings, first through the target alone, then through "
                       "target + drafter, one after the other on this device. Greedy (temperature 0) output must be "
                       "identical; only the speed may differ.")
        intro.setWordWrap(True)
        self.prompt = QPlainTextEdit()
        self.prompt.setPlaceholderText("Prompt for both runs")
        self.prompt.setPlainText(DEFAULT_PROMPT)
        self.prompt.setMinimumHeight(70)
        self.prompt.setMaximumHeight(110)
        buttons = QHBoxLayout()
        self.start_btn = QPushButton("Start race")
        self.start_btn.setDefault(True)
        self.start_btn.clicked.connect(self.start)
        self.stop_btn = QPushButton("Stop")
        self.stop_btn.clicked.connect(self.stop)
        self.status = QLabel("")
        self.status.setObjectName("raceStatus")
        buttons.addWidget(self.start_btn)
        buttons.addWidget(self.stop_btn)
        buttons.addWidget(self.status, 1)
        left.addWidget(intro)
        left.addWidget(self.prompt)
        left.addLayout(buttons)
        top.addLayout(left, 1)

        box = QGroupBox("Settings (both runs)")
        form = QFormLayout(box)
        self.drafter = QComboBox()
        self.drafter.addItem("Draft model of the loaded pair", "model")
        self.drafter.addItem("Prompt lookup (no second model)", "lookup")
        self.lookahead = LookaheadControl(value="auto")
        self.temperature = QDoubleSpinBox()
        self.temperature.setRange(0.0, 2.0)
        self.temperature.setSingleStep(0.1)
        self.temperature.setToolTip("0 = greedy: the speculative output must then equal the target's own")
        self.max_tokens = QSpinBox()
        self.max_tokens.setRange(1, 8192)
        self.max_tokens.setValue(256)
        self.chat = QCheckBox("Use the model's chat template")
        self.chat.setChecked(True)
        form.addRow("Drafter", self.drafter)
        form.addRow(self.lookahead)
        form.addRow("Temperature", self.temperature)
        form.addRow("Max tokens", self.max_tokens)
        form.addRow(self.chat)
        top.addWidget(box)
        root.addLayout(top)

        legend_row = QHBoxLayout()
        legend_row.addWidget(Legend(show_toggle=False))
        root.addLayout(legend_row)

        panes = QHBoxLayout()
        self.panes = {
            "target": RacePane(TITLES["target"], "every token costs a full target pass"),
            "speculative": RacePane(TITLES["speculative"], "draft proposes, target verifies"),
        }
        for s in SIDES:
            panes.addWidget(self.panes[s], 1)
        root.addLayout(panes, 1)

        replay_row = QHBoxLayout()
        self.replay_btn = QPushButton("▶ Replay side by side")
        self.replay_btn.setToolTip("Play both runs again at the same time, from their recorded token timestamps")
        self.replay_btn.clicked.connect(self.replay)
        self.replay_speed = QComboBox()
        for label, v in REPLAY_SPEEDS:
            self.replay_speed.addItem(label, v)
        self.replay_speed.setCurrentIndex(1)
        self.replay_speed.currentIndexChanged.connect(self._replay_speed_changed)
        self.replay_label = QLabel("")
        replay_row.addWidget(self.replay_btn)
        replay_row.addWidget(QLabel("Speed"))
        replay_row.addWidget(self.replay_speed)
        replay_row.addWidget(self.replay_label, 1)
        root.addLayout(replay_row)

        res = QGroupBox("Result")
        rl = QHBoxLayout(res)
        rl.setSpacing(18)
        big = QVBoxLayout()
        self.speedup_label = QLabel("–")
        self.speedup_label.setObjectName("speedup")
        f = self.speedup_label.font()
        f.setPointSizeF(f.pointSizeF() * 2.2)
        f.setBold(True)
        self.speedup_label.setFont(f)
        self.speedup_label.setMinimumWidth(self.speedup_label.fontMetrics().horizontalAdvance("0.00× faster") + 8)
        self.speedup_detail = QLabel(SPEEDUP_DEFINITION)
        self.speedup_detail.setObjectName("paneSubtitle")
        self.speedup_detail.setWordWrap(True)
        self.speedup_hint = QLabel("")
        self.speedup_hint.setWordWrap(True)
        self.bars = SpeedBars(TITLES)
        big.addWidget(self.speedup_label)
        big.addWidget(self.speedup_detail)
        big.addWidget(self.speedup_hint)
        big.addWidget(self.bars)
        rl.addLayout(big, 3)

        grid = QGridLayout()
        grid.setHorizontalSpacing(16)
        grid.setVerticalSpacing(3)
        self.metric_rows = [
            ("tok_s", "Decode speed"), ("ttft", "First token"), ("acceptance", "Acceptance"),
            ("per_step", "Tokens per step"), ("tokens", "Tokens"), ("wall", "Total time"),
        ]
        grid.addWidget(QLabel(""), 0, 0)
        for c, s in enumerate(SIDES, start=1):
            h = QLabel(f"<b>{TITLES[s]}</b>")
            h.setAlignment(Qt.AlignmentFlag.AlignRight)
            grid.addWidget(h, 0, c)
        self.metric_labels: dict[tuple[str, str], QLabel] = {}
        for r, (key, title) in enumerate(self.metric_rows, start=1):
            grid.addWidget(QLabel(title), r, 0)
            for c, s in enumerate(SIDES, start=1):
                lab = QLabel("–")
                lab.setAlignment(Qt.AlignmentFlag.AlignRight)
                lab.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
                grid.addWidget(lab, r, c)
                self.metric_labels[(key, s)] = lab
        rl.addLayout(grid, 3)

        self.identical_label = QLabel("")
        self.identical_label.setWordWrap(True)
        self.identical_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.identical_label.setMinimumWidth(180)
        self.identical_label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        rl.addWidget(self.identical_label, 3)
        root.addWidget(res)

    def set_dark(self, dark: bool) -> None:
        self.dark = dark
        self.bars.update()
        self._colour_speedup()

    # -- state ---------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.worker is not None

    @property
    def replaying(self) -> bool:
        return self._replay_timer.isActive()

    def _has_draft_model(self) -> bool:
        pair = self.session.pair
        return pair is not None and pair.draft not in (None, "lookup")

    def _session_changed(self, *_: Any) -> None:
        self._sync_buttons()

    def _sync_buttons(self) -> None:
        running = self.running
        loaded = self.session.engine is not None
        self.start_btn.setEnabled(not running and loaded and not self.session.busy)
        self.stop_btn.setEnabled(running or self.replaying)
        self.replay_btn.setEnabled(not running and self.result is not None)
        has_draft = self._has_draft_model()
        item = self.drafter.model().item(0)
        if item is not None:
            item.setEnabled(has_draft)
        if not has_draft and self.drafter.currentData() == "model" and self.session.pair is not None:
            self.drafter.setCurrentIndex(1)
        if running:
            return
        if not loaded:
            self.status.setText("Load a pair in Models first.")
        elif self.session.busy and self.session.busy != "race":
            self.status.setText(f"Waiting: {self.session.busy} is running.")
        elif not self.status.text() or self.status.text().startswith(("Load a pair", "Waiting")):
            self.status.setText("Ready.")

    def _draft_spec(self) -> Any:
        if self.drafter.currentData() == "lookup" or not self._has_draft_model():
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
            "prompt lookup proposes, target verifies" if draft == "lookup" else "draft model proposes, target verifies")
        w = workers.RaceWorker(
            self.session.engine, text, draft=draft, lookahead=self.lookahead.value(),
            max_tokens=self.max_tokens.value(), temperature=self.temperature.value(), chat=self.chat.isChecked(),
        )
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
        for lab in self.metric_labels.values():
            lab.setText("–")
        self.speedup_label.setText("–")
        self.speedup_detail.setText(SPEEDUP_DEFINITION)
        self.speedup_hint.setText("")
        self._colour_speedup()
        self.identical_label.setText("")
        self.replay_label.setText("")
        self.bars.clear()

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
        pane.speed.setText(f"{st.decode_tokens_per_s:.1f} tok/s")
        pane.status.setText(self._side_summary(st))
        self._fill_metrics(side, st)
        if side == "target":
            self.bars.set_values(target=st.decode_tokens_per_s)

    @staticmethod
    def _side_summary(st: Any) -> str:
        parts = [f"{st.generated_tokens} tokens in {st.wall_s:.2f} s", f"first token {st.time_to_first_token_s:.2f} s"]
        if st.drafted:
            parts.append(f"acceptance {st.acceptance_rate:.0%}")
            parts.append(f"{st.mean_tokens_per_step:.2f} tokens/step")
        if st.finish_reason == "cancelled":
            parts.append("stopped")
        return " · ".join(parts)

    def _fill_metrics(self, side: str, st: Any) -> None:
        vals = {
            "tok_s": f"{st.decode_tokens_per_s:.1f} tok/s",
            "ttft": f"{st.time_to_first_token_s * 1000:.0f} ms",
            "acceptance": f"{st.acceptance_rate:.0%}" if st.drafted else "–",
            "per_step": f"{st.mean_tokens_per_step:.2f}",
            "tokens": str(st.generated_tokens),
            "wall": f"{st.wall_s:.2f} s",
        }
        for key, text in vals.items():
            self.metric_labels[(key, side)].setText(text)

    def _on_result(self, r: dict) -> None:
        self.result = r
        race = r["race"]  # engine.race.RaceResult
        base, spec = race.target.stats, race.speculative.stats
        big, _, why = race.headline.partition(": ")
        self.speedup_label.setText(big)
        self.speedup_detail.setText(race.detail)
        self.speedup_hint.setText(self._hint(why, race))
        self._colour_speedup()
        self.bars.set_values(target=base.decode_tokens_per_s, speculative=spec.decode_tokens_per_s)
        self.identical_label.setText(self._identical_text(r))
        self.status.setText("Done. Replaying both runs side by side…")
        self.raceFinished.emit(r)

    def _hint(self, why: str, race: Any) -> str:
        """The headline's reason, and what to try when drafting lost."""
        spec = race.speculative.stats
        hint = why[:1].upper() + why[1:] + "." if why else ""
        if spec.drafted and race.wall_speedup < 1.0 and not _about_the_same(race):
            tip = "Try another drafter." if self._race_lookahead == "auto" else "Try Auto lookahead or another drafter."
            hint = (hint + " " if hint else "") + (
                f"Each target pass yielded {spec.mean_tokens_per_step:.2f} tokens on average. {tip}")
        elif spec.drafted and not why:
            hint = f"Each target pass yielded {spec.mean_tokens_per_step:.2f} tokens on average."
        return hint

    def _identical_text(self, r: dict) -> str:
        if r.get("identical"):
            good = theme.palette(self.dark).good
            return (f"<b style='color:{good}'>✓ Identical output.</b> Target + draft wrote exactly the tokens the "
                    "target alone wrote.")
        base, spec = r["target"], r["speculative"]
        if self._race_temperature > 0:
            return ("<b>Outputs differ</b>, as expected when sampling (temperature &gt; 0): speculative sampling "
                    "keeps the target's distribution, not its exact text. Use temperature 0 to check exactness.")
        div = r.get("divergence")
        if div is None:
            n = min(len(base.tokens), len(spec.tokens))
            return (f"<b>Outputs differ in length only:</b> the first {n} tokens are identical "
                    f"({len(base.tokens)} vs {len(spec.tokens)} tokens).")
        model = getattr(self.session.engine, "target", None)
        try:
            text = div.describe(model)
        except Exception:  # the engine may be gone; the ids still say it
            text = div.describe(None)
        pal = theme.palette(self.dark)
        colour = pal.near_tie if div.within_noise else pal.bad
        head = "Near-tie divergence" if div.within_noise else "Outputs differ"
        return f"<b style='color:{colour}'>✗ {head}.</b> {text.replace('<', '&lt;')}"

    def _colour_speedup(self) -> None:
        """Green for a real gain, orange for a loss, no colour when it is about the same."""
        race = (self.result or {}).get("race")
        colour = ""
        if race is not None and not _about_the_same(race) and race.wall_speedup > 0:
            pal = theme.palette(self.dark)
            colour = pal.good if race.wall_speedup > 1.0 else pal.warn
        self.speedup_label.setStyleSheet(f"color: {colour};" if colour else "")

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

    # -- synchronised replay -------------------------------------------------------------
    def replay(self) -> None:
        """Play both recorded runs at once, each token at its recorded time (× speed)."""
        if self.running or not any(self.tokens.values()):
            return
        self._replay_timer.stop()
        for s in SIDES:
            self.panes[s].text.clear()
            self.panes[s].speed.setText("")
        self._replay = ReplayClock(self.tokens, speed=self._speed())
        self._replay.start()
        self.replay_frames = 0
        self._replay_timer.start()
        self.replay_btn.setText("↻ Restart replay")
        self._sync_buttons()
        self._replay_tick()

    def stop_replay(self) -> None:
        if self._replay_timer.isActive():
            self._replay_timer.stop()
            if self._replay is not None:
                for s, rest in self._replay.finish().items():
                    self.panes[s].append(rest)
            self.replay_label.setText("Replay stopped.")
            self.replay_btn.setText("▶ Replay side by side")
            self._sync_buttons()

    def _speed(self) -> float:
        return float(self.replay_speed.currentData() or 1.0)

    def _replay_speed_changed(self, _i: int) -> None:
        if self._replay is not None:
            self._replay.set_speed(self._speed())  # the virtual clock stays continuous

    def replay_time(self) -> float:
        """Seconds of recorded time the replay has reached."""
        return self._replay.time() if self._replay is not None else 0.0

    def _replay_tick(self) -> None:
        clock = self._replay
        if clock is None:
            return
        self.replay_frames += 1
        for s, due in clock.advance().items():
            if due:
                self.panes[s].append(due)
            done = self.done.get(s)
            self.panes[s].speed.setText(clock.speed_text(s, done.stats.decode_tokens_per_s if done is not None else None))
        self.replay_label.setText(
            f"Replay {min(clock.time(), clock.end):.2f} s of {clock.end:.2f} s at {self.replay_speed.currentText()}")
        if clock.done:
            self._replay_timer.stop()
            self.replay_btn.setText("▶ Replay side by side")
            if self.result is not None:
                self.status.setText("Done.")
            self._sync_buttons()
            self.replayFinished.emit()


def _about_the_same(race: Any) -> bool:
    """No real difference (nothing drafted, or a gap inside the noise), as engine.measure.racing decides it."""
    return race.about_the_same
