"""The draft optimiser dialog on tiny models: progress, the before/after table, cancel,
closing while it runs, and a worker error shown as one line with the window alive."""

from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from app.views.optimize_draft import OptimizeDraftDialog  # noqa: E402
from engine.measure import optimize  # noqa: E402


def _wait_idle(qtbot, dlg: OptimizeDraftDialog) -> None:
    qtbot.waitUntil(lambda: not dlg.running, timeout=120_000)


def test_dialog_runs_and_shows_the_table(qtbot, tiny_target, tiny_draft):
    dlg = OptimizeDraftDialog(tiny_target, tiny_draft, prompts=1, max_tokens=10)
    qtbot.addWidget(dlg)
    dlg.show()
    fractions: list[float] = []
    dlg.bar.valueChanged.connect(lambda v: fractions.append(v / 1000))
    with qtbot.waitSignal(dlg.optimized, timeout=120_000) as sig:
        dlg.start()
        assert not dlg.start_btn.isEnabled() and dlg.cancel_btn.isEnabled()
    res = sig.args[0]
    _wait_idle(qtbot, dlg)
    assert dlg.table.rowCount() == len(optimize.result_table(res))
    assert dlg.table.item(0, 1).text() == "F32" and dlg.table.item(0, 2).text() == "Q4_0"
    assert "Break-even" in dlg.details.text() and res.verdict in dlg.verdict.text()
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert dlg.start_btn.isEnabled() and not dlg.cancel_btn.isEnabled()


def test_cancel_and_close_while_running(qtbot, tiny_target, tiny_draft):
    dlg = OptimizeDraftDialog(tiny_target, tiny_draft, prompts=4, max_tokens=64)
    qtbot.addWidget(dlg)
    dlg.show()
    dlg.start()
    qtbot.waitUntil(lambda: dlg.bar.value() > 0, timeout=60_000)
    dlg.close()  # asks the worker to stop; the window stays until it has
    assert dlg.isVisible()
    _wait_idle(qtbot, dlg)
    qtbot.waitUntil(lambda: not dlg.isVisible(), timeout=60000)
    assert dlg.result is None and "Cancelled" in dlg.status.text()


def test_worker_error_is_one_line(qtbot, tiny_target, no_byte_fallback):
    dlg = OptimizeDraftDialog(tiny_target, no_byte_fallback, prompts=1, max_tokens=10)
    qtbot.addWidget(dlg)
    dlg.show()
    dlg.start()
    _wait_idle(qtbot, dlg)
    text = dlg.status.text()
    assert text.startswith("Failed: ") and "\n" not in text and "Traceback" not in text
    assert dlg.start_btn.isEnabled() and dlg.isVisible()
