"""Text that changes while a model computes must not re-lay out the window: LiveLabel and
pinned labels repaint themselves alone (pytest-qt, offscreen)."""

from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import QEvent, QObject  # noqa: E402
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget  # noqa: E402

from app.widgets.controls.live_label import LiveLabel, pin_size  # noqa: E402


class LayoutRequests(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def eventFilter(self, _obj, ev) -> bool:  # noqa: N802
        if ev.type() == QEvent.Type.LayoutRequest:
            self.n += 1
        return False


def _panel(qtbot, child: QWidget) -> tuple[QWidget, LayoutRequests]:
    panel = QWidget()
    lay = QVBoxLayout(panel)
    lay.addWidget(child)
    lay.addStretch(1)
    qtbot.addWidget(panel)
    panel.resize(400, 200)
    panel.show()
    qtbot.waitExposed(panel)
    qtbot.wait(20)
    spy = LayoutRequests()
    panel.installEventFilter(spy)
    return panel, spy


def test_live_label_repaints_alone_until_its_text_needs_another_line(qtbot):
    label = LiveLabel("Generating… 10 tokens · 20.1 tok/s")
    panel, spy = _panel(qtbot, label)
    for i in range(30):
        label.setText(f"Generating… {i * 7} tokens · {20 + i / 10:.1f} tok/s")
        qtbot.wait(5)
    assert spy.n == 0 and label.text() == "Generating… 203 tokens · 22.9 tok/s"
    h = label.height()
    label.setText("a long final summary of the answer, " * 12)  # wraps onto more lines: a relayout
    qtbot.waitUntil(lambda: label.height() > h, timeout=60000)
    assert spy.n >= 1 and panel.width() == 400  # it wrapped instead of widening the panel
    label.clear()
    assert label.text() == ""


def test_pinned_label_repaints_alone_and_a_plain_one_relayouts(qtbot):
    plain = QLabel("0.0 tok/s")
    plain_panel, spy_plain = _panel(qtbot, plain)  # noqa: F841 (kept alive: it owns the label)
    pinned = QLabel("0.0 tok/s")
    pin_size(pinned, 120)
    pinned_panel, spy_pinned = _panel(qtbot, pinned)  # noqa: F841
    for i in range(10):
        plain.setText(f"{i * 11.1:.1f} tok/s")
        pinned.setText(f"{i * 11.1:.1f} tok/s")
        qtbot.wait(5)
    assert spy_plain.n > 0, "the comparison: a plain QLabel asks its layout for room on every text"
    assert spy_pinned.n == 0 and pinned.width() == 120


def test_a_stats_line_wraps_between_its_pieces_never_inside_one(qtbot):
    """At 1024 px the chat's stats line broke as '... 3.65' / 'tokens/step'."""
    from PySide6.QtCore import QRect

    from app.widgets.controls.live_label import _FLAGS, LiveLabel, whole_pieces

    line = "95 tokens in 11.19 s · 11.5 tok/s decode · first token 3.23 s · acceptance 68% (71/104) · 3.65 tokens/step"
    pieces = whole_pieces(line).split(" · ")
    assert [p.replace("\u00a0", " ") for p in pieces] == line.split(" · ") and all(" " not in p for p in pieces)
    label = LiveLabel(line)
    qtbot.addWidget(label)
    fm = label.fontMetrics()
    for width in range(fm.horizontalAdvance("acceptance 68% (71/104)") + 4, fm.horizontalAdvance(line), 7):
        # every line of the wrapped text is a run of whole pieces
        shown = whole_pieces(line)
        height = fm.boundingRect(QRect(0, 0, width, 1 << 20), _FLAGS, shown).height()
        assert height == label.heightForWidth(width) - label.contentsMargins().top() - label.contentsMargins().bottom()
        assert height <= fm.lineSpacing() * len(pieces) + fm.leading()
