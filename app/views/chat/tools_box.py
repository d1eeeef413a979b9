"""The chat's Tools switch, in the settings drawer: which of the configured MCP servers this
chat may use (none by default), and the tools it runs without asking ("Always for this
tool"). Kept with the chat's settings; the servers themselves are configured in Settings."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QCheckBox, QGroupBox, QLabel, QPushButton, QVBoxLayout, QWidget


class ToolsBox(QGroupBox):
    """A checkbox per configured server; `edited` when the choice (or an always-allowed tool)
    changes."""

    edited = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Tools (MCP servers)", parent)
        self.setObjectName("chatTools")
        self._lay = QVBoxLayout(self)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: gray;")
        self._lay.addWidget(self.note)
        self.forget = QPushButton("Ask again for every tool")
        self.forget.setToolTip("Forget the tools this chat runs without asking")
        self.forget.clicked.connect(self.forget_always)
        self._lay.addWidget(self.forget)
        self.boxes: dict[str, QCheckBox] = {}
        self._wanted: set[str] = set()  # chosen, kept even while the file does not configure them
        self.always: set[str] = set()  # "server/tool" run without asking in this chat
        self.set_servers([], "")

    def set_servers(self, names: list[str], error: str = "") -> None:
        """The servers the mcp.json configures (`error`: why it could not be read, one line)."""
        for box in self.boxes.values():
            self._lay.removeWidget(box)
            box.deleteLater()
        self.boxes = {}
        for i, name in enumerate(names):
            box = QCheckBox(name)
            box.setToolTip(f"Offer the tools of {name} to the model in this chat (each call asks first)")
            box.setChecked(name in self._wanted)
            box.toggled.connect(lambda on, n=name: self._toggled(n, on))
            self._lay.insertWidget(i, box)
            self.boxes[name] = box
        self.note.setText(error or ("" if names else "No MCP servers configured: add them in Settings › MCP servers."))
        self.note.setVisible(bool(self.note.text()))
        self._sync_forget()

    def _toggled(self, name: str, on: bool) -> None:
        (self._wanted.add if on else self._wanted.discard)(name)
        self.edited.emit()

    def chosen(self) -> list[str]:
        """The servers on for this chat that the file configures, in its order."""
        return [n for n in self.boxes if n in self._wanted]

    def allow_always(self, key: str) -> None:
        self.always.add(key)
        self._sync_forget()
        self.edited.emit()

    def forget_always(self) -> None:
        self.always.clear()
        self._sync_forget()
        self.edited.emit()

    def _sync_forget(self) -> None:
        self.forget.setVisible(bool(self.always))
        self.forget.setToolTip("Ask again before running: " + ", ".join(sorted(self.always)))

    def values(self) -> dict[str, Any] | None:
        """What the chat keeps (None: tools off and nothing always allowed)."""
        if not self._wanted and not self.always:
            return None
        return {"servers": sorted(self._wanted), "always": sorted(self.always)}

    def apply(self, value: Any) -> None:
        """A chat's stored choice (missing or unreadable: tools off, nothing always allowed)."""
        value = value if isinstance(value, dict) else {}
        servers, always = value.get("servers", []), value.get("always", [])
        self._wanted = {str(s) for s in servers} if isinstance(servers, list) else set()
        self.always = {str(s) for s in always} if isinstance(always, list) else set()
        for name, box in self.boxes.items():
            box.blockSignals(True)
            box.setChecked(name in self._wanted)
            box.blockSignals(False)
        self._sync_forget()
