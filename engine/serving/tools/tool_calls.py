"""Tool calls in a model's answer: find them, check them, and split a stream around them.

Models of the catalog's families write a tool call in one of these forms:

* Qwen 2.5 / Qwen 3 / Hermes (and Tandem's fallback prompt): `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`,
  one block per call, text allowed before and between;
* Llama 3.x: the answer is `{"name": ..., "parameters": {...}}` (several joined by `;`),
  after `<|python_tag|>` when the model writes it (a special token: often rendered empty);
* Mistral: `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]` (the marker, too, may be empty).

A call counts only when its JSON parses, names a function that was offered and has an
object for arguments; anything else leaves the whole answer as plain text (a malformed
call is never an error). Parsing the whole answer and splitting it as it streams agree by
construction: the stream sends text up to the first thing that could start a call, holds
the rest, and at the end sends what `parse` finds in the whole answer.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any, Iterable

HERMES_OPEN, HERMES_CLOSE = "<tool_call>", "</tool_call>"
MISTRAL_MARK = "[TOOL_CALLS]"
PYTHON_TAG = "<|python_tag|>"
MARKERS = (HERMES_OPEN, MISTRAL_MARK, PYTHON_TAG)
_DECODER = json.JSONDecoder()


def new_call_id() -> str:
    return "call_" + secrets.token_hex(12)


@dataclass(frozen=True)
class ToolCall:
    """One call: the function's name and its arguments as JSON text (OpenAI's shape)."""

    name: str
    arguments: str
    id: str = field(default_factory=new_call_id, compare=False)

    def as_openai(self, index: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "type": "function",
                               "function": {"name": self.name, "arguments": self.arguments}}
        if index is not None:
            out["index"] = index
        return out

    def stream_items(self, index: int) -> list[dict[str, Any]]:
        """The call as OpenAI streams it in `delta.tool_calls`: index, id, type and name first
        (arguments ''), then the arguments."""
        head = {"index": index, "id": self.id, "type": "function", "function": {"name": self.name, "arguments": ""}}
        return [head] + ([{"index": index, "function": {"arguments": self.arguments}}] if self.arguments else [])


@dataclass(frozen=True)
class ParsedAnswer:
    """An answer split into its text (outside the calls) and its tool calls (none: plain text);
    `cut_short`: the last call was still being written when the answer ended (forced calls only)."""

    content: str
    calls: tuple[ToolCall, ...] = ()
    cut_short: bool = False


class _Malformed(ValueError):
    pass


def _call(obj: Any, names: frozenset[str] | None) -> ToolCall:
    """One call object -> ToolCall, or _Malformed saying why."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        raise _Malformed("a call is an object with a string 'name'")
    name = obj["name"]
    if names is not None and name not in names:
        raise _Malformed(f"{name!r} is not an offered function")
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            raise _Malformed("arguments are not JSON") from None
    if not isinstance(args, dict):
        raise _Malformed("arguments are not a JSON object")
    return ToolCall(name, json.dumps(args, ensure_ascii=False))


def _skip(text: str, i: int, chars: str = " \t\r\n") -> int:
    while i < len(text) and text[i] in chars:
        i += 1
    return i


def _objects(text: str, i: int, names: frozenset[str] | None) -> list[ToolCall]:
    """Call objects (or lists of them) from text[i:] to its end, separated by `;`, `,` or whitespace."""
    calls: list[ToolCall] = []
    i = _skip(text, i)
    while i < len(text):
        try:
            value, i = _DECODER.raw_decode(text, i)
        except ValueError:
            raise _Malformed("not JSON") from None
        calls.extend(_call(v, names) for v in (value if isinstance(value, list) else [value]))
        i = _skip(text, i, " \t\r\n;,")
    if not calls:
        raise _Malformed("no call after the marker")
    return calls


