"""Guards against Qt binding bugs that would crash the app after a while."""

from __future__ import annotations

import gc
import sys

import pytest

pytest.importorskip("PySide6")


def test_slot_with_bool_argument_that_emits_keeps_refcounts(qtbot):
    """PySide6 6.12.0 decremented True's refcount each time a slot called with a bool
    emitted another signal: the lookahead Auto box does exactly that, and the interpreter
    aborted at exit ('deallocating True or False')."""
    from PySide6.QtCore import Signal
    from PySide6.QtWidgets import QCheckBox, QWidget

    class W(QWidget):
        changed = Signal(object)

        def relay(self, *_):
            self.changed.emit("auto")

    w = W()
    box = QCheckBox()
    qtbot.addWidget(w)
    qtbot.addWidget(box)
    box.toggled.connect(w.relay)
    gc.collect()
    before = sys.getrefcount(True), sys.getrefcount(False)
    for _ in range(200):
        box.setChecked(not box.isChecked())
    gc.collect()
    after = sys.getrefcount(True), sys.getrefcount(False)
    assert after[0] >= before[0] - 2 and after[1] >= before[1] - 2, (before, after)
