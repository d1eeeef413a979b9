"""The app's first race is this machine's demo: an edit with prompt lookup on a CPU (where the
draft model drafts nothing worth its cost), new code with the draft model on a GPU."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from engine.measure.demo import first_demo  # noqa: E402


@pytest.mark.parametrize("gpu", [False, True])
def test_the_race_page_opens_on_the_machines_demo(qtbot, gpu):
    from app.session import Session
    from app.views.race import RaceView

    session = Session()
    view = RaceView(session, gpu=gpu)
    qtbot.addWidget(view)
    demo = first_demo(gpu)
    assert view.prompt.toPlainText() == demo.prompt
    assert view.drafter.currentData() == ("lookup" if not gpu else "model")
    session.shutdown()


def test_the_window_passes_whether_llama_cpp_sees_a_gpu(qtbot, tmp_path):
    from PySide6.QtCore import QSettings

    from app.history import History
    from app.main_window import MainWindow

    w = MainWindow(history=History(tmp_path / "h.db"), settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat),
                   autoload=False)
    qtbot.addWidget(w)
    assert w.views["Race"].prompt.toPlainText() == first_demo(bool(w.hw.gpus)).prompt
    w.close()
