"""The app's way to RPC workers: a status-bar button, the Workers dialog, and the offer to
reload locally after a worker was lost.

`install_rpc_ui(window)` mounts both buttons in the window's status bar (one line in
MainWindow). The dialog wraps `RpcWorkersWidget`; "Use for loading" sets the session's
`rpc_endpoints`, which every later load (catalog pair, autoload, reload) follows.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Slot
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPushButton, QVBoxLayout, QWidget

from .rpc_workers import Prober, RpcWorkersWidget


class WorkersDialog(QDialog):
    """Add/remove workers, see their devices, memory and round trip; choose to use them."""

    def __init__(self, session: Any, parent: QWidget | None = None, prober: Prober | None = None,
                 known: list[str] | None = None):
        super().__init__(parent)
        self.session = session
        self.setWindowTitle("RPC workers")
        self.resize(720, 360)
        lay = QVBoxLayout(self)
        listed = list(dict.fromkeys([*session.rpc_endpoints, *(known or [])]))  # in use first, then remembered
        self.workers = RpcWorkersWidget(self, prober=prober, endpoints=listed)
        lay.addWidget(self.workers)
        self.state = QLabel()
        self.state.setWordWrap(True)
        lay.addWidget(self.state)
        buttons = QDialogButtonBox()
        self.use_button = buttons.addButton("Use for loading", QDialogButtonBox.ButtonRole.AcceptRole)
        self.local_button = buttons.addButton("This machine only", QDialogButtonBox.ButtonRole.ActionRole)
        self.close_button = buttons.addButton(QDialogButtonBox.StandardButton.Close)
        lay.addWidget(buttons)
        self.use_button.clicked.connect(self.use_workers)
        self.local_button.clicked.connect(self.use_local)
        self.close_button.clicked.connect(self.reject)
        self.workers.changed.connect(self._show_state)
        self._show_state()

    def use_workers(self) -> None:
        eps = self.workers.endpoints()
        if not eps:
            self.state.setText("Add at least one worker (host:port) first.")
            return
        self.session.rpc_endpoints = tuple(eps)
        self._show_state()

    def use_local(self) -> None:
        self.session.rpc_endpoints = ()
        self._show_state()

    def _show_state(self, *_: object) -> None:
        used = list(self.session.rpc_endpoints)
        if used:
            text = f"The next load splits the target over this machine + {', '.join(used)}; the draft stays here."
        else:
            text = "Models load on this machine only."
        pair = getattr(self.session, "pair", None)
        if pair is not None:
            text += " Load the pair again (Models) to apply a change to the pair in use."
        self.state.setText(text)


class RpcStatus:
    """The status-bar buttons: "RPC: off / N workers" opens the dialog; "Reload locally"
    shows after a worker was lost and loads the same pair on this machine alone."""

    def __init__(self, window: Any):
        self.window = window
        self.session = window.session
        self.dialog: WorkersDialog | None = None
        self.button = QPushButton()
        self.button.setObjectName("rpcWorkers")
        self.button.setFlat(True)
        self.button.setToolTip("Split the target over llama.cpp RPC workers on other machines (Ctrl+Shift+W)")
        self.button.clicked.connect(self.open_dialog)
        self.reload_button = QPushButton("⟲ Reload locally")
        self.reload_button.setObjectName("rpcReloadLocally")
        self.reload_button.setToolTip("A worker holding part of the target was lost: load the pair on this machine only")
        self.reload_button.hide()
        self.reload_button.clicked.connect(self.reload_locally)
        self.action = QAction("RPC workers…", window)
        self.action.setShortcut(QKeySequence("Ctrl+Shift+W"))
        self.action.triggered.connect(self.open_dialog)
        window.addAction(self.action)
        sb = window.statusBar()
        sb.addPermanentWidget(self.reload_button)
        sb.addPermanentWidget(self.button)
        self.session.workerLost.connect(self._lost)
        self.session.pairChanged.connect(self.refresh)
        self.refresh()

    @Slot()
    def open_dialog(self) -> WorkersDialog:
        if self.dialog is None:
            self.dialog = WorkersDialog(self.session, self.window, known=self._remembered())
            self.dialog.workers.changed.connect(self._remember)
            self.dialog.finished.connect(self.refresh)
            self.dialog.use_button.clicked.connect(self.refresh)
            self.dialog.local_button.clicked.connect(self.refresh)
        self.dialog.show()
        self.dialog.raise_()
        return self.dialog

    def _remembered(self) -> list[str]:
        """The workers listed last time (QSettings "rpc/workers"): the list outlives the app."""
        settings = getattr(self.window, "settings", None)
        value = settings.value("rpc/workers", []) if settings is not None else []
        return [value] if isinstance(value, str) else [str(v) for v in value or []]

    def _remember(self, endpoints: list[str]) -> None:
        settings = getattr(self.window, "settings", None)
        if settings is not None:
            settings.setValue("rpc/workers", list(endpoints))

    @Slot(str)
    def _lost(self, message: str) -> None:
        self.reload_button.show()
        self.refresh()

    @Slot()
    def reload_locally(self) -> None:
        if self.session.busy:
            self.window.notify(f"Wait for {self.session.busy} to end, then reload")
            return
        if self.session.reload_locally():
            self.reload_button.hide()
            self.refresh()

    def refresh(self, *_: object) -> None:
        """Show how many workers the next load uses."""
        n = len(self.session.rpc_endpoints)
        self.button.setText(f"RPC: {n} worker{'s' if n != 1 else ''}" if n else "RPC: off")


def install_rpc_ui(window: Any) -> RpcStatus:
    """Mount the RPC buttons in `window`'s status bar; kept on the window as `rpc_status`."""
    window.rpc_status = RpcStatus(window)
    return window.rpc_status


__all__ = ["WorkersDialog", "RpcStatus", "install_rpc_ui"]
