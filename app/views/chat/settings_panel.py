"""The settings drawer's contents: the generation settings (lookahead, temperature, max tokens,
the system prompt, and folded under them the advanced sampling: advanced_sampling.py) above
the live charts, and the chat's Tools switch (tools_box.py); the request they make for the
next answer, and the dict each chat, the presets and the main window keep (the tools only
the chat: a preset or a new chat never turns a server on)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QGroupBox, QHBoxLayout, QInputDialog, QPlainTextEdit, QSpinBox,
    QToolButton, QVBoxLayout, QWidget,
)

from ...presets import load_presets, save_preset
from ...sampling_fields import DEFAULTS, number
from ...widgets.charts.charts import LiveCharts
from ...widgets.controls.lookahead_control import LookaheadControl
from .advanced_sampling import AdvancedSampling
from .tools_box import ToolsBox


class SettingsPanel(QWidget):
    """Lookahead, sampling, limits and the system prompt, then the live charts.

    The drafter control is the model bar's Draft box (one control for it), given here so that
    the panel's dict holds every setting; the page wires the changes (a live lookahead, the
    token meter) to whoever follows them."""

    notice = Signal(str)  # "Preset saved", or why not
    edited = Signal()  # a generation setting changed (the lookahead, sampling, limits): the open chat keeps it
    attention = Signal(QWidget)  # this must be seen (the line saying why a setting cannot be used): open the drawer

    def __init__(self, drafter: QComboBox, parent: QWidget | None = None):
        super().__init__(parent)
        rl = QVBoxLayout(self)
        box = QGroupBox("Generation")
        form = QFormLayout(box)
        self.drafter = drafter
        self.lookahead = LookaheadControl(value="auto")
        self.temperature = QDoubleSpinBox()
        self.temperature.setRange(0.0, 2.0)
        self.temperature.setSingleStep(0.1)
        self.temperature.setToolTip("How freely the answer is sampled; 0 = greedy, and speculative output is then "
                                    "identical to the target's own")
        self.max_tokens = QSpinBox()
        self.max_tokens.setRange(1, 32768)
        self.max_tokens.setValue(DEFAULTS["max_tokens"])
        self.max_tokens.setToolTip("The answer stops after this many tokens at most")
        self.system = QPlainTextEdit()
        self.system.setPlaceholderText("System prompt (optional)")
        self.system.setMaximumHeight(70)
        self.advanced = AdvancedSampling()
        a = self.advanced
        self.top_k, self.top_p, self.min_p, self.repeat_penalty, self.seed, self.stop = (
            a.top_k, a.top_p, a.min_p, a.repeat_penalty, a.seed, a.stop)
        form.addRow(self._build_presets())  # the whole row: a label column would widen the drawer
        form.addRow(self.lookahead)
        for label, w in (("Temperature", self.temperature), ("Max tokens", self.max_tokens), ("System", self.system)):
            form.addRow(label, w)
        form.addRow(self.advanced)
        rl.addWidget(box)
        self.tools = ToolsBox()
        self.tools.edited.connect(self.edited)
        rl.addWidget(self.tools)
        self.lookahead.changed.connect(lambda _v: self.edited.emit())
        for spin in (self.temperature, self.max_tokens):
            spin.valueChanged.connect(lambda _v: self.edited.emit())
        self.temperature.valueChanged.connect(lambda t: self.advanced.set_greedy(t <= 0.0))
        self.advanced.set_greedy(self.temperature.value() <= 0.0)
        self.advanced.edited.connect(self.edited)
        self.advanced.reset.connect(self.reset_sampling)
        self.charts_toggle = QCheckBox("Live charts")
        self.charts_toggle.setChecked(True)
        self.charts_toggle.setToolTip("Hidden charts cost no drawing time while an answer streams")
        self.charts_toggle.toggled.connect(self.set_charts_visible)
        self.charts = LiveCharts()
        rl.addWidget(self.charts_toggle)
        rl.addWidget(self.charts, 1)

    def _build_presets(self) -> QWidget:
        """A preset box (choosing one sets the sampling, max tokens and the system prompt) and
        Save… (the current ones under a name)."""
        row = QWidget()
        lay = QHBoxLayout(row)
        lay.setContentsMargins(0, 0, 0, 0)
        self.preset = QComboBox()
        # narrow: the drawer's width is the lookahead row's, a long preset name shows whole in the popup
        self.preset.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.preset.setMinimumContentsLength(8)
        self.preset.setToolTip("Sets the sampling, max tokens and the system prompt; drafting stays as it is")
        self.preset.activated.connect(lambda i: self.use_preset(self.preset.itemText(i)) if i > 0 else None)
        self.save_preset_btn = QToolButton()
        self.save_preset_btn.setText("Save…")
        self.save_preset_btn.setToolTip("Keep these settings and system prompt as a named preset")
        self.save_preset_btn.clicked.connect(lambda _=False: self.save_as_preset())
        lay.addWidget(self.preset, 1)
        lay.addWidget(self.save_preset_btn)
        self._list_presets()
        return row

    def _list_presets(self) -> None:
        self.preset.clear()
        self.preset.addItem("Preset…")
        self.preset.addItems(sorted(load_presets()))

    def use_preset(self, name: str) -> None:
        chosen = load_presets().get(name)
        if chosen is None:
            return
        self.apply({**self.values(), **DEFAULTS, **chosen})  # a preset from before a setting existed: its default
        self.preset.setCurrentIndex(0)  # a choice, not a mode: the controls are what counts from here
        self.notice.emit(f"Preset “{name}” applied")

    def save_as_preset(self, name: str | None = None) -> None:
        if name is None:
            name, ok = QInputDialog.getText(self, "Save preset", "Name of the preset:")
            if not ok:
                return
        name = name.strip()
        if not name:
            return
        problem = self.problem()
        if problem is not None:
            self.notice.emit(f"Preset not saved: {problem}")
            self.show_problem()
            return
        try:
            save_preset(name, self.values(tools=False))
        except OSError as e:
            self.notice.emit(f"Preset not saved: {e.strerror or e}")
            return
        self._list_presets()
        self.notice.emit(f"Preset “{name}” saved")

    def system_prompt(self) -> str:
        return self.system.toPlainText()

    def problem(self) -> str | None:
        """Why no request can be made from these settings (a seed or stop string that cannot be
        used), in one line; None when one can."""
        return self.advanced.problem()

    def show_problem(self) -> None:
        """Unfold the advanced settings, where the line saying what is wrong shows, and ask for
        the drawer to show it."""
        self.advanced.show_problem()
        self.attention.emit(self.advanced.problem_label)

    def request(self, prompt: Any, *, chat: bool, draft: Any) -> Any:
        """The one engine.GenerationRequest for an answer, from these settings (`problem()`
        first: a TandemError otherwise); its lookahead is a live handle the slider and the Auto
        switch change mid-answer."""
        from engine import GenerationRequest, LiveLookahead

        return GenerationRequest.from_options(
            prompt, draft_model=draft, lookahead=LiveLookahead(self.lookahead.value()),
            max_tokens=self.max_tokens.value(), temperature=self.temperature.value(),
            chat=chat, system=self.system_prompt() or None, tag="chat", **self.advanced.request_options(),
        )

    def values(self, *, tools: bool = True) -> dict[str, Any]:
        """The settings as each chat, a preset and the main window keep them (as JSON); `tools`:
        with the chat's Tools choice (the chat's own; left out while it has none)."""
        chosen = self.tools.values() if tools else None
        return {**({"tools": chosen} if chosen else {}),
            "drafter": self.drafter.currentData(), "lookahead": self.lookahead.value(),
            "temperature": round(self.temperature.value(), 2), **self.advanced.values(),
            "max_tokens": self.max_tokens.value(), "system": self.system.toPlainText(),
        }

    def apply(self, s: dict[str, Any]) -> None:
        """Stored settings back in the controls; what is missing or unreadable takes its default."""
        i = self.drafter.findData(s.get("drafter", "model"))
        if i >= 0:
            self.drafter.setCurrentIndex(i)
        la = s.get("lookahead", "auto")
        self.lookahead.set_value(la if la == "auto" else int(la))
        self.temperature.setValue(number(s, "temperature"))
        self.advanced.apply(s)
        self.max_tokens.setValue(number(s, "max_tokens", int))
        self.system.setPlainText(str(s.get("system", "")))
        self.tools.apply(s.get("tools"))

    def reset_sampling(self) -> None:
        """Reset: temperature, max tokens and the advanced settings to their defaults (each
        "off"); drafting and the system prompt stay."""
        self.apply({**self.values(), **DEFAULTS})
        self.notice.emit("Sampling settings back to their defaults")

    def set_charts_visible(self, on: bool) -> None:
        """Show or hide the live charts (the checkbox, or the GUI benchmark)."""
        if self.charts_toggle.isChecked() != on:
            self.charts_toggle.setChecked(on)  # comes back here through `toggled`
            return
        self.charts.setVisible(on)
