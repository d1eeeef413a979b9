"""The race page's parts, built once: the prompt with its buttons and settings (top), the
result box, the two panes (side by side, or one above the other in a narrow window), and the
replay row. `RaceParts` only builds them; the page connects them and its components
(verdict.py, replaying.py) fill them."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QGridLayout, QGroupBox, QHBoxLayout, QLabel, QPlainTextEdit,
    QPushButton, QSpinBox, QVBoxLayout, QWidget,
)

from ...widgets.controls.lookahead_control import LookaheadControl
from ...widgets.panels.race_pane import RacePane
from ...widgets.controls.reflow import WrappingLabel
from ...widgets.charts.speed_bars import SpeedBars

SIDES = ("target", "speculative")
TITLES = {"target": "Target alone", "speculative": "Target + draft"}
REPLAY_SPEEDS = [("0.5×", 0.5), ("1×", 1.0), ("2×", 2.0), ("4×", 4.0)]
SPEEDUP_DEFINITION = "speedup = wall-clock of target alone ÷ wall-clock of target + draft"
DEFAULT_PROMPT = "Write a Python function that checks whether a string is a palindrome, with a docstring and two examples."
PANE_MIN_WIDTH = 360  # narrower than this, an answer reads badly: the panes stack instead
HEADLINE_MIN_WIDTH = 300  # the verdict's column beside the metrics; narrower, the result box stacks
PANE_MIN_HEIGHT = 180  # a few lines of each answer even in a short window (the page scrolls)
METRIC_ROWS = [
    ("tok_s", "Decode speed"), ("ttft", "First token"), ("acceptance", "Acceptance"),
    ("per_step", "Tokens per step"), ("tokens", "Tokens"), ("wall", "Total time"),
]


class RaceParts:
    """RaceView's widgets and the layouts that hold them, built once: `prompt_column` and
    `settings` (top), `result` (its row `result_row` reflows `result_parts`), `panes_row`
    and `replay_row`."""

    def __init__(self) -> None:
        self.prompt_column = self._build_prompt_column()
        self.settings = self._build_settings()
        self.result = self._build_result()
        self.panes_row = self._build_panes()
        self.replay_row = self._build_replay_row()

    def _build_prompt_column(self) -> QVBoxLayout:
        """What a race is, the prompt for both runs, Start and Stop, and the status line."""
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
        self.stop_btn = QPushButton("Stop")
        self.status = QLabel("")
        self.status.setObjectName("raceStatus")
        buttons.addWidget(self.start_btn)
        buttons.addWidget(self.stop_btn)
        buttons.addWidget(self.status, 1)
        left.addWidget(intro)
        left.addWidget(self.prompt)
        left.addLayout(buttons)
        return left

    def _build_settings(self) -> QGroupBox:
        """Drafter, lookahead, temperature, max tokens and chat template, for both runs."""
        box = QGroupBox("Settings (both runs)")
        form = QFormLayout(box)
        self.drafter = QComboBox()
        self.drafter.addItem("Draft model of the loaded pair", "model")
        self.drafter.addItem("The target's MTP head (models that ship one)", "mtp")
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
        # The race keeps to temperature: a fixed measurement, comparable between pairs and machines;
        # the chat's stats line and charts show the speed under its own advanced sampling.
        self.sampling_note = WrappingLabel("Temperature only: the chat's top-k, top-p, min-p, repeat penalty, seed and "
                                    "stop strings are not used here, so races stay comparable.")
        self.sampling_note.setObjectName("raceSamplingNote")
        self.sampling_note.setToolTip("A chat's own stats line and live charts show its speed under its settings")
        form.addRow("Temperature", self.temperature)
        form.addRow("Max tokens", self.max_tokens)
        form.addRow(self.chat)
        form.addRow(self.sampling_note)
        return box

    def _build_panes(self) -> QHBoxLayout:
        panes = QHBoxLayout()
        self.panes = {
            "target": RacePane(TITLES["target"], "every token costs a full target pass"),
            "speculative": RacePane(TITLES["speculative"], "draft proposes, target verifies"),
        }
        for s in SIDES:
            self.panes[s].setMinimumHeight(PANE_MIN_HEIGHT)
            panes.addWidget(self.panes[s], 1)
        return panes

    def _build_replay_row(self) -> QHBoxLayout:
        replay_row = QHBoxLayout()
        self.replay_btn = QPushButton("▶ Replay side by side")
        self.replay_btn.setToolTip("Play both runs again at the same time, from their recorded token timestamps")
        self.replay_speed = QComboBox()
        for label, v in REPLAY_SPEEDS:
            self.replay_speed.addItem(label, v)
        self.replay_speed.setCurrentIndex(1)
        self.replay_label = QLabel("")
        replay_row.addWidget(self.replay_btn)
        replay_row.addWidget(QLabel("Speed"))
        replay_row.addWidget(self.replay_speed)
        replay_row.addWidget(self.replay_label, 1)
        return replay_row

    def _build_headline(self) -> QVBoxLayout:
        """The big speedup, its definition and reason, and the speed bars."""
        big = QVBoxLayout()
        self.speedup_label = WrappingLabel("–")
        self.speedup_label.setObjectName("speedup")
        f = self.speedup_label.font()
        f.setPointSizeF(f.pointSizeF() * 2.2)
        f.setBold(True)
        self.speedup_label.setFont(f)
        self.speedup_label.setWordWrap(True)  # "1.38× slower (wall clock)" wraps rather than being cut
        self.speedup_detail = WrappingLabel(SPEEDUP_DEFINITION)
        self.speedup_detail.setObjectName("paneSubtitle")
        self.speedup_detail.setWordWrap(True)
        self.speedup_hint = WrappingLabel("")
        self.speedup_hint.setWordWrap(True)
        self.bars = SpeedBars(TITLES)
        for w in (self.speedup_label, self.speedup_detail, self.speedup_hint, self.bars):
            big.addWidget(w)
        return big

    def _build_metrics(self) -> QGridLayout:
        """Decode speed, first token, acceptance... for each side."""
        grid = QGridLayout()
        grid.setHorizontalSpacing(16)
        grid.setVerticalSpacing(3)
        self.metric_rows = list(METRIC_ROWS)
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
                lab.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                lab.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
                grid.addWidget(lab, r, c)
                self.metric_labels[(key, s)] = lab
        grid.setRowStretch(len(self.metric_rows) + 1, 1)  # rows stay together at the top of a taller box
        return grid

    def _build_result(self) -> QGroupBox:
        res = QGroupBox("Result")
        rl = self.result_row = QHBoxLayout(res)
        rl.setSpacing(18)
        # Each part in a widget of its own: stacked, nested layouts under-counted the wrapped
        # lines of the headline's labels and the metrics were drawn over the speed bars.
        headline, metrics = QWidget(), QWidget()
        headline.setLayout(self._build_headline())
        metrics.setLayout(self._build_metrics())
        for part in (headline, metrics):
            part.layout().setContentsMargins(0, 0, 0, 0)
            rl.addWidget(part, 3)
        self.identical_label = WrappingLabel("")
        self.identical_label.setWordWrap(True)
        self.identical_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.identical_label.setMinimumWidth(180)
        self.identical_label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        rl.addWidget(self.identical_label, 3)
        # Stacked in a narrow window; the headline needs room for "1.38× slower" on one line.
        self.result_parts = [lambda: HEADLINE_MIN_WIDTH, metrics, self.identical_label]
        return res
