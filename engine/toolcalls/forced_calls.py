"""Reading a grammar-forced tool call as it is written, so its arguments can stream piece by piece.

With `tool_choice` "required" or a named function, `tool_grammar` constrains the answer to
calls of the form `[<tool_call>] {"name": "<fn>", "arguments": {...}} [</tool_call>]`
(name first, arguments second: the grammar's property order). So a call's name is known
as soon as its closing quote is written, and every character after `"arguments":` up to
the object's matching brace is the arguments text: it can go out at once, with no risk of
a malformed call to take back.

The arguments are returned as the model wrote them (the grammar guarantees they are valid
JSON for the function's schema), so a stream's argument pieces join into exactly the
arguments of the same answer read whole: both come from `scan` over the same text. An
answer cut short (max_tokens, a stop string) keeps the call it was writing, its arguments
incomplete, as OpenAI returns one with finish_reason "length".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

from .tool_calls import HERMES_CLOSE, ParsedAnswer, ToolCall, json_end, new_call_id  # noqa: F401 (json_end: re-exported)

# A call's start (a close tag may be left from the call before, when it was read unfinished),
# in a `<tool_call>` tag, a fenced block (the auto grammar's forms) or bare
_NAME = re.compile(r'\s*(?:</tool_call>\s*)?(?:<tool_call>\s*|```(?:json)?[ \t]*\n\s*)?\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")')
_ARGS = re.compile(r'\s*,\s*"(?:arguments|parameters)"\s*:\s*')
_CLOSE = re.compile(r"\s*\}(?:\s*(?:" + re.escape(HERMES_CLOSE) + "|```))?")


@dataclass(frozen=True)
class CallSoFar:
    """One call as far as it is written: its name, its arguments text so far, whether the
    call is complete (`done`), and where it starts and ends in the answer."""

    name: str
    arguments: str
    done: bool
    start: int
    end: int


class JsonEnd:
    """Where the JSON object or array starting at `start` ends, read as the text grows: each
    character is looked at once, so a long argument streams in linear time."""

    def __init__(self, start: int):
        self.j, self.depth, self.in_string, self.escaped = start, 0, False, False
        self.end: int | None = None

    def advance(self, text: str) -> int | None:
        """The end (just past the closing bracket) once it is written, else None."""
        while self.end is None and self.j < len(text):
            c = text[self.j]
            self.j += 1
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif c == "\\":
                    self.escaped = True
                elif c == '"':
                    self.in_string = False
            elif c == '"':
                self.in_string = True
            elif c in "{[":
                self.depth += 1
            elif c in "}]":
                self.depth -= 1
                if self.depth == 0:
                    self.end = self.j
        return self.end


class Scanner:
    """The calls of a forced answer read as it grows (`advance(text)` with ever longer text):
    the complete calls are kept, only the one being written is read further."""

    def __init__(self) -> None:
        self.done: list[CallSoFar] = []
        self.pos = 0  # where the next call starts
        self.current: tuple[int, str, int, JsonEnd] | None = None  # (start, name, arguments start, their end)

    def advance(self, text: str) -> list[CallSoFar]:
        """The calls in order; a call appears once its name is complete. Stops at the first
        place the text is not (yet) a call."""
        while True:
            if self.current is None:
                head = _NAME.match(text, self.pos)
                if head is None:
                    return self.done
                name = json.loads(head.group(1))
                args = _ARGS.match(text, head.end())
                if args is None or args.end() == len(text) or text[args.end()] not in "{[":
                    return self.done + [CallSoFar(name, "", False, head.start(), len(text))]  # arguments not begun
                self.current = (head.start(), name, args.end(), JsonEnd(args.end()))
            start, name, v, arguments = self.current
            end = arguments.advance(text)
            close = None if end is None else _CLOSE.match(text, end)
            if close is None:  # still writing the call (or cut short in it)
                return self.done + [CallSoFar(name, text[v:end or len(text)], False, start, len(text))]
            self.done.append(CallSoFar(name, text[v:end], True, start, close.end()))
            self.pos, self.current = close.end(), None


def scan(text: str) -> list[CallSoFar]:
    """The calls in a forced answer (or a prefix of one), in order (see `Scanner`)."""
    return Scanner().advance(text)


def read_forced(text: str, ids: list[str] | None = None) -> ParsedAnswer:
    """A whole forced answer: its calls (the last one cut short, when it is), and the text
    outside them as content ('' when only whitespace). `ids`: the calls' ids already sent."""
    found = scan(text)
    if not found:
        return ParsedAnswer(text)
    ids = list(ids or [])
    ids += [new_call_id() for _ in range(len(found) - len(ids))]
    calls = tuple(ToolCall(c.name, c.arguments, id=i) for c, i in zip(found, ids))
    outside = text[:found[0].start] + "".join(text[a.end:b.start] for a, b in zip(found, found[1:])) + text[found[-1].end:]
    return ParsedAnswer(outside if outside.strip() else "", calls, cut_short=not found[-1].done)


class ForcedCallStream:
    """Splits a forced answer as it streams: each call's header as soon as its name is
    known, then each new piece of its arguments (`deltas()` after each `feed`). Nothing
    streams as content; `finish()` returns what the whole answer holds."""

    cut_short = False

    def __init__(self, first_index: int = 0) -> None:
        self.first = first_index  # the calls' indices in the answer start here (calls before this part)
        self.text = ""
        self.scanner = Scanner()
        self.ids: list[str] = []  # one per call whose header went out
        self.sent: list[int] = []  # characters of each call's arguments already sent
        self._ready: list[dict[str, Any]] = []

    def feed(self, piece: str, tokens: Sequence[int] = ()) -> str:
        self.text += piece
        for i, call in enumerate(self.scanner.advance(self.text)):
            if i == len(self.ids):
                self.ids.append(new_call_id())
                self.sent.append(0)
                self._ready += ToolCall(call.name, "", id=self.ids[i]).stream_items(self.first + i)
            if len(call.arguments) > self.sent[i]:
                self._ready.append({"index": self.first + i, "function": {"arguments": call.arguments[self.sent[i]:]}})
                self.sent[i] = len(call.arguments)
        return ""

    def deltas(self) -> list[dict[str, Any]]:
        """The `delta.tool_calls` items ready to go (each returned once)."""
        out, self._ready = self._ready, []
        return out

    def finish(self) -> tuple[str, tuple[ToolCall, ...]]:
        answer = read_forced(self.text, self.ids)
        assert self.sent == [len(c.arguments) for c in answer.calls]  # every piece went out as it came
        self.cut_short = answer.cut_short
        return answer.content, answer.calls
