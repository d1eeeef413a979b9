"""Provenance colours and the legend: which tokens the draft saved, which the target wrote."""

from __future__ import annotations

from typing import Any, Iterable

from PySide6.QtCore import Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QWidget

from ... import theme

COLOURS: dict[str, QColor] = {prov: QColor(*rgba) for prov, rgba in theme.PROVENANCE.items()}
LABELS = {
    "draft": "accepted draft",
    "target": "target correction",
    "bonus": "bonus",
    "plain": "target alone",
}


def merge_runs(runs: list[list[str]], tokens: Iterable[Any], *, coloured: bool = True) -> list[list[str]]:
    """Append TokenEvents to `runs` as [provenance, text] runs, merging neighbours of one
    provenance, so a batch is inserted with one call per colour instead of one per token.

    A character split across tokens arrives whole with its last token (the earlier ones
    carry ""), so empty pieces are skipped and nothing is ever cut mid-character."""
    for ev in tokens:
        if not ev.text:
            continue
        prov = ev.provenance if coloured else "plain"
        if runs and runs[-1][0] == prov:
            runs[-1][1] += ev.text
        else:
            runs.append([prov, ev.text])
    return runs


def swatch_css(prov: str) -> str:
    return f"background: {theme.css_rgba(theme.PROVENANCE[prov])}; border-radius: 3px; padding: 1px 6px;"


class Legend(QWidget):
    """Colour legend with a toggle to show or hide provenance colours."""

    toggled = Signal(bool)

    def __init__(self, parent: QWidget | None = None, show_toggle: bool = True):
        super().__init__(parent)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(8)
        for prov in ("draft", "bonus", "target"):
            lab = QLabel(LABELS[prov])
            lab.setStyleSheet(swatch_css(prov))
            lab.setToolTip({
                "draft": "Proposed by the draft and accepted by the target: a step the big model did not pay for",
                "bonus": "The target's own extra token after every draft token was accepted",
                "target": "The target's token where it rejected the draft",
            }[prov])
            lay.addWidget(lab)
        self.toggle = QCheckBox("Colours")
        self.toggle.setChecked(True)
        self.toggle.setToolTip("Show where each token came from")
        self.toggle.toggled.connect(self.toggled)
        if show_toggle:
            lay.addWidget(self.toggle)
        else:
            self.toggle.hide()
        lay.addStretch(1)
