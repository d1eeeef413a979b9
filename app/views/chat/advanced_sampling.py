"""The settings drawer's "Advanced sampling" section: top-k, top-p, min-p, repeat penalty, seed
and stop strings, folded away under one line so the drawer stays short, that line saying how
many are set. Each default means "off". What temperature 0 (greedy) ignores is greyed out; a
seed or a stop-string list that cannot be used is said in one line under them and kept as
typed (app/sampling_fields.py reads both)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QApplication, QDoubleSpinBox, QFormLayout, QHBoxLayout, QLineEdit, QPlainTextEdit, QSpinBox, QToolButton,
    QVBoxLayout, QWidget,
)

from ... import theme
from ...appearance import is_dark
from ...sampling_fields import DEFAULTS, FieldError, number, parse_seed, parse_stop, stop_text
from ...widgets.controls.reflow import WrappingLabel

GREEDY_NOTE = "Temperature 0 is greedy: it takes the likeliest token, so top-k, top-p, min-p and the seed do not apply."


class AdvancedSampling(QWidget):
    """The section: a toggle line with Reset beside it, then the controls when unfolded.

    `reset` is the panel's (it restores temperature and max tokens too); `edited` says a value
    changed (the open chat keeps it)."""

    edited = Signal()
    reset = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(self._build_header())
        self.body = QWidget()
        form = QFormLayout(self.body)
        form.setContentsMargins(0, 0, 0, 0)
        self.greedy_note = WrappingLabel(GREEDY_NOTE)
        self.greedy_note.setObjectName("greedyNote")
        form.addRow(self.greedy_note)
        self._build_fields(form)
        self.problem_label = WrappingLabel()
        self.problem_label.setObjectName("samplingProblem")
        self.problem_label.setTextFormat(Qt.TextFormat.PlainText)
        self.problem_label.hide()
        form.addRow(self.problem_label)
        lay.addWidget(self.body)
        self.body.hide()
        self._greedy = False
        app = QApplication.instance()
        self._dark = bool(app) and is_dark(app)  # type: ignore[arg-type]
        for spin in (self.top_k, self.top_p, self.min_p, self.repeat_penalty):
            spin.valueChanged.connect(self._changed)
        self.seed.textChanged.connect(self._changed)
        self.stop.textChanged.connect(self._changed)
        self._changed()

    def _build_header(self) -> QHBoxLayout:
        row = QHBoxLayout()
        self.toggle = QToolButton()
        self.toggle.setCheckable(True)
        self.toggle.setAutoRaise(True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.toggle.setToolTip("Top-k, top-p, min-p, repeat penalty, seed and stop strings")
        self.toggle.toggled.connect(self.set_open)
        self.reset_btn = QToolButton()
        self.reset_btn.setText("Reset")
        self.reset_btn.setAutoRaise(True)
        self.reset_btn.setToolTip("Temperature, max tokens and every advanced setting back to their defaults "
                                  "(drafting and the system prompt stay)")
        self.reset_btn.clicked.connect(lambda _=False: self.reset.emit())
        row.addWidget(self.toggle)
        row.addStretch(1)
        row.addWidget(self.reset_btn)
        return row

    def _build_fields(self, form: QFormLayout) -> None:
        self.top_k = QSpinBox()
        self.top_k.setRange(0, 1000)
        self.top_k.setSpecialValueText("off")
        self.top_k.setToolTip("Sample only among the k likeliest tokens (off = all)")
        self.top_p = QDoubleSpinBox()
        self.top_p.setRange(0.05, 1.0)
        self.top_p.setSingleStep(0.05)
        self.top_p.setValue(DEFAULTS["top_p"])
        self.top_p.setToolTip("Sample among the likeliest tokens that together hold this share of the probability "
                              "(1 = off)")
        self.min_p = QDoubleSpinBox()
        self.min_p.setRange(0.0, 0.99)
        self.min_p.setSingleStep(0.01)
        self.min_p.setSpecialValueText("off")
        self.min_p.setToolTip("Drop tokens less likely than this fraction of the likeliest one (off = keep all)")
        self.repeat_penalty = QDoubleSpinBox()
        self.repeat_penalty.setRange(1.0, 2.0)
        self.repeat_penalty.setSingleStep(0.05)
        self.repeat_penalty.setValue(DEFAULTS["repeat_penalty"])
        self.repeat_penalty.setSpecialValueText("off")
        self.repeat_penalty.setToolTip("Make tokens of the last 64 less likely, as llama.cpp does (off = 1; "
                                       "1.1 is mild); applies at temperature 0 too")
        self.seed = QLineEdit()
        self.seed.setPlaceholderText("random")
        self.seed.setMinimumHeight(self.seed.sizeHint().height())  # a red frame (a problem) must not shrink it
        self.seed.setToolTip("The same seed and settings give the same answer again (empty = a new random one "
                             "each answer)")
        self.stop = QPlainTextEdit()
        self.stop.setPlaceholderText("One per line, e.g. \\n\\n")
        self.stop.setToolTip("The answer ends where the model writes one of these (it is not shown); one per line, "
                             "\\n a new line, \\t a tab, \\\\ a backslash")
        self.stop.setTabChangesFocus(True)
        self.stop.setFixedHeight(self.stop.fontMetrics().lineSpacing() * 3 + 12)
        for label, w in (("Top-k", self.top_k), ("Top-p", self.top_p), ("Min-p", self.min_p),
                         ("Repeat penalty", self.repeat_penalty), ("Seed", self.seed), ("Stop strings", self.stop)):
            form.addRow(label, w)

    # -- state -----------------------------------------------------------------------------
    def set_open(self, on: bool) -> None:
        """Unfold or fold the section (the toggle, or a problem that must be seen)."""
        if self.toggle.isChecked() != on:
            self.toggle.setChecked(on)  # comes back here through `toggled`
            return
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if on else Qt.ArrowType.RightArrow)
        self.body.setVisible(on)

    def set_greedy(self, greedy: bool) -> None:
        """Grey out what temperature 0 ignores (the stop strings and the penalty still apply)."""
        self._greedy = greedy
        for w in (self.top_k, self.top_p, self.min_p, self.seed):
            w.setEnabled(not greedy)
        self.greedy_note.setVisible(greedy)
        self._show_problem()

    def set_dark(self, dark: bool) -> None:
        """The scheme changed: the problem line in its red."""
        self._dark = dark
        self._show_problem()

    def values(self) -> dict[str, Any]:
        """The settings to store: the seed and stop strings parsed, or as typed while they
        cannot be used (a str), so switching chats or a relaunch loses nothing."""
        seed_text, stop = self.seed.text(), self.stop.toPlainText()
        try:
            seed: Any = parse_seed(seed_text)
        except FieldError:
            seed = seed_text
        try:
            stops: Any = parse_stop(stop)
        except FieldError:
            stops = stop
        return {"top_k": self.top_k.value(), "top_p": round(self.top_p.value(), 2),
                "min_p": round(self.min_p.value(), 2), "repeat_penalty": round(self.repeat_penalty.value(), 2),
                "stop": stops, "seed": seed}

    def apply(self, s: dict[str, Any]) -> None:
        """Stored settings back in the controls; what is missing or unreadable takes its default."""
        self.top_k.setValue(number(s, "top_k", int))
        self.top_p.setValue(number(s, "top_p"))
        self.min_p.setValue(number(s, "min_p"))
        self.repeat_penalty.setValue(number(s, "repeat_penalty"))
        seed = s.get("seed", DEFAULTS["seed"])
        if seed is None or seed == -1:  # -1: how a random seed was stored before
            self.seed.setText("")
        else:
            self.seed.setText(str(seed))
        stop = s.get("stop", DEFAULTS["stop"])
        if isinstance(stop, list) and all(isinstance(x, str) for x in stop):
            self.stop.setPlainText(stop_text(stop))
        else:
            self.stop.setPlainText(stop if isinstance(stop, str) else "")

    def problem(self) -> str | None:
        """Why these settings cannot make a request, in one line; None when they can. A seed is
        not read at temperature 0 (its box is greyed out and cannot be fixed there)."""
        try:
            parse_stop(self.stop.toPlainText())
            if not self._greedy:
                parse_seed(self.seed.text())
        except FieldError as e:
            return str(e)
        return None

    def request_options(self) -> dict[str, Any]:
        """GenerationRequest.from_options's keywords for these settings (`problem()` first)."""
        from engine.decoding.sampling.logit_controls import Penalties

        v = self.values()
        penalty = v["repeat_penalty"]
        return {"top_k": v["top_k"], "top_p": v["top_p"], "min_p": v["min_p"],
                "seed": None if self._greedy else v["seed"], "stop": v["stop"],
                "penalties": Penalties(repeat=penalty) if penalty != 1.0 else None}

    def show_problem(self) -> None:
        """Unfold the section so the line saying what is wrong is seen (Send was refused)."""
        self.set_open(True)
        (self.stop if (self.problem() or "").startswith("Stop") else self.seed).setFocus()

    def _changed(self, *_: Any) -> None:
        self._show_problem()
        self._summarise()
        self.edited.emit()

    def _show_problem(self) -> None:
        """The line under the fields, and a red frame around the field it is about."""
        problem = self.problem()
        bad = theme.palette(self._dark).bad
        self.problem_label.setVisible(problem is not None)
        if problem is not None:
            self.problem_label.setStyleSheet(f"color: {bad}")
            self.problem_label.setText(problem)
        wrong = None if problem is None else self.stop if problem.startswith("Stop") else self.seed
        for field, kind in ((self.seed, "QLineEdit"), (self.stop, "QPlainTextEdit")):
            field.setStyleSheet(f"{kind} {{ border: 1px solid {bad}; border-radius: 2px; }}" if field is wrong else "")
        self._summarise()

    def _summarise(self) -> None:
        """The toggle's line: how many are set, and a mark while one cannot be used."""
        v = self.values()
        on = sum(v[k] != DEFAULTS[k] for k in ("top_k", "top_p", "min_p", "repeat_penalty", "stop", "seed"))
        text = "Advanced sampling"
        if on:
            text += f" · {on} set"
        if self.problem() is not None:
            text += " · ⚠ fix"
        self.toggle.setText(text)
