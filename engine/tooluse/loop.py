"""The tool loop: offer the MCP tools, generate, read the calls, run the allowed ones, append
their results, and again, until the model answers in prose or the step limit.

Each step is an ordinary generation of the engine (`Engine.stream`, or the caller's `stream`: a
turn in the parallel slots) with the request's own draft and sampling: the calls are read with
the server's readers (engine.toolcalls), the auto grammar or a forced call's grammar goes to the
verifier, so the output is the target's under any draft; the tool results are part of the next
prompt, which prompt lookup and the suffix drafter draft from. A call of a tool that is not
allowed is not run: the model gets an error result saying so, and the caller a record with
`allowed` False. At the step limit the last step offers no tools, so the model answers with
what it has. A call cut off by the token limit (its arguments not a whole JSON object) is not
run: the record says why and the loop ends there, since the next step would write the same cut
call.

`approve` lets a person decide each call before it runs (the app's approval dialog): it is
called on the loop's thread and may wait; a refusal is an error result the model reads, and a
cancel (Stop) during the wait or between calls ends the loop with the calls made so far.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..decoding.cancel import CancelToken
from ..decoding.events import DoneEvent, Event
from ..decoding.prompting.media import place_markers
from ..decoding.request import GenerationRequest
from ..toolcalls.reading import CallReading
from ..toolcalls.tool_calls import ToolCall
from .hub import CALL_TIMEOUT_S, McpHub, McpTool
from .results import Bounds, ToolResult, cut_text
from .toolset import Allowance, ToolSet

MAX_STEPS = 8
AGENT_SYSTEM = ("You are a helpful assistant. Call a tool when you need data; when a tool result is given, "
                "answer the user's question from it in plain language.")
REPEATED = "this exact call was already made and its result is above: answer the user from it now"
CUT_OFF = ("the answer reached its token limit while writing this call, so it was not run: "
           "raise the maximum tokens and ask again")
# (offered name, tool, arguments) -> None: run it, or the refusal the model reads
Approve = Callable[[str, McpTool, Mapping[str, Any]], "str | None"]
# (a turn's request, the loop's cancel token) -> that turn's engine events
Stream = Callable[[GenerationRequest, "CancelToken | None"], Iterator[Event]]


@dataclass(frozen=True)
class ToolCallRecord:
    """One call the model made and what became of it (`allowed` False: refused, not run)."""

    name: str
    arguments: Any
    result: str
    is_error: bool = False
    allowed: bool = True
    server: str | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments, "result": self.result, "error": self.is_error,
                "allowed": self.allowed, "server": self.server, "seconds": round(self.seconds, 3)}


@dataclass
class LoopResult:
    """The loop's end: the answer, the calls in order, the conversation, each step's stats."""

    text: str
    calls: list[ToolCallRecord] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    steps: list[DoneEvent] = field(default_factory=list)
    step_limit_reached: bool = False
    cancelled: bool = False


@dataclass(frozen=True)
class CallEvent:
    """A call has run (or was refused): the loop yields it between the engine's events."""

    record: ToolCallRecord
    kind: str = "tool_call"


@dataclass(frozen=True)
class LoopDone:
    result: LoopResult
    kind: str = "loop_done"


def _vocab(engine: Any) -> Any:
    """The llama.cpp vocabulary the auto grammar reads tokens with (None: calls read when complete)."""
    from ..llamacpp.llama import Model

    for m in (getattr(engine, "target", None), getattr(getattr(engine, "target", None), "_vocab", None)):
        if isinstance(m, Model):
            return m
    return None


