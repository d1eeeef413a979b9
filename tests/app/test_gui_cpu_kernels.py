"""The status bar names the CPU variant a portable llama.cpp build chose, and says nothing of
it for a build with its backends linked in (the developer venv's)."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QSettings  # noqa: E402

from app.history import History  # noqa: E402
from engine.llamacpp import ggml_devices  # noqa: E402
from engine.llamacpp.backend_dl import BackendLoad  # noqa: E402


@pytest.mark.parametrize("load, shown", [
    (BackendLoad(dynamic=True, cpu_variant="sse42", variants=("haswell", "sse42", "x64")), "CPU kernels: sse42"),
    (BackendLoad(dynamic=False), None),
])
def test_status_bar_names_the_cpu_variant(qtbot, tmp_path, monkeypatch, load, shown):
    from app.main_window import MainWindow

    monkeypatch.setattr(ggml_devices, "backends", lambda: load)
    w = MainWindow(history=History(tmp_path / "h.db"), settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat),
                   autoload=False)
    qtbot.addWidget(w)
    text = w._hw_text()
    if shown:
        assert text.endswith(f" · {shown}"), text
    else:
        assert "CPU kernels" not in text
    w.close()
