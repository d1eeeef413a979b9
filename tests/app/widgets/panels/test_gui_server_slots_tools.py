"""A chat with tools on beside the local server's parallel slots: each model turn of the tool
loop (the answer that writes the call, then the answer after the tool's result) takes a slot as
one more client, streaming at the same time as a client's answer, each the answer it gives alone;
a call that waits for the user's approval holds no slot; Stop frees the turn's slot at once, and
ends a turn still waiting in line as a stopped answer with its calls; the server switched off
while a call waits leaves the slots to the answer's next turn, then frees them; with one slot
the loop's turns take the engine's queue as before.

A real MCP server over stdio (tests/app/views/chat/mcp_chat_server.py), the tiny model forced
to call its `server_pid` tool. Which request runs when is made certain by `Gate`s, not timed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("mcp")

from test_gui_server_slots import (WAIT, Gate, client_answer_alone, client_body, post, serving,  # noqa: E402,F401
                                  start, starts_and_ends)

from app.session import Session  # noqa: E402
from app.tool_servers import ChatServers  # noqa: E402
from app.tool_worker import ALLOW_ONCE, ToolGenerationWorker  # noqa: E402
from engine.decoding.events import DoneEvent  # noqa: E402
from engine.decoding.request import GenerationRequest  # noqa: E402
from engine.tooluse.config import parse_config  # noqa: E402

pytestmark = pytest.mark.gui
SERVER = Path(__file__).parents[2] / "views" / "chat" / "mcp_chat_server.py"
ASK = [{"role": "user", "content": "Use the tool, please."}]


@pytest.fixture
def servers():
    """The chat's MCP server (started by the first answer, kept for the next, as the chat keeps it)."""
    s = ChatServers()
    yield s, parse_config({"mcpServers": {"ships": {"command": sys.executable,
                                                    "args": [str(SERVER), "--tools", "server_pid"]}}})
    s.stop(wait=True)


def tool_request(session: Session) -> GenerationRequest:
    return GenerationRequest.from_options(ASK, draft_model=session.pair.draft, lookahead=3, max_tokens=80, chat=True)


class Answer:
    """A tool chat's worker run as the chat runs it, with what it emitted; `approve` decides
    each call on the GUI thread when it is asked (by default: allowed once, at once)."""

    def __init__(self, session: Session, servers, request: GenerationRequest, *, slots=None,
                 gate: Gate | None = None, approve=None):
        hub, configs = servers
        self.w = ToolGenerationWorker(session.engine, request, hub, configs, always=set(), choice="server_pid",
                                      slots=slots, model_draft=session.slots_draft)
        if gate is not None:
            self.w.token = gate
        self.done: list[DoneEvent] = []
        self.calls: list[dict] = []
        self.asked: list = []
        self.w.done.connect(self.done.append)
        self.w.call.connect(self.calls.append)
        self.w.approval.connect(lambda req: (self.asked.append(req), (approve or allow)(req)))
        self.failed: list[str] = []
        self.w.failed.connect(self.failed.append)
        session.run(self.w, "chat")

    def wait(self, qtbot, session: Session) -> DoneEvent:
        qtbot.waitUntil(lambda: (bool(self.done) or bool(self.failed)) and not session.busy, timeout=WAIT)
        assert not self.failed and len(self.done) == 1
        return self.done[0]


def allow(req) -> None:
    req.answer(ALLOW_ONCE)


def alone(qtbot, session: Session, servers) -> tuple[DoneEvent, list[dict]]:
    """The tool chat's answer with nothing beside it (its turns on the engine's single sequence)."""
    a = Answer(session, servers, tool_request(session))
    return a.wait(qtbot, session), a.calls


def test_a_tool_chat_and_a_client_answer_run_side_by_side_each_as_alone(qtbot, serving, servers, monkeypatch):
    session, switch = serving
    chat_alone, calls_alone = alone(qtbot, session, servers)
    assert len(calls_alone) == 1 and calls_alone[0]["result"].isdigit(), chat_alone.text  # the server's pid
    start(qtbot, switch, 2)
    client_alone = client_answer_alone(switch, 24)
    slots, order = session.slots, starts_and_ends(session)
    from engine.decoding.slots import turn

    prompts: list = []  # each model turn's prompt, as it went to a slot
    real = turn.stream_in_slot
    monkeypatch.setattr(turn, "stream_in_slot", lambda eng, s, req, job, draft: (
        prompts.append(list(req.prompt)) if job.source == "chat" else None, real(eng, s, req, job, draft))[1])
    phase = {"alone": True, "both": True}
    # the loop's first turn is held alone in its slot (the client's request waits), then while both run
    gate = Gate(lambda: (phase["alone"] and sum(slots.busy()) == 1) or (phase["both"] and all(slots.busy())))
    a = Answer(session, servers, tool_request(session), slots=slots, gate=gate)
    assert a.w.slot_draft == "model"
    qtbot.waitUntil(lambda: sum(slots.busy()) == 1, timeout=WAIT)
    result: dict = {}
    t = post(switch, client_body(24), result)
    qtbot.waitUntil(lambda: switch.in_use.text() == "slots 1/2 busy, 1 waiting", timeout=WAIT)
    phase["alone"] = False
    qtbot.waitUntil(lambda: switch.in_use.text() == "slots 2/2 busy", timeout=WAIT)
    qtbot.waitUntil(lambda: ("server", "prefill") in order and ("chat", "prefill") in order, timeout=WAIT)
    assert not any(kind == "done" for _, kind in order)  # both began, neither has ended
    phase["both"] = False
    done = a.wait(qtbot, session)
    t.join()
    assert done.text == chat_alone.text and list(done.tokens) == list(chat_alone.tokens)
    assert a.calls == [{**calls_alone[0], "seconds": a.calls[0]["seconds"]}] and a.asked
    assert [s for s, kind in order if kind == "prefill"].count("chat") == 2  # both turns in a slot
    assert len(prompts) == 2 and calls_alone[0]["result"] in session.engine.target.detokenize(prompts[1])
    assert result["r"].status_code == 200
    assert result["r"].json()["choices"][0]["message"]["content"] == client_alone
    qtbot.waitUntil(lambda: switch.in_use.text() == "slots 0/2 busy", timeout=WAIT)


