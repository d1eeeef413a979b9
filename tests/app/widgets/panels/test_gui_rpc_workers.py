"""The Workers list: add/remove host:port, devices, free memory and round trip per worker."""

from __future__ import annotations

import socket
import threading
import time

import pytest

pytest.importorskip("PySide6")

from app.widgets.panels.rpc_workers import RpcWorkersWidget  # noqa: E402
from engine.llamacpp import rpc_backend as rpc  # noqa: E402

pytestmark = pytest.mark.gui


def fake_probe(ep: str) -> rpc.WorkerInfo:
    if ep.endswith(":1"):
        raise rpc.RpcError(f"RPC worker {ep}: connection refused (is `tandem worker --port 1` running there?)")
    return rpc.WorkerInfo(ep, (7, 0, 0), [rpc.RemoteDevice(0, 3 * 10**9, 8 * 10**9), rpc.RemoteDevice(1, 10**9, 8 * 10**9)], 0.42)


def cell(w: RpcWorkersWidget, row: int, col: int) -> str:
    return w.table.item(row, col).text()


def test_add_shows_devices_memory_round_trip_and_errors(qtbot):
    w = RpcWorkersWidget(prober=fake_probe)
    qtbot.addWidget(w)
    changed = []
    w.changed.connect(changed.append)
    with qtbot.waitSignal(w.probed, timeout=60000):
        w.entry.setText("10.0.0.5:50052")
        w.add_button.click()
    assert w.endpoints() == ["10.0.0.5:50052"] and w.entry.text() == ""
    assert [cell(w, 0, c) for c in range(5)] == ["10.0.0.5:50052", "ready (RPC 7.0.0)", "2", "3.0 of 8.0 GB + 1.0 of 8.0 GB", "0.42 ms"]
    assert w.workers_free() == [("10.0.0.5:50052", 4 * 10**9)]
    with qtbot.waitSignal(w.probed, timeout=60000):
        w.add("10.0.0.6:1")
    assert cell(w, 1, 1) == "unreachable" and "connection refused" in w.message.text()
    assert w.workers_free() == [("10.0.0.5:50052", 4 * 10**9)]  # only reachable workers count
    assert not w.add("10.0.0.5:50052") and "already" in w.message.text()
    assert not w.add("nonsense") and "HOST:PORT" in w.message.text()
    w.table.selectRow(0)
    w.remove_button.click()
    assert w.endpoints() == ["10.0.0.6:1"]
    assert changed == [["10.0.0.5:50052"], ["10.0.0.5:50052", "10.0.0.6:1"], ["10.0.0.6:1"]]


