"""The "Workers" list: llama.cpp RPC workers that can hold part of the target.

Add or remove `host:port`; each row shows the worker's devices, free memory and the
measured round trip, refreshed on demand. Probing runs on a thread pool (a worker that
does not answer costs a timeout, never a frozen window) and uses `engine.llamacpp.rpc_backend.probe`,
plain sockets: the app still never touches llama_cpp here. Meant to be mounted in the
Models view; `endpoints()` is what loading a pair passes as `Engine(..., rpc=...)`.
"""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QObject, QRunnable, Qt, QThreadPool, Signal
from PySide6.QtWidgets import (
    QHBoxLayout, QHeaderView, QLabel, QLineEdit, QPushButton, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget,
)

from engine.llamacpp import rpc_backend as rpc

COLUMNS = ("Worker", "Status", "Devices", "Free memory", "Round trip")
Prober = Callable[[str], rpc.WorkerInfo]


class _Relay(QObject):
    done = Signal(str, object)  # endpoint, WorkerInfo or error text


class _ProbeTask(QRunnable):
    def __init__(self, endpoint: str, prober: Prober, relay: _Relay):
        super().__init__()
        self.endpoint, self.prober, self.relay = endpoint, prober, relay

    def run(self) -> None:
        try:
            result: object = self.prober(self.endpoint)
        except rpc.RpcError as e:
            result = str(e)
        except Exception as e:  # noqa: BLE001 - a probe failure is shown in its row, never raised
            result = f"RPC worker {self.endpoint}: {e}"
        self.relay.done.emit(self.endpoint, result)


class RpcWorkersWidget(QWidget):
    """Emits `changed(list[str])` when the list of endpoints changes, `probed(endpoint)`
    when a worker's row was refreshed."""

    changed = Signal(list)
    probed = Signal(str)

    def __init__(self, parent: QWidget | None = None, prober: Prober | None = None, endpoints: list[str] | None = None):
        super().__init__(parent)
        self._prober: Prober = prober or (lambda ep: rpc.probe(ep, timeout=3.0))
        self._pool = QThreadPool(self)
        self._relay = _Relay(self)
        self._relay.done.connect(self._on_probed)
        self._infos: dict[str, rpc.WorkerInfo] = {}

        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        self.entry = QLineEdit()
        self.entry.setPlaceholderText(f"host:port of a `tandem worker`, e.g. 127.0.0.1:{rpc.DEFAULT_PORT}")
        self.add_button = QPushButton("Add")
        self.remove_button = QPushButton("Remove")
        self.refresh_button = QPushButton("Refresh")
        for w in (self.entry, self.add_button, self.remove_button, self.refresh_button):
            row.addWidget(w, 1 if w is self.entry else 0)
        lay.addLayout(row)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        lay.addWidget(self.table)
        self.message = QLabel("The target's layers are split over these workers and this machine; the draft stays here. "
                              "RPC has no authentication: use it on a trusted network or through an SSH tunnel.")
        self.message.setWordWrap(True)
        lay.addWidget(self.message)

        self.add_button.clicked.connect(self._add_from_entry)
        self.entry.returnPressed.connect(self._add_from_entry)
        self.remove_button.clicked.connect(self._remove_selected)
        self.refresh_button.clicked.connect(self.refresh)
        for ep in endpoints or []:
            self.add(ep)

    # -- public -----------------------------------------------------------------------------
    def endpoints(self) -> list[str]:
        return [self.table.item(r, 0).text() for r in range(self.table.rowCount())]

    def info(self, endpoint: str) -> rpc.WorkerInfo | None:
        """The last successful probe of `endpoint` (None while unknown or unreachable)."""
        return self._infos.get(endpoint)

    def workers_free(self) -> list[tuple[str, int]]:
        """(endpoint, free bytes) of the reachable workers: for the fit verdict."""
        return [(ep, i.free) for ep in self.endpoints() if (i := self._infos.get(ep)) is not None]

    def add(self, text: str) -> bool:
        """Add a worker (probed at once); a malformed or duplicate entry is explained below."""
        try:
            ep = rpc.parse_endpoint(text)
        except rpc.RpcError as e:
            self.message.setText(str(e))
            return False
        if ep in self.endpoints():
            self.message.setText(f"{ep} is already in the list")
            return False
        r = self.table.rowCount()
        self.table.insertRow(r)
        self.table.setItem(r, 0, QTableWidgetItem(ep))
        for c in range(1, len(COLUMNS)):
            self.table.setItem(r, c, QTableWidgetItem(""))
        self._probe(ep)
        self.changed.emit(self.endpoints())
        return True

    def remove(self, endpoint: str) -> None:
        r = self._row(endpoint)
        if r is not None:
            self.table.removeRow(r)
            self._infos.pop(endpoint, None)
            self.changed.emit(self.endpoints())

    def refresh(self) -> None:
        for ep in self.endpoints():
            self._probe(ep)

    def wait_idle(self, ms: int = 10000) -> bool:
        return self._pool.waitForDone(ms)

    # -- internals --------------------------------------------------------------------------
    def _row(self, endpoint: str) -> int | None:
        for r in range(self.table.rowCount()):
            if self.table.item(r, 0).text() == endpoint:
                return r
        return None

    def _add_from_entry(self) -> None:
        if self.add(self.entry.text()):
            self.entry.clear()

    def _remove_selected(self) -> None:
        rows = sorted({i.row() for i in self.table.selectedIndexes()}, reverse=True)
        for r in rows:
            self.remove(self.table.item(r, 0).text())

    def _probe(self, ep: str) -> None:
        r = self._row(ep)
        if r is not None:
            self.table.item(r, 1).setText("checking…")
        self._pool.start(_ProbeTask(ep, self._prober, self._relay))

    def _on_probed(self, ep: str, result: object) -> None:
        r = self._row(ep)
        if r is None:  # removed while the probe ran
            return
        cells = [self.table.item(r, c) for c in range(1, len(COLUMNS))]
        if isinstance(result, rpc.WorkerInfo):
            self._infos[ep] = result
            cells[0].setText(f"ready (RPC {'.'.join(map(str, result.version))})")
            cells[1].setText(str(len(result.devices)))
            cells[2].setText(" + ".join(f"{d.free / rpc.GB:.1f} of {d.total / rpc.GB:.1f} GB" for d in result.devices))
            cells[3].setText(f"{result.rtt_ms:.2f} ms")
            tip = result.describe()
        else:
            self._infos.pop(ep, None)
            cells[0].setText("unreachable")
            for c in cells[1:]:
                c.setText("")
            tip = str(result)
            self.message.setText(tip)
        for c in [self.table.item(r, 0)] + cells:
            c.setToolTip(tip)
        self.table.item(r, 1).setData(Qt.ItemDataRole.UserRole, isinstance(result, rpc.WorkerInfo))
        self.probed.emit(ep)
