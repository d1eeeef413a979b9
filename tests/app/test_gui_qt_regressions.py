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


def test_a_worker_is_let_go_on_the_gui_thread_after_its_thread_has_ended(qtbot):
    """`finished` is emitted inside run(), before its thread has ended, and views drop their
    worker (and may be destroyed) on it. The worker, an object of the GUI thread, must then be
    freed there, once the thread has ended, not by the worker thread's last reference; and the
    view's end must not take the thread with it (Qt aborts: "QThread: Destroyed while thread
    is still running", as the optimiser dialog's test did about 1 run in 7)."""
    import threading
    import time
    import weakref

    from PySide6.QtWidgets import QWidget

    from app import workers

    class Slow(workers.Worker):
        def work(self) -> None:
            pass

        def run(self) -> None:
            super().run()  # emits `finished`
            time.sleep(0.3)  # the view has dropped the worker and gone by now

    class View(QWidget):
        def __init__(self) -> None:
            super().__init__()
            self.worker: Slow | None = Slow()
            self.worker.finished.connect(self.on_finished)

        def on_finished(self) -> None:
            self.worker = None
            self.deleteLater()

    freed_on: list[str] = []
    view = View()
    weakref.finalize(view.worker, lambda: freed_on.append(threading.current_thread().name))
    workers.start(view.worker)
    qtbot.waitUntil(lambda: bool(freed_on), timeout=60000)
    assert freed_on == [threading.main_thread().name]
