"""Race: the same prompt and settings through the target alone, then target + drafter, one
after the other on the same device, streamed side by side; then a synchronised replay of
both from their recorded token timestamps, and the honest result (speedup, acceptance,
tokens per step, first-token latency, and whether the outputs are identical)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QElapsedTimer, QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QPainter, QPalette, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (
    QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QFrame, QGridLayout, QGroupBox, QHBoxLayout, QLabel,
    QPlainTextEdit, QPushButton, QSizePolicy, QSpinBox, QTextBrowser, QVBoxLayout, QWidget,
)

from .. import workers
from ..session import Session
from ..widgets.lookahead_control import LookaheadControl
from ..widgets.provenance import COLOURS, Legend

SIDES = ("target", "speculative")
TITLES = {"target": "Target alone", "speculative": "Target + draft"}
FRAME_MS = 33  # replay at ~30 fps
REPLAY_SPEEDS = [("0.5×", 0.5), ("1×", 1.0), ("2×", 2.0), ("4×", 4.0)]
DEFAULT_PROMPT = "Write a Python function that checks whether a string is a palindrome, with a docstring and two examples."


def live_rate(tokens: list) -> float:
    """Decode tok/s from recorded TokenEvents: tokens after the first over the time they took."""
    ts = [ev.t for ev in tokens]
    if len(ts) < 2 or ts[-1] <= ts[0]:
        return 0.0
    return (len(ts) - 1) / (ts[-1] - ts[0])


def speedup_text(speedup: float) -> str:
    """'2.31× faster', '1.25× slower' (never a flattering rounding of a loss)."""
    if speedup <= 0:
        return "no speed measured"
    if speedup >= 1.0:
        return f"{speedup:.2f}× faster"
    return f"{1.0 / speedup:.2f}× slower"


class RacePane(QFrame):
    """One side of the race: a title, a live tok/s figure and the text with provenance colours."""

    def __init__(self, title: str, subtitle: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 6, 8, 8)
        head = QHBoxLayout()
        self.title = QLabel(f"<b>{title}</b>")
        self.title.setStyleSheet("font-size: 15px;")
        self.subtitle = QLabel(subtitle)
        self.subtitle.setObjectName("paneSubtitle")
        self.speed = QLabel("")
        self.speed.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        f = self.speed.font()
        f.setPointSizeF(f.pointSizeF() * 1.5)
        f.setBold(True)
        self.speed.setFont(f)
        self.speed.setMinimumWidth(150)
        self.status = QLabel("")
        self.status.setObjectName("paneStatus")
        head.addWidget(self.title)
        head.addWidget(self.subtitle)
        head.addStretch(1)
        head.addWidget(self.speed)
        self.text = QTextBrowser()
        self.text.document().setDocumentMargin(10)
        mono = QFont("monospace")
        mono.setStyleHint(QFont.StyleHint.Monospace)
        self.text.setFont(mono)
        lay.addLayout(head)
        lay.addWidget(self.status)
        lay.addWidget(self.text, 1)
        self._formats: dict[str, QTextCharFormat] = {}
        for prov, c in COLOURS.items():
            fmt = QTextCharFormat()
            if c.alpha():
                fmt.setBackground(c)
            self._formats[prov] = fmt

    def clear(self) -> None:
        self.text.clear()
        self.speed.setText("")
        self.status.setText("")

    def append(self, tokens: list) -> None:
        bar = self.text.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 4
        cursor = self.text.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        for ev in tokens:
            if ev.text:
                cursor.insertText(ev.text, self._formats.get(ev.provenance, self._formats["plain"]))
        if at_end:
            bar.setValue(bar.maximum())

    def plain_text(self) -> str:
        return self.text.toPlainText()


class SpeedBars(QWidget):
    """Two horizontal bars, tok/s of each side on one scale: the speedup at a glance."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.values: dict[str, float] = {}
        self.setMinimumHeight(64)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:
        return QSize(320, 64)

    def set_values(self, target: float, speculative: float) -> None:
        self.values = {"target": target, "speculative": speculative}
        self.update()

    def clear(self) -> None:
        self.values = {}
        self.update()

    def paintEvent(self, _ev: Any) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        fg = self.palette().color(QPalette.ColorRole.WindowText)  # readable on light and dark palettes
        colours = {"target": QColor(240, 136, 62), "speculative": QColor(46, 160, 67)}
        label_w, value_w = 110, 90
        w = max(10, self.width() - label_w - value_w - 8)
        row_h = (self.height() - 6) / 2
        top = max(self.values.values(), default=0.0) or 1.0
        for i, side in enumerate(SIDES):
            y = 3 + i * row_h
            p.setPen(fg)
            p.drawText(QRectF(0, y, label_w, row_h), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, TITLES[side])
            v = self.values.get(side, 0.0)
            track = QRectF(label_w, y + row_h * 0.2, w, row_h * 0.6)
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(QColor(128, 128, 128, 40))
            p.drawRoundedRect(track, 3, 3)
            if v > 0:
                p.setBrush(colours[side])
                p.drawRoundedRect(QRectF(track.x(), track.y(), w * v / top, track.height()), 3, 3)
            p.setPen(fg)
            p.drawText(QRectF(label_w + w + 8, y, value_w, row_h), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                       f"{v:.1f} tok/s" if v > 0 else "–")
        p.end()


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
        self._replay_clock = QElapsedTimer()
        self._replay_base = 0.0  # virtual seconds reached before the last speed change
        self._replay_idx: dict[str, int] = {s: 0 for s in SIDES}
        self._replay_end = 0.0
        self.replay_frames = 0
        self._last_speed = 1.0
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
        box.setMinimumWidth(360)
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
        self.speedup_label.setMinimumWidth(230)
        self.speedup_detail = QLabel("speedup = spec tok/s ÷ target tok/s")
        self.speedup_detail.setObjectName("paneSubtitle")
        self.speedup_hint = QLabel("")
        self.speedup_hint.setWordWrap(True)
        self.bars = SpeedBars()
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
        self.identical_label.setMinimumWidth(260)
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
        self.speedup_detail.setText("speedup = spec tok/s ÷ target tok/s")
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
        pane = self.panes[side]
        pane.append(tokens)
        rate = live_rate(self.tokens[side])
        if rate > 0:
            pane.speed.setText(f"{rate:.1f} tok/s")
            self.session.liveSpeed.emit(rate)

    def _on_side_done(self, side: str, ev: Any) -> None:
        self.done[side] = ev
        st = ev.stats
        pane = self.panes[side]
        pane.speed.setText(f"{st.decode_tokens_per_s:.1f} tok/s")
        pane.status.setText(self._side_summary(st))
        self._fill_metrics(side, st)
        if side == "target":
            self.bars.set_values(st.decode_tokens_per_s, 0.0)

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
        base, spec = r["target"].stats, r["speculative"].stats
        speedup = float(r.get("speedup") or 0.0)
        self.speedup_label.setText(speedup_text(speedup))
        self.speedup_detail.setText(
            f"speedup {speedup:.2f} = {spec.decode_tokens_per_s:.1f} ÷ {base.decode_tokens_per_s:.1f} tok/s (decode)")
        self.speedup_hint.setText(self._hint(speedup, spec))
        self._colour_speedup()
        self.bars.set_values(base.decode_tokens_per_s, spec.decode_tokens_per_s)
        self.identical_label.setText(self._identical_text(r))
        self.status.setText("Done. Replaying both runs side by side…")
        self.raceFinished.emit(r)

    def _hint(self, speedup: float, spec: Any) -> str:
        """Why it came out this way, in one line."""
        if speedup <= 0:
            return ""
        how = f"acceptance {spec.acceptance_rate:.0%}, {spec.mean_tokens_per_step:.2f} tokens per target pass"
        if speedup < 0.95:
            tip = "Try another drafter." if self._race_lookahead == "auto" else "Try Auto lookahead or another drafter."
            return f"Drafting cost more than it saved here ({how}). {tip}"
        if speedup < 1.05:
            return f"About even ({how})."
        return f"Each target pass yielded {spec.mean_tokens_per_step:.2f} tokens on average ({how.split(',')[0]})."

    def _identical_text(self, r: dict) -> str:
        if r.get("identical"):
            good = "#66bb6a" if self.dark else "#2e7d32"
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
        colour = "#ef6c00" if div.within_noise else "#c62828"
        head = "Near-tie divergence" if div.within_noise else "Outputs differ"
        return f"<b style='color:{colour}'>✗ {head}.</b> {text.replace('<', '&lt;')}"

    def _colour_speedup(self) -> None:
        sp = float((self.result or {}).get("speedup") or 0.0)
        if sp <= 0:
            colour = ""
        elif sp >= 1.05:
            colour = "#66bb6a" if self.dark else "#2e7d32"
        elif sp < 0.95:
            colour = "#ffa726" if self.dark else "#e65100"
        else:
            colour = ""
        self.speedup_label.setStyleSheet(f"color: {colour};" if colour else "")

    def _on_failed(self, msg: str) -> None:
        self.status.setText("The race failed.")
        self.error.emit(msg)

    def _on_finished(self) -> None:
        self.worker = None
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
            self._replay_idx[s] = 0
        ends = [toks[-1].t for toks in self.tokens.values() if toks]
        self._replay_end = max(ends) if ends else 0.0
        self._replay_base = 0.0
        self.replay_frames = 0
        self._replay_clock.start()
        self._replay_timer.start()
        self.replay_btn.setText("↻ Restart replay")
        self._sync_buttons()
        self._replay_tick()

    def stop_replay(self) -> None:
        if self._replay_timer.isActive():
            self._replay_timer.stop()
            self._finish_replay_panes()
            self.replay_label.setText("Replay stopped.")
            self.replay_btn.setText("▶ Replay side by side")
            self._sync_buttons()

    def _speed(self) -> float:
        return float(self.replay_speed.currentData() or 1.0)

    def _replay_speed_changed(self, _i: int) -> None:
        if self._replay_timer.isActive():  # keep the virtual clock continuous
            self._replay_base += self._replay_clock.elapsed() / 1000.0 * self._last_speed
            self._replay_clock.restart()
        self._last_speed = self._speed()

    def replay_time(self) -> float:
        return self._replay_base + self._replay_clock.elapsed() / 1000.0 * self._speed()

    def _replay_tick(self) -> None:
        self._last_speed = self._speed()
        now = self.replay_time()
        self.replay_frames += 1
        for s in SIDES:
            toks = self.tokens[s]
            i0 = i = self._replay_idx[s]
            while i < len(toks) and toks[i].t <= now:
                i += 1
            if i > i0:
                self.panes[s].append(toks[i0:i])
                self._replay_idx[s] = i
            pane = self.panes[s]
            if toks and i >= len(toks):
                st = self.done.get(s)
                rate = st.stats.decode_tokens_per_s if st is not None else live_rate(toks)
                pane.speed.setText(f"✓ {toks[-1].t:.2f} s · {rate:.1f} tok/s")
            elif i >= 2:
                pane.speed.setText(f"{live_rate(toks[:i]):.1f} tok/s")
            elif i == 0:
                pane.speed.setText("reading prompt…" if toks else "")
        shown = min(now, self._replay_end)
        self.replay_label.setText(f"Replay {shown:.2f} s of {self._replay_end:.2f} s at {self.replay_speed.currentText()}")
        if now >= self._replay_end:
            self._replay_timer.stop()
            self.replay_btn.setText("▶ Replay side by side")
            if self.result is not None:
                self.status.setText("Done.")
            self._sync_buttons()
            self.replayFinished.emit()

    def _finish_replay_panes(self) -> None:
        for s in SIDES:
            toks = self.tokens[s]
            i = self._replay_idx[s]
            if i < len(toks):
                self.panes[s].append(toks[i:])
                self._replay_idx[s] = len(toks)