class ToolLoop:
    """One engine, the running MCP servers, and which of their tools may run."""

    def __init__(self, engine: Any, hub: McpHub, allowance: Allowance, *, choice: str = "auto",
                 max_steps: int = MAX_STEPS, call_timeout: float = CALL_TIMEOUT_S, bounds: Bounds | None = None,
                 approve: Approve | None = None, stream: Stream | None = None):
        """`choice`: the first step's tool choice ("auto", "required" or a tool's name; later
        steps are "auto"), `max_steps`: generations that may call tools before the last one,
        `approve`: asked before each allowed call runs (None: the allowance alone decides),
        `stream`: how each step generates (None: `Engine.stream`, a turn of the engine's queue;
        the app passes a turn in the local server's parallel slots, slots/turn.py's `take_turn`).
        Each step's turn ends before its calls run, so a call waiting for approval holds none."""
        self.engine, self.hub, self.allowance, self.approve = engine, hub, allowance, approve
        self.stream: Stream = stream or (lambda req, cancel: engine.stream(req, cancel=cancel))
        self.choice, self.max_steps, self.call_timeout = choice, max(1, max_steps), call_timeout
        self.bounds = bounds or Bounds.for_context(engine.n_ctx)
        self.tools = ToolSet(hub.tools, self.bounds, self.count)
        self.tools.check(allowance)
        if choice not in ("auto", "required") and self.tools.tool(choice) is None:
            raise _unknown_choice(choice, self.tools)

    def count(self, text: str) -> int:
        return len(self.engine.tokens_for(text))

    def run(self, request: GenerationRequest, cancel: CancelToken | None = None) -> Iterator[Event | CallEvent | LoopDone]:
        """Yield each step's engine events and each call's `CallEvent`, then `LoopDone`.
        `request`: the question (a string, or chat messages) with its draft and sampling."""
        result = LoopResult("", messages=_messages(request))
        template = getattr(getattr(self.engine, "target", None), "chat_template", None)
        vocab = _vocab(self.engine)
        made: dict[tuple[str, str], ToolCallRecord] = {}
        repeated = False
        for step in range(self.max_steps + 1):
            last = step == self.max_steps or repeated
            defs = [] if last else self.tools.definitions
            forced = _forced(self.choice) if step == 0 else None
            reading = CallReading(defs, forced, template=template, vocab=vocab) if defs else None
            tokens = self.engine.tokens_for(result.messages, chat=True, tools=defs or None, limit=self.engine.n_ctx,
                                            parse_special=request.parse_special, media=bool(request.images))
            step_req = request.with_(prompt=tokens, chat=False, system=None)
            step_req = reading.constrain(step_req) if reading else step_req
            done = None
            for ev in self.stream(step_req, cancel):
                if isinstance(ev, DoneEvent):
                    done = ev
                yield ev
            assert done is not None
            result.steps.append(done)
            answer = reading.answer(done.text, done.tokens) if reading else None
            if answer is None or not answer.calls or (cancel is not None and cancel.cancelled):
                result.text = answer.content if answer is not None else done.text
                result.cancelled = cancel is not None and cancel.cancelled
                result.messages.append({"role": "assistant", "content": result.text})
                break
            result.messages.append({"role": "assistant", "content": answer.content,
                                    "tool_calls": [c.as_openai() for c in answer.calls]})
            repeated, cut_off = True, False
            for call in answer.calls:
                if cancel is not None and cancel.cancelled:  # Stop while a call waited for approval
                    break
                key = (call.name, _canonical(call.arguments))
                record = made.get(key)
                tool = self.tools.tool(call.name)
                if done.stats.finish_reason == "length" and not _whole(call.arguments, tool):
                    # Cut off mid-arguments by the token limit: its arguments are not what the model
                    # meant, and the next step would write the same cut call again.
                    record = ToolCallRecord(call.name, call.arguments, f"error: {CUT_OFF}", True, True,
                                            tool.server if tool is not None else None)
                    cut_off = True
                elif record is None or not record.allowed:
                    repeated = False
                    record = made[key] = self._run_call(call, tool, cancel)
                else:
                    record = ToolCallRecord(call.name, record.arguments, f"error: {REPEATED}", True, True, record.server)
                result.calls.append(record)
                result.messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name,
                                        "content": record.result})
                yield CallEvent(record)
            if cancel is not None and cancel.cancelled:
                result.text, result.cancelled = answer.content, True
                break
            if cut_off:
                result.text = answer.content
                break
            result.step_limit_reached = step + 1 == self.max_steps and not repeated
        yield LoopDone(result)

    def _run_call(self, call: ToolCall, tool: McpTool | None, cancel: CancelToken | None = None) -> ToolCallRecord:
        """Run one call (of `tool`, the offered tool it names) if allowed; any failure becomes an
        error result the model reads."""
        try:
            args = json.loads(call.arguments) if call.arguments.strip() else {}
        except ValueError:
            args = call.arguments
        if tool is None:  # the readers count only offered names; kept for safety
            return ToolCallRecord(call.name, args, f"error: no tool is named {call.name!r}", True, False)
        if not self.allowance.allows(call.name):
            return ToolCallRecord(call.name, args, f"error: the user did not allow the tool {call.name!r} to run; "
                                  "answer without it", True, False, tool.server)
        if not isinstance(args, dict):
            res = ToolResult("the arguments must be a JSON object", is_error=True)
        elif self.approve is not None and (refusal := self.approve(call.name, tool, args)) is not None:
            return ToolCallRecord(call.name, args, f"error: {refusal}", True, False, tool.server)
        else:
            began = time.monotonic()
            res = self.hub.call(tool, args, timeout=self.call_timeout, cancel=cancel)
            res = ToolResult(res.text, res.is_error, res.seconds or time.monotonic() - began)
        text = cut_text(res.for_model(), self.bounds.result, self.count)
        return ToolCallRecord(call.name, args, text, res.is_error, True, tool.server, res.seconds)


def _forced(choice: str) -> str | None:
    """A tool choice as CallReading takes it: None (auto), "" (required) or a tool's name."""
    return None if choice == "auto" else "" if choice == "required" else choice


def _whole(arguments: str, tool: McpTool | None) -> bool:
    """Whether a call's arguments were written whole: a JSON object, or none at all for a tool
    that requires none (a tool with required arguments and none written was cut before them)."""
    if not arguments.strip():
        schema = tool.input_schema if tool is not None else {}
        return not (isinstance(schema, Mapping) and schema.get("required"))
    try:
        return isinstance(json.loads(arguments), dict)
    except ValueError:
        return False


def _canonical(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True)
    except ValueError:
        return arguments


def _messages(request: GenerationRequest) -> list[dict[str, Any]]:
    """The conversation a request starts: its system prompt (or the agent's) and its question
    (or its messages)."""
    prompt = request.prompt
    if isinstance(prompt, str):
        msgs = [{"role": "user", "content": prompt}]
    elif isinstance(prompt, Sequence) and prompt and isinstance(prompt[0], dict):
        msgs = [dict(m) for m in prompt]  # type: ignore[arg-type]
    else:
        from ..errors import TandemError

        raise TandemError("the tool loop needs a question or chat messages, not token ids")
    if request.images:  # a marker per picture, where the engine puts them (the app's are in place already)
        msgs = place_markers(msgs, len(request.images))
    if not any(m.get("role") == "system" for m in msgs):
        msgs.insert(0, {"role": "system", "content": request.system or AGENT_SYSTEM})
    return msgs


def _unknown_choice(choice: str, tools: ToolSet) -> Exception:
    from ..errors import TandemError

    offered = ", ".join(sorted(tools.by_name)) or "none"
    return TandemError(f"--tool-choice names {choice!r}, which no configured server offers (offered: {offered})")
