"""Settings › MCP servers: which mcp.json the app reads (the user's, or the default one in the
data folder), its servers and, on demand, their tools (each server started alone, listed,
stopped; one that does not start says why in one line). A chat turns servers on in its own
drawer (app/views/chat/tools_box.py)."""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QBrush, QColor, QDesktopServices
from PySide6.QtWidgets import (
    QFileDialog, QGroupBox, QHBoxLayout, QLabel, QPushButton, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget,
)

from .. import workers
from ..tool_servers import ServerListing, ToolServers
from ..widgets.controls.elided_label import ElidedLabel

ERROR_COLOUR = "#dc3545"


class McpServersBox(QGroupBox):
    """The file, its servers and their tools. `changed`: another file was chosen (or created)."""

    changed = Signal()

    def __init__(self, config: ToolServers, parent: QWidget | None = None,
                 open_url: Callable[[QUrl], bool] | None = None):
        super().__init__("MCP servers (tools for the chat)", parent)
        self.setObjectName("mcpServers")
        self.config = config
        self._open_url = open_url or QDesktopServices.openUrl
        self._worker: workers.CallWorker | None = None
        lay = QVBoxLayout(self)
        row = QHBoxLayout()
        self.where = ElidedLabel("", mode=Qt.TextElideMode.ElideMiddle)
        self.where.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.choose_btn = QPushButton("Choose…")
        self.choose_btn.setToolTip("Read another mcp.json (LM Studio's ~/.lmstudio/mcp.json and Cursor's "
                                   ".cursor/mcp.json work as they are)")
        self.choose_btn.clicked.connect(lambda _=False: self.choose())
        self.default_btn = QPushButton("Use default")
        self.default_btn.setToolTip("Read mcp.json in Tandem's data folder")
        self.default_btn.clicked.connect(lambda _=False: self.choose(""))
        self.open_btn = QPushButton("Open file")
        self.open_btn.clicked.connect(lambda _=False: self.open_file())
        for w, stretch in ((self.where, 1), (self.choose_btn, 0), (self.default_btn, 0), (self.open_btn, 0)):
            row.addWidget(w, stretch)
        lay.addLayout(row)
        self.status = QLabel()
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Server or tool", "What"])
        self.tree.setRootIsDecorated(True)
        self.tree.setMinimumHeight(110)
        lay.addWidget(self.tree)
        self.list_btn = QPushButton("Start and list tools")
        self.list_btn.setToolTip("Start each server, list its tools, and stop it again")
        self.list_btn.clicked.connect(lambda _=False: self.list_tools())
        lay.addWidget(self.list_btn, 0, Qt.AlignmentFlag.AlignLeft)
        self.show_file()

    def choose(self, path: str | None = None) -> None:
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self, "MCP servers file", str(self.config.path.parent),
                                                  "mcp.json (*.json);;All files (*)")
            if not path:
                return
        self.config.choose(path)
        self.show_file()
        self.changed.emit()

    def open_file(self) -> None:
        """Open the file in the desktop's editor (the default one is created empty first)."""
        try:
            path = self.config.create_default() if self.config.is_default else self.config.path
        except OSError as e:
            self._say(f"{self.config.path}: cannot be created ({e.strerror or e})", error=True)
            return
        self.show_file()
        self.changed.emit()
        self._open_url(QUrl.fromLocalFile(str(path)))

    def show_file(self) -> None:
        """The file and its servers, not started (a mistake in it: one line)."""
        from engine.errors import TandemError

        path = self.config.path
        self.where.setText(str(path) + (" (default)" if self.config.is_default else ""))
        self.default_btn.setEnabled(not self.config.is_default)
        self.open_btn.setText("Create and open" if not path.exists() else "Open file")
        self.tree.clear()
        try:
            servers = self.config.servers()
        except TandemError as e:
            self._say(str(e), error=True)
            self.list_btn.setEnabled(False)
            return
        for s in servers:
            QTreeWidgetItem(self.tree, [s.name, f"{s.transport}: {s.where}"])
        self.list_btn.setEnabled(bool(servers) and self._worker is None)
        self._say(f"{len(servers)} server{'s' if len(servers) != 1 else ''} configured; none runs until a chat "
                  "turns it on (the chat's drawer, Tools)" if servers else "No servers configured yet.")

    def list_tools(self) -> None:
        if self._worker is not None:
            return
        self.list_btn.setEnabled(False)
        self._say("Starting the servers…")
        w = workers.CallWorker(self.config.listing)
        w.result.connect(self._listed)
        w.failed.connect(lambda msg: self._say(msg, error=True))
        w.finished.connect(self._listing_ended)
        self._worker = w
        workers.start(w)

    def _listing_ended(self) -> None:
        self._worker = None
        self.list_btn.setEnabled(self.tree.topLevelItemCount() > 0)

    def _listed(self, listing: list[ServerListing]) -> None:
        self.tree.clear()
        failed = 0
        for s in listing:
            item = QTreeWidgetItem(self.tree, [s.name, s.error or f"{len(s.tools)} tool{'s' if len(s.tools) != 1 else ''}"])
            item.setToolTip(1, s.error or s.where)
            if s.error:
                failed += 1
                item.setForeground(1, QBrush(QColor(ERROR_COLOUR)))
            for name, what in s.tools:
                QTreeWidgetItem(item, [name, what])
            item.setExpanded(True)
        self.tree.resizeColumnToContents(0)
        self._say(f"{len(listing) - failed} of {len(listing)} servers started and listed their tools"
                  + (f"; {failed} did not start (see why beside it)" if failed else ""), error=bool(failed))

    def _say(self, text: str, *, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setStyleSheet(f"color: {ERROR_COLOUR};" if error else "")
