"""The first window (a fresh profile: no saved geometry) fits the screen it opens on, centred.
A fixed 1360x860 did not fit an 800x600 screen, and sat in the corner of a 1600x1000 one
(at 1.5x scale, larger than the screen: the window manager shrank it to its minimum)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QRect, QSettings, QSize  # noqa: E402

from app.first_window import first_geometry  # noqa: E402
from offscreen_screen import platform, screen_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MIN = QSize(800, 560)


@pytest.mark.parametrize("screen, size", [
    (QRect(0, 0, 1600, 1000), QSize(1360, 850)),  # a 1600x1000 screen at 1x: the preferred width
    (QRect(0, 0, 1067, 667), QSize(906, 566)),  # the same screen at 1.5x: what fits, not the minimum
    (QRect(0, 0, 2560, 1400), QSize(1360, 860)),  # a large screen: the preferred size
    (QRect(0, 0, 853, 480), QSize(800, 480)),  # smaller than the minimum: the screen, not past it
    (QRect(0, 30, 800, 570), QSize(800, 560)),  # 800x600 less a top panel: the minimum, below the panel
])
def test_the_first_geometry_fits_its_screen_and_is_centred(screen, size):
    g = first_geometry(screen, MIN)
    assert g.size() == size
    assert screen.contains(g)
    assert abs(g.center().x() - screen.center().x()) <= 1 and abs(g.center().y() - screen.center().y()) <= 1


def _centred(window: QRect, screen: QRect) -> bool:
    return abs(window.center().x() - screen.center().x()) <= 1 and abs(window.center().y() - screen.center().y()) <= 1


def test_a_fresh_profile_opens_centred_on_a_big_screen(qtbot, tmp_path):
    from PySide6.QtGui import QGuiApplication

    from app.history import History
    from app.main_window import MainWindow

    if QGuiApplication.platformName() != "offscreen":
        pytest.skip("measured on the tests' own offscreen screen (tests/conftest.py)")
    w = MainWindow(history=History(tmp_path / "h.db"), settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat),
                   autoload=False)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitExposed(w)
    screen = w.screen().availableGeometry()
    assert screen.size() == QSize(1920, 1080), "the tests' screen (tests/offscreen_screen.json)"
    assert w.size() == QSize(1360, 860), "the preferred size where it fits"
    assert screen.contains(w.geometry()) and _centred(w.geometry(), screen), w.geometry()
    w.close()


CHILD = """
import json, sys
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication
app = QApplication([])
from app.history import History
from app.main_window import MainWindow
folder = sys.argv[1]
w = MainWindow(history=History(folder + "/h.db"), settings=QSettings(folder + "/s.ini", QSettings.Format.IniFormat),
               autoload=False)
w.show()
for _ in range(20):
    app.processEvents()
g, f, s = w.geometry(), w.frameGeometry(), w.screen().availableGeometry()
print(json.dumps({"window": [g.x(), g.y(), g.width(), g.height()], "screen": [s.x(), s.y(), s.width(), s.height()],
                  "border": g.x() - f.x()}))
w.close()
"""


@pytest.mark.parametrize("width, height, scale", [(800, 600, "1"), (1600, 1000, "1.5")])
def test_a_fresh_profile_opens_inside_a_small_screen(tmp_path, width, height, scale):
    """A child process: the screen (and the scale) are fixed when Qt starts."""
    env = {**os.environ, "QT_QPA_PLATFORM": platform(screen_config(tmp_path, width, height)), "QT_SCALE_FACTOR": scale,
           "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    window, screen = QRect(*found["window"]), QRect(*found["screen"])
    assert abs(screen.width() - width / float(scale)) <= 1 and abs(screen.height() - height / float(scale)) <= 1, found
    # An 800-px screen holds the 800-px window but not also its side borders, which the
    # offscreen platform (like a window manager) keeps on screen by moving the window over.
    b = found["border"]
    assert screen.adjusted(-b, 0, b, 0).contains(window), f"the window {found['window']} is not inside the screen {found['screen']}"
    assert abs(window.center().x() - screen.center().x()) <= 1 + b and abs(window.center().y() - screen.center().y()) <= 1, found
    assert window.width() >= min(MIN.width(), screen.width()) and window.height() >= min(MIN.height(), screen.height())
