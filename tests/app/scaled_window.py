"""Run as a child process (the scale factor is fixed when Qt starts): the main window with a
finished race, every page at one size, checked with tests/layout_checks.py; prints the
problems found as JSON. QT_SCALE_FACTOR=1.5 in its environment gives the 1.5x display.

    python tests/app/scaled_window.py MODEL.gguf WIDTH HEIGHT OUT_DIR [light|dark]

WIDTH x HEIGHT are the screen's pixels: at 1.5x a 1360x860 window lays out 907x573.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent)]
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def main(model: Path, width: int, height: int, out: Path, theme: str = "light") -> list[str]:
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication, QMessageBox

    from app.history import History
    from app.main_window import PAGES, MainWindow
    from layout_checks import page_problems

    app = QApplication.instance() or QApplication([])
    QMessageBox.warning = lambda *a, **k: QMessageBox.StandardButton.Ok  # type: ignore[method-assign]
    w = MainWindow(history=History(out / "h.db"), settings=QSettings(str(out / "s.ini"), QSettings.Format.IniFormat),
                   autoload=False)
    w.set_theme(theme)
    w.show()
    w.session.load(model, model, label="tiny target + tiny target as its own draft, a long pair title")
    _wait(app, lambda: w.session.engine is not None)
    race = w.views["Race"]
    race.drafter.setCurrentIndex(race.drafter.findData("lookup"))
    race.max_tokens.setValue(16)
    race.prompt.setPlainText("the value of the value of")
    race.start()
    _wait(app, lambda: race.result is not None and race.worker is None)
    race.stop_replay()
    ratio = w.devicePixelRatioF()
    w.resize(round(width / ratio), round(height / ratio))
    found: list[str] = []
    for page, name in enumerate(PAGES):
        w.nav.setCurrentRow(page)
        _settle(app)
        w.grab().save(str(out / f"{name.lower()}-{width}x{height}-{theme}.png"))
        found += [f"{name}: {p}" for p in page_problems(w, name)]
    w.close()
    return found


def _settle(app, rounds: int = 6) -> None:
    """Let layouts that depend on other layouts (wrapped labels, reflowing rows) finish."""
    from PySide6.QtCore import QCoreApplication, QEvent

    for _ in range(rounds):
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        app.processEvents()


def _wait(app, ready, timeout_s: float = 60.0) -> None:
    import time

    end = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > end:
            raise SystemExit("timed out waiting for the window")
        app.processEvents()
        time.sleep(0.01)


if __name__ == "__main__":
    args = sys.argv[1:]
    print(json.dumps(main(Path(args[0]), int(args[1]), int(args[2]), Path(args[3]), *args[4:5])))