def test_an_approval_holds_no_slot_and_stop_in_the_next_turn_frees_its_slot(qtbot, serving, servers):
    session, switch = serving
    start(qtbot, switch, 2)
    slots, q = session.slots, session.engine.queue
    waiting: list = []
    held = {"on": False, "stopped": False}
    # once the call is allowed, the loop's next turn (the answer after its result) is held in its slot until Stop
    gate = Gate(lambda: held["on"] and not held["stopped"])
    a = Answer(session, servers, tool_request(session), slots=slots, gate=gate, approve=waiting.append)
    qtbot.waitUntil(lambda: bool(waiting), timeout=WAIT)  # the call waits for the user
    qtbot.waitUntil(lambda: not any(slots.busy()) and q.running_side_by_side == 0, timeout=WAIT)
    qtbot.waitUntil(lambda: switch.in_use.text() == "slots 0/2 busy", timeout=WAIT)
    assert not a.done and waiting[0].decision == ""  # no slot held while it asks
    held["on"] = True
    waiting[0].answer(ALLOW_ONCE)
    qtbot.waitUntil(lambda: bool(a.calls) and sum(slots.busy()) == 1, timeout=WAIT)  # the next turn, in a slot
    a.w.cancel()  # Stop
    held["stopped"] = True
    done = a.wait(qtbot, session)
    assert done.stats.finish_reason == "cancelled" and a.calls[0]["allowed"]
    qtbot.waitUntil(lambda: not any(slots.busy()) and q.running_side_by_side == 0, timeout=WAIT)
    qtbot.waitUntil(lambda: switch.in_use.text() == "slots 0/2 busy", timeout=WAIT)


def test_one_slot_keeps_the_tool_loop_in_the_engines_queue(qtbot, serving, servers, monkeypatch):
    session, switch = serving
    start(qtbot, switch, 1)
    assert session.slots is None
    q = session.engine.queue
    turns: list[tuple[str, bool]] = []  # each place taken in the queue: who, and whether beside others
    submit = q.submit
    monkeypatch.setattr(q, "submit", lambda source, **kw: (
        turns.append((source, bool(kw.get("side_by_side")))), submit(source, **kw))[1])
    with q.turn(q.submit("test", bounded=False)):  # holds the engine: the loop's first turn waits for it
        a = Answer(session, servers, tool_request(session), slots=session.slots)
        assert a.w.slot_draft is None
        qtbot.waitUntil(lambda: q.waiting == 1, timeout=WAIT)
        assert not a.done
    done = a.wait(qtbot, session)
    assert len(a.calls) == 1 and done.stats.generated_tokens > 0
    # each turn through the queue, one at a time (Engine.stream's own turn), as before
    assert turns == [("test", False), ("direct", False), ("direct", False)]


def test_stop_while_the_next_turn_waits_for_a_slot_ends_the_answer_with_its_calls(qtbot, serving, servers):
    session, switch = serving
    start(qtbot, switch, 2)
    q, waiting = session.engine.queue, []
    a = Answer(session, servers, tool_request(session), slots=session.slots, approve=waiting.append)
    qtbot.waitUntil(lambda: bool(waiting), timeout=WAIT)
    holder = q.submit("test", bounded=False)
    q.wait_turn(holder)  # the engine held (a race, say): the loop's next turn cannot start
    try:
        waiting[0].answer(ALLOW_ONCE)
        qtbot.waitUntil(lambda: bool(a.calls) and q.waiting == 1, timeout=WAIT)  # the next turn waits in line
        a.w.cancel()  # Stop
        done = a.wait(qtbot, session)
    finally:
        q.finish(holder)
    assert done.stats.finish_reason == "cancelled" and done.text == ""
    assert done.stats.generated_tokens > 0  # the turn that wrote the call
    assert a.calls[0]["allowed"] and a.calls[0]["result"].isdigit()
    assert not q.busy


def test_switched_off_while_a_call_waits_the_next_turn_ends_in_the_kept_slots(qtbot, serving, servers):
    """The server stops while the user decides: the slots are kept for the answer's next turn
    (the chat's answer is not cut, and is the one it gives alone), then freed."""
    from engine.decoding.decoder import EngineClosedError

    session, switch = serving
    expected, _ = alone(qtbot, session, servers)
    start(qtbot, switch, 2)
    slots, waiting = session.slots, []
    a = Answer(session, servers, tool_request(session), slots=slots, approve=waiting.append)
    qtbot.waitUntil(lambda: bool(waiting), timeout=WAIT)
    switch.set_on(False)
    assert session.slots is None and not switch.running
    waiting[0].answer(ALLOW_ONCE)
    done = a.wait(qtbot, session)
    assert done.text == expected.text and list(done.tokens) == list(expected.tokens)
    assert sum(n for n, _, _ in slots.counts()) == 2  # both turns ran in the slots
    with pytest.raises(EngineClosedError):  # freed once the answer ended
        next(slots.stream([1, 2, 3]))