def test_a_silent_worker_costs_a_timeout_not_a_frozen_window(qtbot):
    """A listener that never answers: the probe runs on the pool, the GUI keeps painting."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    try:
        w = RpcWorkersWidget(prober=lambda ep: rpc.probe(ep, timeout=1.0))
        qtbot.addWidget(w)
        t0 = time.monotonic()
        w.add(f"127.0.0.1:{port}")
        assert time.monotonic() - t0 < 0.5  # add() returned before the probe finished
        assert cell(w, 0, 1) == "checking…"
        qtbot.waitUntil(lambda: cell(w, 0, 1) == "unreachable", timeout=60000)
        assert "no answer within 1 s" in w.message.text()
    finally:
        srv.close()


# -- mounted in the app: the status-bar button, the dialog, a lost worker -----------------------
@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QMessageBox

    from app.history import History
    from app.main_window import MainWindow

    errors: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning", lambda *a, **k: errors.append(a[2]) or QMessageBox.StandardButton.Ok)
    w = MainWindow(history=History(tmp_path / "h.db"), settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat),
                   autoload=False)
    w.errors = errors  # type: ignore[attr-defined]
    qtbot.addWidget(w)
    yield w
    w.close()


def test_status_button_opens_the_dialog_that_chooses_the_workers(qtbot, window):
    from PySide6.QtCore import Qt

    from app.widgets.panels.rpc_dialog import WorkersDialog

    status = window.rpc_status
    assert status.button.text() == "RPC: off" and not status.reload_button.isVisibleTo(window)
    qtbot.mouseClick(status.button, Qt.MouseButton.LeftButton)
    dlg = status.dialog
    assert isinstance(dlg, WorkersDialog) and dlg.isVisible()
    dlg.workers._prober = fake_probe
    qtbot.mouseClick(dlg.use_button, Qt.MouseButton.LeftButton)
    assert window.session.rpc_endpoints == () and "at least one worker" in dlg.state.text()
    with qtbot.waitSignal(dlg.workers.probed, timeout=60000):
        qtbot.keyClicks(dlg.workers.entry, "10.0.0.5:50052")
        qtbot.keyClick(dlg.workers.entry, Qt.Key.Key_Return)
    qtbot.mouseClick(dlg.use_button, Qt.MouseButton.LeftButton)
    assert window.session.rpc_endpoints == ("10.0.0.5:50052",)
    assert status.button.text() == "RPC: 1 worker" and "10.0.0.5:50052" in dlg.state.text()
    qtbot.mouseClick(dlg.local_button, Qt.MouseButton.LeftButton)
    assert window.session.rpc_endpoints == () and status.button.text() == "RPC: off"
    # the list is remembered for the next start, the choice to use it is not
    from app.widgets.panels.rpc_dialog import RpcStatus

    again = RpcStatus(window)
    again.open_dialog().workers.wait_idle()
    assert again.dialog.workers.endpoints() == ["10.0.0.5:50052"] and window.session.rpc_endpoints == ()
    again.dialog.close()


def test_app_rpc_option_is_checked_like_the_cli():
    import subprocess
    import sys

    from test_rpc import ROOT, _env

    r = subprocess.run([sys.executable, "-m", "app", "--rpc", "nohost", "--no-autoload"], capture_output=True, text=True,
                       env={**_env(), "QT_QPA_PLATFORM": "offscreen"}, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and "expected HOST:PORT" in r.stderr and "Traceback" not in r.stderr


def test_a_worker_lost_mid_answer_keeps_the_app_and_the_answer_and_offers_a_local_reload(qtbot, window, tmp_path, vocab):
    """Through the window as a user sees it: the answer streamed so far stays in the
    history, one clear error names the worker, "Reload locally" loads the pair here."""
    from PySide6.QtCore import Qt

    from engine import Engine
    from engine.serving.remote_engine import RemoteEngine
    from engine.models.tinymodel import write_model
    from test_rpc import Worker, needs_rpc

    if needs_rpc.args[0]:
        pytest.skip(needs_rpc.kwargs["reason"])
    ids = [vocab.id(f"▁{w}") for w in ("the", "value", "of", "data")]
    loop = write_model(tmp_path / "loop.gguf", n_layer=5, vocab=vocab, name="loop",
                       chain={a: b for a, b in zip(ids, ids[1:] + ids[:1])})
    a = Worker()
    try:
        s = window.session
        s.rpc_endpoints = (a.endpoint,)
        s.load(loop, None, label="loop over RPC")
        qtbot.waitUntil(lambda: s.engine is not None and not s.busy, timeout=60000)  # Send refuses while loading
        assert isinstance(s.engine, RemoteEngine) and a.endpoint in window.pair_label.text()
        chat = window.chat
        chat.apply_settings({"drafter": "none", "temperature": 0.0, "max_tokens": 1900})
        streamed: list = []
        chat.prompt.setPlainText("the")
        chat.send()
        chat.worker.tokens.connect(streamed.extend)
        qtbot.waitUntil(lambda: len(streamed) >= 10, timeout=30000)
        a.kill()
        qtbot.waitUntil(lambda: chat.worker is None, timeout=30000)
        qtbot.waitUntil(lambda: s.engine is None, timeout=60000)
        assert len(window.errors) == 1 and window.errors[0].startswith(f"RPC worker {a.endpoint} was lost mid-generation")
        answer = window.history.messages(chat.conversation_id)[-1]
        assert answer.role == "assistant" and answer.status == "failed"
        assert len(answer.content) > 0 and answer.content.startswith("".join(t.text for t in streamed[:5]))
        assert window.rpc_status.reload_button.isVisibleTo(window)
        qtbot.mouseClick(window.rpc_status.reload_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: s.engine is not None, timeout=60000)
        assert isinstance(s.engine, Engine) and s.rpc_endpoints == () and s.pair.label == "loop over RPC"
        assert not window.rpc_status.reload_button.isVisibleTo(window) and window.rpc_status.button.text() == "RPC: off"
        assert a.endpoint not in window.pair_label.text()
    finally:
        a.kill()
