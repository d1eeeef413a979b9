"""Small screens and scaled displays: at 1.5x
scale (a 1360x860 window lays out 907x573) every page passes tests/layout_checks.py (the race's
verdict and the Models Fit column in sight); Cancel keeps its place when a download starts."""

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
    env = {**os.environ, "QT_SCALE_FACTOR": "1.5", "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run([sys.executable, str(child), str(tiny_target), "1360", "860", str(tmp_path)],
                         capture_output=True, text=True, env=env, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
    assert (tmp_path / "race-1360x860-light.png").exists()


def test_cancel_stays_under_the_pointer_when_the_download_bar_appears(qtbot, tmp_path):
    from PySide6.QtCore import QSettings

    from app.history import History
    from app.main_window import MainWindow

    w = MainWindow(history=History(tmp_path / "h.db"), settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat),
                   autoload=False)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitExposed(w)
    w.nav.setCurrentRow(2)
    pairs = w.views["Models"].pairs
    for size in ((800, 600), (1360, 860)):
        w.resize(*size)
        qtbot.wait(20)
        before = pairs.cancel_btn.geometry()
        pairs.progress.setVisible(True)  # as when a download starts (app/views/models/pairs.py _download_changed)
        qtbot.wait(20)
        assert pairs.cancel_btn.geometry() == before, size
        pairs.progress.setVisible(False)
        qtbot.wait(20)
        assert pairs.cancel_btn.geometry() == before, size
    w.close()
