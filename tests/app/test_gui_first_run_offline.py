"""The first-run banner on a machine with no network: one line saying so, and the button back."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402

from fakehub import closed_port_url, fakehub  # noqa: E402,F401  (fixture)
from test_gui_shell import _tiny_catalog, make_window  # noqa: E402,F401  (fixture)
from test_store import MIRROR_TOML  # noqa: E402


def test_banner_offline_says_no_connection_in_one_line(qtbot, make_window, fakehub, tmp_path, monkeypatch,
                                                        tiny_target):
    _tiny_catalog(fakehub, tmp_path, monkeypatch, tiny_target, mirror=MIRROR_TOML)
    monkeypatch.setenv("HF_ENDPOINT", closed_port_url())
    monkeypatch.setenv("TANDEM_PIP_ARGS", f"--index-url {closed_port_url()}/simple --retries 1 --timeout 5")
    w = make_window((1024, 700))
    banner = w.welcome
    qtbot.mouseClick(banner.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: w.session.downloads.status.ended, timeout=60000)
    text = banner.status.text()
    assert text.startswith("Download failed: ") and "no connection: neither Hugging Face" in text, text
    assert "Check the network, then download again" in text
    assert "\n" not in text and "Errno" not in text and "No matching distribution" not in text
    assert banner.button.isEnabled() and banner.cancel.isHidden()