def _hermes(text: str, start: int, names: frozenset[str] | None) -> tuple[str, list[ToolCall]]:
    """`<tool_call>` blocks from `start`: (the text between and after them, the calls)."""
    rest, calls, i = [], [], start
    while i < len(text):
        j = text.find(HERMES_OPEN, i)
        if j < 0:
            rest.append(text[i:])
            break
        rest.append(text[i:j])
        k = _skip(text, j + len(HERMES_OPEN))
        try:
            value, k = _DECODER.raw_decode(text, k)
        except ValueError:
            raise _Malformed("a <tool_call> block is not JSON") from None
        calls.extend(_call(v, names) for v in (value if isinstance(value, list) else [value]))
        k = _skip(text, k)
        if text.startswith(HERMES_CLOSE, k):
            k += len(HERMES_CLOSE)
        elif k < len(text):  # the close tag may be missing only at the very end
            raise _Malformed("a <tool_call> block is not closed")
        i = k
    return "".join(rest), calls


def hold_point(text: str) -> int:
    """Where a tool call could begin in `text`: the first marker, a marker's prefix at the
    end, or 0 when the answer starts (after whitespace) with `{` or `[` (a bare JSON call)."""
    lead = text.lstrip()
    if not lead or lead[0] in "{[":  # nothing yet but whitespace, or a bare JSON call
        return 0
    first = min((p for p in (text.find(m) for m in MARKERS) if p >= 0), default=-1)
    if first >= 0:
        return first
    for n in range(min(len(text), max(map(len, MARKERS)) - 1), 0, -1):
        if any(m.startswith(text[-n:]) for m in MARKERS):
            return len(text) - n
    return len(text)


def parse(text: str, names: Iterable[str] | None = None) -> ParsedAnswer:
    """The answer's tool calls and the text outside them; the whole text and no calls when
    there is none or one is malformed. `names`: the functions offered (others are not calls)."""
    allowed = None if names is None else frozenset(names)
    start = hold_point(text)
    if start >= len(text):
        return ParsedAnswer(text)
    head, tail = text[:start], text[start:]
    try:
        if tail.startswith(HERMES_OPEN):
            rest, calls = _hermes(text, start, allowed)
            return ParsedAnswer(head + rest, tuple(calls))
        for mark in (MISTRAL_MARK, PYTHON_TAG):
            if tail.startswith(mark):
                return ParsedAnswer(head, tuple(_objects(text, start + len(mark), allowed)))
        if start == 0 and text.lstrip()[:1] in ("{", "["):
            return ParsedAnswer("", tuple(_objects(text, 0, allowed)))
    except _Malformed:
        pass
    return ParsedAnswer(text)


class ToolCallStream:
    """Splits a streamed answer: `feed(piece)` returns the text that can go out now as content;
    `finish()` returns (the rest of the content, the calls) once the answer is complete.

    Only what could start a call is held back, so text before a call streams as usual; the
    calls go out (`deltas()`) only once the answer is complete and they are checked."""

    cut_short = False  # a free call is whole or it is text

    def __init__(self, names: Iterable[str] | None = None):
        self.names = None if names is None else frozenset(names)
        self.text = ""
        self.sent = 0  # characters of `text` already sent as content
        self.holding = False  # a call may have begun: nothing more goes out until the end
        self._ready: list[dict[str, Any]] = []

    def feed(self, piece: str) -> str:
        self.text += piece
        if self.holding:
            return ""
        point = hold_point(self.text)
        if point < len(self.text) and (point == 0 and self.text.lstrip()[:1] in ("{", "[")
                                       or any(self.text.startswith(m, point) for m in MARKERS)):
            self.holding = True
        out = self.text[self.sent:max(point, self.sent)]
        self.sent = max(point, self.sent)
        return out

    def finish(self) -> tuple[str, tuple[ToolCall, ...]]:
        answer = parse(self.text, self.names)
        assert answer.content.startswith(self.text[:self.sent])  # what went out is the content's start
        self._ready = [item for i, c in enumerate(answer.calls) for item in c.stream_items(i)]
        return answer.content[self.sent:], answer.calls

    def deltas(self) -> list[dict[str, Any]]:
        """The `delta.tool_calls` items ready to go (each returned once): none before `finish`."""
        out, self._ready = self._ready, []
        return out
