"""Small screens and scaled displays: at 1.5x scale (a 1360x860 window lays out 907x573)
every page passes tests/layout_checks.py (the race's verdict and the Models Fit column in
sight); a narrow window drops the Models table's lesser columns (again after being wide) and
stacks the race's panes, without drawing one over the other, below its verdict; Cancel keeps
its place when a download starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("PySide6")


def test_every_page_fits_a_1360x860_window_at_one_and_a_half_scale(tiny_target, tmp_path):
    """A child process (the scale is fixed when Qt starts) races, then checks every page."""
    child = Path(__file__).with_name("scaled_window.py")
    from offscreen_screen import platform, screen_config

    # a 1920x1080 screen at 1.5x (1280x720 to the app), which holds the 907x573 window
    env = {**os.environ, "QT_SCALE_FACTOR": "1.5", "QT_QPA_PLATFORM": platform(screen_config(tmp_path, 1920, 1080))}
    out = subprocess.run([sys.executable, str(child), str(tiny_target), "1360", "860", str(tmp_path)],
                         capture_output=True, text=True, env=env, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
    assert (tmp_path / "race-1360x860-light.png").exists()


def _settle(ready) -> None:
    """Deliver the resize and the layouts it sets off, as the first paint after it would show
    them: no waiting for timers, which may lay the page out again and hide what a person saw."""
    from PySide6.QtCore import QCoreApplication, QDeadlineTimer, QEvent
    from PySide6.QtWidgets import QApplication

    deadline = QDeadlineTimer(30000)
    while not ready():
        assert not deadline.hasExpired(), "the resize never arrived"
        QApplication.processEvents()
    for _ in range(4):
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        QApplication.processEvents()


@pytest.fixture
def window(qtbot, tmp_path):
    from PySide6.QtCore import QSettings

    from app.history import History
    from app.main_window import MainWindow

    w = MainWindow(history=History(tmp_path / "h.db"), settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat),
                   autoload=False)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.close()


def test_a_narrow_models_table_drops_lesser_columns_but_keeps_fit(qtbot, window):
    """Narrowed with the page in view, too: the table once measured the width it had before
    the resize and kept every column, squeezed."""
    from layout_checks import page_problems

    w = window
    w.nav.setCurrentRow(2)
    pairs = w.views["Models"].pairs
    table, cols = pairs.table, pairs.table.model().COLUMNS

    def dropped() -> list[str]:
        return [cols[c] for c in range(len(cols)) if table.isColumnHidden(c)]

    for size in ((800, 600), (1360, 860), (800, 600), (1024, 700)):
        w.resize(*size)
        _settle(lambda: table.viewport().width() < 700 if size[0] == 800 else table.viewport().width() > 800)
        if size == (1360, 860):
            assert dropped() == [], "a wide window shows every column"
        elif size == (800, 600):
            assert "Tags" in dropped() and "Fits this machine" not in dropped(), (size, dropped())
        shown = [c for c in range(len(cols)) if not table.isColumnHidden(c)]
        assert sum(table.columnWidth(c) for c in shown) <= table.viewport().width() + 1, f"squeezed at {size}"
        assert page_problems(w, "Models") == [], size
    assert "tags code" in pairs.details.text()  # what a dropped column said is in the details line


def test_a_narrow_race_stacks_its_panes_below_the_verdict_without_overlap(qtbot, window):
    """At 800x600 the panes lie one above the other, below the verdict, neither drawn over
    the other (the page was given less height than its wrapped rows take); wide, side by side."""
    from PySide6.QtCore import QPoint

    from layout_checks import overlapping

    w = window
    w.nav.setCurrentRow(1)
    race = w.views["Race"]
    target, spec = race.panes["target"], race.panes["speculative"]

    def y(c) -> int:
        return c.mapTo(race, QPoint(0, 0)).y()

    for _ in range(2):  # narrowed from the wide first window, then again after widening
        w.resize(800, 600)
        qtbot.waitUntil(lambda: y(spec) > y(target))  # one above the other
        qtbot.wait(20)
        assert y(spec) >= y(target) + target.height(), "the panes overlap"
        assert y(race.speedup_label) + race.speedup_label.height() <= y(target), "the verdict sits above the panes"
        assert overlapping(w) == []
        w.resize(1360, 860)
        qtbot.waitUntil(lambda: y(spec) == y(target))  # side by side again
        assert overlapping(w) == []


def test_the_bench_results_keep_their_rows_and_come_back_beside_the_settings(qtbot, window):
    """Stacked under the settings at 800 px, the table keeps room for its rows (the page
    scrolls); widened again, results sit beside the settings (they once stayed stacked)."""
    from layout_checks import page_problems

    w = window
    w.nav.setCurrentRow(3)
    bench = w.views["Bench"]
    for size, stacked in (((800, 600), True), ((1360, 860), False), ((800, 600), True), ((1024, 700), False)):
        w.resize(*size)
        _settle(lambda: bench._reflow.stacked is stacked)
        assert page_problems(w, "Bench") == [], size


def test_a_wrapped_label_gives_back_the_height_it_claimed_when_narrow(qtbot):
    """The race's verdict lines claim the height of their wrapped lines; widened again they
    kept a narrow width's three lines for one (gaps between the verdict's rows at 1.5x)."""
    from PySide6.QtWidgets import QVBoxLayout, QWidget

    from app.widgets.controls.reflow import WrappingLabel

    host = QWidget()
    qtbot.addWidget(host)
    QVBoxLayout(host).addWidget(label := WrappingLabel("wall-clock 9.86 s vs 9.30 s (1.06x); decode 13.3 vs 14.2 tok/s (1.07x)"))
    host.layout().addStretch(1)
    host.show()
    one_line = label.fontMetrics().lineSpacing() + 4
    for width, lines in ((700, 1), (200, 3), (700, 1)):
        host.resize(width, 400)
        qtbot.waitUntil(lambda: (label.height() <= one_line) == (lines == 1))
        assert (label.minimumHeight() <= one_line) == (lines == 1), (width, label.minimumHeight())


def _row(mode: str, lookahead):
    from engine.measure.bench import Row

    return Row(suite="chat", config=f"{mode} {lookahead}", mode=mode, lookahead=lookahead, runs=1, tok_s_median=10.0,
               tok_s_min=10.0, tok_s_max=10.0, speedup_median=1.0, speedup_min=1.0, speedup_max=1.0,
               wall_speedup_median=1.0, wall_speedup_min=1.0, wall_speedup_max=1.0, ttft_median=0.1, acceptance_median=0.5,
               tokens_per_step_median=1.5, alpha=0.5, predicted_speedup=1.0, identical=1, compared=1, bugs=0)


def test_a_short_window_scrolls_to_the_bench_results_when_they_arrive(qtbot, window):
    from PySide6.QtCore import QPoint, QRect

    from engine.measure.bench import BenchResult

    w = window
    w.nav.setCurrentRow(3)
    bench = w.views["Bench"]
    w.resize(800, 600)
    _settle(lambda: bench._reflow.stacked)
    view = w.stack.currentWidget().viewport()

    def table_in_sight() -> bool:
        top = QRect(bench.table.mapTo(view, QPoint(0, 0)), bench.table.size())
        return view.rect().contains(QRect(top.topLeft(), QPoint(top.right(), top.top() + 80)))

    assert not table_in_sight(), "below the settings, out of sight before a run"
    bench.show_result(BenchResult(runs=[], rows=[_row("target", 0), _row("fixed", 1), _row("fixed", 2)],
                                  meta={"seconds": 1.0}, cost={}))
    qtbot.waitUntil(table_in_sight)


def test_cancel_stays_under_the_pointer_when_the_download_bar_appears(qtbot, window):
    w = window
    w.nav.setCurrentRow(2)
    pairs = w.views["Models"].pairs
    for size in ((800, 600), (1360, 860)):
        w.resize(*size)  # laid out before measuring: 20 ms was not enough on a loaded machine (moved 63 px after)
        _settle(lambda: (w.width(), w.height()) == size)
        before = pairs.cancel_btn.geometry()
        pairs.progress.setVisible(True)  # as when a download starts (app/views/models/pairs.py _download_changed)
        _settle(lambda: True)
        assert pairs.cancel_btn.geometry() == before, size
        pairs.progress.setVisible(False)
        _settle(lambda: True)
        assert pairs.cancel_btn.geometry() == before, size
