"""The chat's tools at work: the worker for an answer that may call them, the approval dialog
for each call, and the servers' life (stopped when the chat turns them off, another chat
opens, or the window closes).

`choice` is the first step's tool choice ("auto"; a tool's name forces a call of it, which
the tests use so that a tiny model calls), `timeout` how long a call may take (None: the
app's CALL_TIMEOUT_S)."""

from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget

from ...tool_servers import ChatServers, ToolServers
from ...tool_worker import ALLOW_ALWAYS, DENY, ApprovalRequest, ToolGenerationWorker, tool_key
from .tool_approval import STOP, ApprovalDialog
from .tools_box import ToolsBox


class ChatTools(QObject):
    """Tools for the open chat: the drawer's ToolsBox says which servers, this object runs them."""

    def __init__(self, config: ToolServers, box: ToolsBox, page: QWidget, stop: Callable[[], None],
                 parent: QObject | None = None):
        super().__init__(parent)
        self.config, self.box, self._page, self._stop = config, box, page, stop
        self.servers = ChatServers()
        self.choice = "auto"
        self.timeout: float | None = None
        self.dialog: ApprovalDialog | None = None  # the question open now, if any
        box.edited.connect(self._choice_changed)
        self.refresh()

    def refresh(self) -> None:
        """Read the mcp.json again (Settings chose another, or it changed): the drawer lists its servers."""
        from engine.errors import TandemError

        try:
            names, error = [s.name for s in self.config.servers()], ""
        except TandemError as e:
            names, error = [], str(e)
        self.box.set_servers(names, error)

    def worker(self, engine: Any, request: Any, *, slots: Any = None,
               model_draft: Any = None) -> ToolGenerationWorker | None:
        """The worker for an answer when this chat has servers on (None: a plain answer);
        TandemError when the mcp.json cannot be read now. `slots`, `model_draft`: the local
        server's parallel slots and their draft file, which each model turn runs in."""
        chosen = self.box.chosen()
        if not chosen:
            return None
        configs = [c for c in self.config.servers() if c.name in chosen]
        if not configs:
            return None
        w = ToolGenerationWorker(engine, request, self.servers, configs, always=set(self.box.always),
                                 choice=self.choice, timeout=self.timeout, slots=slots, model_draft=model_draft)
        w.approval.connect(self.ask)
        return w

    def ask(self, req: ApprovalRequest) -> None:
        """A call waits: the dialog asks (over the chat, not modal, not blocking), its answer goes to the worker."""
        self.dismiss()
        dialog = ApprovalDialog(req.server, req.tool, req.arguments, self._page)
        dialog.decided.connect(lambda d, r=req: self._decided(r, d))
        self.dialog = dialog
        dialog.show()  # not modal: the chat's Stop stays clickable
        dialog.arguments.setFocus()

    def _decided(self, req: ApprovalRequest, decision: str) -> None:
        if decision == STOP:  # Esc: the whole answer stops, not only this call
            self._stop()
            req.answer(DENY)
            return
        if decision == ALLOW_ALWAYS:
            self.box.allow_always(tool_key(req.server, req.tool))
        req.answer(decision)

    def dismiss(self) -> None:
        """Close a question still open (its answer ended: stopped)."""
        if self.dialog is not None and self.dialog.isVisible():
            self.dialog.dismiss()
        self.dialog = None

    def _choice_changed(self) -> None:
        """Servers switched off (or others on): the running ones stop; the next answer starts the new set."""
        if self.servers.running and set(self.servers.running) != set(self.box.chosen()):
            self.servers.stop()

    def chat_changed(self) -> None:
        """Another chat opens (or a new one): this chat's servers stop, and the drawer lists the
        servers of the file as it is now (it may have been edited)."""
        self.dismiss()
        self.servers.stop()
        self.refresh()

    def shutdown(self) -> None:
        """The window closes: every server stops, and the close waits for them (no orphan child)."""
        self.dismiss()
        self.servers.stop(wait=True)
