"""The question before a tool runs: which server, which tool, with which arguments; Allow once,
Always for this tool (in this chat), Deny. Esc (or closing it) stops the answer, as Esc does
in the chat. Not modal, so Stop stays within reach, and not blocking: the worker waits for
the answer, the GUI runs. No button is the default: an Enter meant for the prompt allows nothing."""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from ...tool_worker import ALLOW_ALWAYS, ALLOW_ONCE, DENY

STOP = "stop"


def pretty_arguments(arguments: Any) -> str:
    try:
        return json.dumps(arguments, ensure_ascii=False, indent=2)
    except (TypeError, ValueError):
        return str(arguments)


class ApprovalDialog(QDialog):
    """Asks once; `decided` says ALLOW_ONCE, ALLOW_ALWAYS, DENY or STOP (Esc, closed)."""

    decided = Signal(str)

    def __init__(self, server: str, tool: str, arguments: Any, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("toolApproval")
        self.setWindowTitle("Allow a tool call?")
        self.decision = ""
        lay = QVBoxLayout(self)
        title = QLabel("<b>Allow a tool call?</b>")  # the window title is not shown everywhere (no frame)
        lay.addWidget(title)
        head = QLabel(f"The model wants to call the tool <b>{_html(tool)}</b> of the MCP server "
                      f"<b>{_html(server)}</b> with these arguments:")
        head.setWordWrap(True)
        lay.addWidget(head)
        self.arguments = QPlainTextEdit(pretty_arguments(arguments))
        self.arguments.setReadOnly(True)
        mono = QFont("monospace")
        mono.setStyleHint(QFont.StyleHint.Monospace)
        self.arguments.setFont(mono)
        lines = self.arguments.toPlainText().count("\n") + 1
        self.arguments.setFixedHeight(min(240, 24 + lines * self.arguments.fontMetrics().lineSpacing()))
        lay.addWidget(self.arguments)
        note = QLabel("Its result goes back to the model. Deny tells the model you refused; Esc stops the answer.")
        note.setWordWrap(True)
        note.setStyleSheet("color: gray;")
        lay.addWidget(note)
        buttons = QDialogButtonBox()
        self.allow_once = QPushButton("Allow once")
        self.allow_always = QPushButton("Always for this tool")
        self.allow_always.setToolTip(f"Run {tool} of {server} without asking again in this chat")
        self.deny = QPushButton("Deny")
        self.deny.setToolTip("Do not run it: the model is told that you denied the call")
        for b, role in ((self.allow_once, QDialogButtonBox.ButtonRole.AcceptRole),
                        (self.allow_always, QDialogButtonBox.ButtonRole.AcceptRole),
                        (self.deny, QDialogButtonBox.ButtonRole.RejectRole)):
            buttons.addButton(b, role)
        for b in (self.allow_once, self.allow_always, self.deny):  # Enter typed for the prompt must not allow a call
            b.setAutoDefault(False)
            b.setDefault(False)
        self.allow_once.clicked.connect(lambda: self._decide(ALLOW_ONCE))
        self.allow_always.clicked.connect(lambda: self._decide(ALLOW_ALWAYS))
        self.deny.clicked.connect(lambda: self._decide(DENY))
        lay.addWidget(buttons)
        self.setMinimumWidth(460)

    def _decide(self, decision: str) -> None:
        if not self.decision:
            self.decision = decision
            self.decided.emit(decision)
        self.done(QDialog.DialogCode.Accepted if decision in (ALLOW_ONCE, ALLOW_ALWAYS) else QDialog.DialogCode.Rejected)

    def reject(self) -> None:  # Esc, the title bar's close: stop the answer
        self._decide(STOP)

    def dismiss(self) -> None:
        """The answer ended without it (stopped): close without deciding anything."""
        self.decision = self.decision or STOP
        super().reject()


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
