"""An answer that may call tools: the tool loop (engine/tooluse/loop.py) on a worker thread,
each call approved by the user first.

The worker streams each step's tokens as GenerationWorker does; a step that ends in calls is
followed by one `call` per call (the GUI drops that step's text, which was the calls, and
shows a card), and `done` comes once, for the loop's answer. Before a call runs, `approval`
hands the GUI an ApprovalRequest and the worker waits for its answer, checking Stop every
50 ms, so the dialog never holds the worker past a Stop and Stop never waits for the dialog.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Mapping, Sequence

from PySide6.QtCore import Signal

from engine.errors import Cancelled

from .tool_servers import CALL_TIMEOUT_S, ChatServers
from .workers import GenerationWorker, FrameCoalescer, LateFlush

DENIED = "the user denied this call"
STOPPED = "the user stopped the answer before this call ran"
WAIT_S = 0.05  # how often a wait for the user's answer checks Stop
ALLOW_ONCE, ALLOW_ALWAYS, DENY = "once", "always", "deny"


def tool_key(server: str, tool: str) -> str:
    """How "Always for this tool" names a tool in the chat's settings."""
    return f"{server}/{tool}"


@dataclass
class ApprovalRequest:
    """One call waiting for the user: the GUI shows it and calls `answer` (from any thread)."""

    server: str
    tool: str
    arguments: Any
    decision: str = ""
    _answered: threading.Event = field(default_factory=threading.Event, repr=False)

    def answer(self, decision: str) -> None:
        self.decision = decision
        self._answered.set()

    def wait(self, timeout: float) -> bool:
        return self._answered.wait(timeout)


class ApprovalGate:
    """The loop's `approve` hook: tools allowed always for this chat pass, every other call
    waits for the user's answer (or for Stop)."""

    def __init__(self, ask: Callable[[ApprovalRequest], None], stopped: Callable[[], bool], always: set[str]):
        self._ask, self._stopped, self.always = ask, stopped, always

    def __call__(self, name: str, tool: Any, arguments: Mapping[str, Any]) -> str | None:
        key = tool_key(tool.server, tool.name)
        if key in self.always:
            return None
        req = ApprovalRequest(tool.server, tool.name, dict(arguments))
        self._ask(req)
        while not req.wait(WAIT_S):
            if self._stopped():
                return STOPPED
        if req.decision == ALLOW_ALWAYS:
            self.always.add(key)
            return None
        return None if req.decision == ALLOW_ONCE else STOPPED if self._stopped() else DENIED


def call_record(record: Any) -> dict[str, Any]:
    """A call as the transcript, the history and the exports keep it."""
    return {"server": record.server or "", "tool": record.name, "arguments": record.arguments,
            "result": record.result, "error": bool(record.is_error), "allowed": bool(record.allowed),
            "seconds": round(float(record.seconds), 3)}


def replayed_calls(message_id: int, calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """An earlier answer's calls as the conversation the next question is sent with: the
    assistant's calls, then each result as the model read it (so it can still refer to them).
    Calls read back from the history (an imported archive) are used only as text."""
    kept = [c for c in calls if isinstance(c.get("tool"), str) and c.get("tool")]
    if not kept:
        return []
    ids = [f"call_{message_id}_{i}" for i in range(len(kept))]
    asked = [{"id": i, "type": "function", "function": {
        "name": c["tool"], "arguments": c["arguments"] if isinstance(c.get("arguments"), str)
        else json.dumps(c.get("arguments") if c.get("arguments") is not None else {}, ensure_ascii=False)}}
        for i, c in zip(ids, kept)]
    return [{"role": "assistant", "content": "", "tool_calls": asked}] + [
        {"role": "tool", "tool_call_id": i, "name": c["tool"], "content": str(c.get("result") or "")}
        for i, c in zip(ids, kept)]


class ToolGenerationWorker(GenerationWorker):
    """One answer through the tool loop, with the chat's servers (started here if needed)."""

    call = Signal(dict)  # a call made (or refused): call_record's dict
    approval = Signal(object)  # ApprovalRequest: the GUI asks the user, then answers it
    progress = Signal(str)  # "Starting the MCP servers…", "Waiting for the model…"

    def __init__(self, engine: Any, request: Any, servers: ChatServers, configs: Sequence[Any], *,
                 always: set[str], choice: str = "auto", timeout: float | None = None, slots: Any = None,
                 model_draft: Any = None):
        """`slots`, `model_draft`: as GenerationWorker's; each model turn of the loop takes a slot
        of its own (the answer, then the answer after each tool's result), none held between."""
        super().__init__(engine, request, slots=slots, model_draft=model_draft)
        self.servers, self.configs, self.choice = servers, list(configs), choice
        self.timeout = CALL_TIMEOUT_S if timeout is None else timeout
        self.gate = ApprovalGate(self._ask, lambda: self.cancelled, always)
        self._last: Any = None
        self._result: Any = None

    def _turn(self, request: Any, cancel: Any) -> Iterator[Any]:
        """One model turn of the loop in a slot of the local server's, beside its requests."""
        from engine.decoding.slots.turn import take_turn

        return take_turn(self.engine, request, cancel, slots=self.slots, draft=self.slot_draft)

    def _ask(self, req: ApprovalRequest) -> None:
        self.approval.emit(req)

    def work(self) -> None:
        from engine.decoding.events import DoneEvent, RunStats
        from engine.tooluse.loop import ToolLoop
        from engine.tooluse.toolset import Allowance

        self.progress.emit("Starting the MCP servers…")
        try:
            hub = self.servers.hub(self.configs, cancel=self)  # Stop ends the wait at once
        except Cancelled:
            hub = None
        if hub is None or self.cancelled:  # stopped while the servers started: an empty, stopped answer
            self.done.emit(DoneEvent("", [], RunStats(finish_reason="cancelled", stopped_by="cancel")))
            return
        loop = ToolLoop(self.engine, hub, Allowance(every=True), choice=self.choice, call_timeout=self.timeout,
                        approve=self.gate, stream=self._turn if self.slot_draft is not None else None)
        toks = FrameCoalescer(self.tokens.emit)
        steps = FrameCoalescer(self.steps.emit, lead=toks)
        self.progress.emit("Waiting for the model…")
        try:
            with LateFlush(lambda: (steps,)):
                self._consume(self._steps_of(loop, steps), toks, steps)
        except Cancelled:  # stopped while a turn waited for a slot: no answer yet (a step before wrote calls)
            last = self._last
            stats = last.stats if last is not None else RunStats()
            self.done.emit(DoneEvent("", [], replace(stats, finish_reason="cancelled", stopped_by="cancel")))
            return
        result, last = self._result, self._last
        if result is None or last is None:
            return
        stats = last.stats
        if result.cancelled and stats.finish_reason != "cancelled":
            stats = replace(stats, finish_reason="cancelled", stopped_by="cancel")
        self.done.emit(DoneEvent(result.text, list(last.tokens), stats))

    def _steps_of(self, loop: Any, steps: FrameCoalescer) -> Iterator[Any]:
        """The loop's engine events, minus each step's end and the calls, which are handled
        here: a step's DoneEvent is not the answer's, a call is a card."""
        from engine.decoding.events import DoneEvent
        from engine.tooluse.loop import CallEvent, LoopDone

        for ev in loop.run(self.request, cancel=self.token):
            if isinstance(ev, DoneEvent):
                steps.flush()  # that step's tokens reach the GUI before its calls
                self._last = ev
            elif isinstance(ev, CallEvent):
                self.call.emit(call_record(ev.record))
            elif isinstance(ev, LoopDone):
                self._result = ev.result
            else:
                yield ev
