"""The Workers list: add/remove host:port, devices, free memory and round trip per worker."""

from __future__ import annotations

import socket
import threading
import time

import pytest

pytest.importorskip("PySide6")

from app.widgets.rpc_workers import RpcWorkersWidget  # noqa: E402
from engine import rpc  # noqa: E402

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
    with qtbot.waitSignal(w.probed, timeout=5000):
        w.entry.setText("10.0.0.5:50052")
        w.add_button.click()
    assert w.endpoints() == ["10.0.0.5:50052"] and w.entry.text() == ""
    assert [cell(w, 0, c) for c in range(5)] == ["10.0.0.5:50052", "ready (RPC 7.0.0)", "2", "3.0 of 8.0 GB + 1.0 of 8.0 GB", "0.42 ms"]
    assert w.workers_free() == [("10.0.0.5:50052", 4 * 10**9)]
    with qtbot.waitSignal(w.probed, timeout=5000):
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
        qtbot.waitUntil(lambda: cell(w, 0, 1) == "unreachable", timeout=5000)
        assert "no answer within 1 s" in w.message.text()
    finally:
        srv.close()
