"""The loop's `approve` hook (the app's approval dialog): asked before each call with the tool
and its arguments; a refusal is an error result the model reads and no call reaches the
server; a cancel while it waits ends the loop after the calls made so far. The tiny model and
the real MCP server of mcp_fixture_server.py, the call forced by the tool choice."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine.decoding.cancel import CancelToken
from engine.decoding.engine import Engine
from engine.decoding.request import GenerationRequest
from engine.tooluse.config import parse_config
from engine.tooluse.hub import McpHub
from engine.tooluse.loop import CallEvent, LoopDone, ToolLoop
from engine.tooluse.toolset import Allowance

SERVER = Path(__file__).with_name("mcp_fixture_server.py")


@pytest.fixture(scope="module")
def setup(tiny_target):
    eng = Engine(tiny_target, n_ctx=2048)
    with McpHub(parse_config({"mcpServers": {"ships": {"command": sys.executable, "args": [str(SERVER)]}}})) as hub:
        yield eng, hub
    eng.close()


def _run(eng, hub, approve, cancel=None, stream=None):
    loop = ToolLoop(eng, hub, Allowance.parse("all"), choice="server_pid", max_steps=1, approve=approve, stream=stream)
    req = GenerationRequest.from_options("Which process are you?", draft_model=None, chat=True, max_tokens=40)
    events = list(loop.run(req, cancel=cancel))
    return [e.record for e in events if isinstance(e, CallEvent)], next(e.result for e in events if isinstance(e, LoopDone))


def test_approve_sees_the_call_and_an_approved_call_runs(setup):
    eng, hub = setup
    asked = []
    (record,), result = _run(eng, hub, lambda name, tool, args: asked.append((name, tool.server, args)))
    assert asked == [("server_pid", "ships", {})]
    assert record.allowed and not record.is_error and record.result.isdigit()
    assert len(result.steps) == 2 and not result.cancelled


def test_a_refusal_is_an_error_result_and_the_loop_goes_on(setup):
    eng, hub = setup
    (record,), result = _run(eng, hub, lambda *a: "the user denied this call")
    assert not record.allowed and record.is_error and record.result == "error: the user denied this call"
    assert result.messages[-2]["content"] == "error: the user denied this call"  # the model read it
    assert len(result.steps) == 2  # and answered after it


def test_a_cancel_while_approving_ends_the_loop(setup):
    eng, hub = setup
    cancel = CancelToken()

    def stop(*a):
        cancel.cancel()
        return "stopped"

    (record,), result = _run(eng, hub, stop, cancel)
    assert not record.allowed
    assert result.cancelled and len(result.steps) == 1  # no second generation


def test_a_stop_while_a_tool_runs_ends_the_wait_at_once(setup):
    """The hub's call checks the loop's cancel token: a hanging tool does not hold a Stop for
    its whole time limit."""
    import threading
    import time

    eng, hub = setup
    tool = next(t for t in hub.tools if t.name == "wait")
    cancel = CancelToken()
    threading.Timer(0.5, cancel.cancel).start()
    began = time.monotonic()
    res = hub.call(tool, {"seconds": 60}, timeout=30, cancel=cancel)
    assert res.is_error and "stopped by the user" in res.text and time.monotonic() - began < 5
    quick = hub.call(tool, {"seconds": 0.1}, timeout=0.05, cancel=CancelToken())
    assert quick.is_error and "did not answer within 0.05 s" in quick.text  # the time limit still applies


def test_a_call_cut_off_by_the_token_limit_is_not_run_and_ends_the_loop(setup):
    """Before: a forced call cut at max_tokens mid-arguments ('{"shipment_id": "N') was read as a
    call whose arguments "must be a JSON object", sent back, and the loop went on to write it
    again. The budget is the first at which the reader sees the call but not its whole arguments."""
    eng, hub = setup
    for budget in range(8, 80, 2):
        asked = []
        loop = ToolLoop(eng, hub, Allowance.parse("all"), choice="track_shipment", max_steps=2,
                        approve=lambda *a: asked.append(a))
        req = GenerationRequest.from_options("Where is NX-4471?", draft_model=None, chat=True, max_tokens=budget)
        events = list(loop.run(req))
        records = [e.record for e in events if isinstance(e, CallEvent)]
        if records:
            break
    result = next(e.result for e in events if isinstance(e, LoopDone))
    assert result.steps[0].stats.finish_reason == "length", budget
    assert len(records) == 1 and records[0].is_error and "token limit" in records[0].result, (budget, records)
    assert records[0].server == "ships" and asked == []  # never offered to run
    assert len(result.steps) == 1 and not result.cancelled  # the loop ended there


def test_each_step_runs_through_the_given_stream_and_ends_before_its_call_is_approved(setup):
    """The app's turn in a slot (`stream`): each model turn is one iteration of it, over before
    the call waits for approval, so no turn or slot is held while the user decides."""
    eng, hub = setup
    log: list[str] = []

    def stream(req, cancel):
        log.append("turn")
        yield from eng.stream(req, cancel=cancel)
        log.append("turn over")

    (record,), result = _run(eng, hub, lambda *a: log.append("approve"), stream=stream)
    assert log == ["turn", "turn over", "approve", "turn", "turn over"]
    assert record.allowed and record.result.isdigit() and len(result.steps) == 2
