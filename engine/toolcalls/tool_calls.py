"""Tool calls in a model's answer: find them, check them, and split a stream around them.

Small models write a call in many forms; this reads the ones llama.cpp's and Ollama's
parsers read (llama.cpp's Hermes 2 Pro / Llama 3.x / Mistral Nemo / Functionary parsers):

* Qwen 2.5 / Qwen 3 / Hermes (and Tandem's fallback prompt): `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`,
  also wrapped in `<function_call>`, `<tool>`, `<tools>`, `<response>`, `<json>`, `<xml>` or `<JSON>`;
* a fenced block: ```` ```json ```` (or ```` ```xml ````, or a bare ```` ``` ````) holding such a call,
  a list of calls, or one of the tags above;
* a bare JSON object naming a function (`{"name": ..., "arguments"|"parameters": {...}}`,
  also OpenAI's `{"type": "function", "function": {...}}`) or a list of them, several joined
  by `;` or `,`: Llama 3.x writes these, after `<|python_tag|>` when it writes that token;
* Functionary / Llama 3.1: `<function=NAME>{...}</function>` and `<function name="NAME">{...}</function>`;
* Mistral: `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]` and `[TOOL_CALLS]NAME[ARGS]{...}`
  (the marker is a special token: it may be rendered empty, leaving a bare list).

A call counts only when its JSON parses, names a function that was offered and its
arguments are an object valid for that function's `parameters` schema; anything else is
plain text (a malformed call is never an error). Text before, between and after calls is
the answer's content.

Streaming and parsing the whole answer agree by construction: both are `_scan`, which reads
the answer left to right and decides each place a call could start as a call, as text, or
"not yet" (the answer so far ends inside it). A decision never changes as the answer grows,
so the stream sends text and calls as soon as they are decided and holds only what is not
(e.g. a line that begins with ```` ``` ````, `{` or `<` until it turns out to be text or a call).
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Union

HERMES_OPEN, HERMES_CLOSE = "<tool_call>", "</tool_call>"
MISTRAL_MARK = "[TOOL_CALLS]"
PYTHON_TAG = "<|python_tag|>"
WRAPPERS = ("<tool_call>", "<function_call>", "<tool>", "<tools>", "<response>", "<json>", "<xml>", "<JSON>")
FUNCTION_EQ, FUNCTION_NAME, FUNCTION_CLOSE = "<function=", '<function name="', "</function>"
FENCE = "```"
FENCE_LANGS = ("", "json", "JSON", "xml")
ANGLE_MARKERS = WRAPPERS + (FUNCTION_EQ, FUNCTION_NAME, PYTHON_TAG)
_DECODER = json.JSONDecoder()
_OPEN = re.compile(r"[`<\[{]")
_WS = re.compile(r"\s*")
_SEP = re.compile(r"[\s;,]*")
_FUNC_EQ = re.compile(r"<function=([A-Za-z0-9_.\-]+)>")
_FUNC_NAME = re.compile(r'<function name="([A-Za-z0-9_.\-]+)">')
_FUNC_PARTIAL = re.compile(r'<function(?:=[A-Za-z0-9_.\-]*|\s(?:n(?:a(?:m(?:e(?:=(?:"[A-Za-z0-9_.\-]*"?)?)?)?)?)?)?)?\Z')
_FENCE_HEAD = re.compile(r"```([A-Za-z_]*)[ \t]*\n")
_FENCE_PARTIAL = re.compile(r"```([A-Za-z_]*)([ \t]*)\Z")
_MISTRAL_NAME = re.compile(r"([A-Za-z0-9_.\-]+)(?:\[CALL_ID\][A-Za-z0-9_\-]*)?\[ARGS\]")
_MISTRAL_PARTIAL = re.compile(r"[A-Za-z0-9_.\-\[\]]{0,200}\Z")
_CALL_KEYS = ("name", "type", "function")
# What a call object may hold besides its name: more (a "response", a "result") is not a call.
_CALL_FIELDS = {"name", "arguments", "parameters", "id", "type"}
_KEY_END = re.compile(r'\{\s*"(?:name|type|function)"\s*:')
_NAME_FIRST = re.compile(r'\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")')
_LIST_HEAD = re.compile(r"\[\s*(?=\{)")
_LIST_PARTIAL = re.compile(r"\[\s*\Z")
_HEAD_PARTIAL = re.compile(r'\{\s*(?:"([a-z]*)(")?\s*)?\Z')


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


class OfferedTools:
    """The functions a request offers: for each name, a check of its arguments (the server's
    checks them against the `parameters` schema: `tool_args`). None: any name."""

    def __init__(self, checks: Mapping[str, Callable[[Any], bool]] | None):
        self.checks = None if checks is None else dict(checks)

    def accepts(self, name: str, arguments: Any) -> bool:
        if self.checks is None:
            return True
        check = self.checks.get(name)
        return check is not None and check(arguments)

    def knows(self, name: str) -> bool:
        return self.checks is None or name in self.checks


OfferedLike = Union[OfferedTools, Iterable[str], None]


def _offered(offered: OfferedLike) -> OfferedTools:
    if isinstance(offered, OfferedTools):
        return offered
    return OfferedTools(None if offered is None else {n: (lambda args: True) for n in offered})


# -- reading one candidate ------------------------------------------------------------------------
_STRING_BODY = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
_OUTSIDE = re.compile(r'[^"{}\[\]]*')


def _json_end_from(text: str, j: int, depth: int, in_string: bool) -> tuple[int | None, int, int, bool]:
    """Read a JSON value on from j: (its end, once its last bracket closes, else None) and
    where the reading stopped (position, depth, inside a string), to go on from there."""
    n = len(text)
    while j < n:
        if in_string:
            j = _STRING_BODY.match(text, j).end()
            if j >= n or text[j] == "\\":  # the answer ends inside the string (or an escape)
                return None, j, depth, True
            j, in_string = j + 1, False
            continue
        j = _OUTSIDE.match(text, j).end()
        if j >= n:
            break
        c = text[j]
        j += 1
        if c == '"':
            in_string = True
        elif c in "{[":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return j, j, 0, False
    return None, j, depth, in_string


def json_end(text: str, i: int) -> int | None:
    """Where the JSON object or array starting at text[i] ends (just past its closing
    bracket), or None when it is not complete yet (strings are skipped whole)."""
    return _json_end_from(text, i, 0, False)[0]


class _Verdict:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


TEXT, PENDING = _Verdict("TEXT"), _Verdict("PENDING")  # not a call / the answer ends inside it


@dataclass(frozen=True)
class _TextTo:
    """Not a call, and neither is anything inside it up to `end` (a tag or fence whose call
    is not closed as it must be: llama.cpp reads all of it as text)."""

    end: int


Read = Union[tuple[list[ToolCall], int], _Verdict, _TextTo]


def _prefix_of(text: str, i: int, markers: Iterable[str]) -> bool:
    """The answer (so far) ends inside one of `markers` begun at i."""
    rest = text[i:i + 32]  # markers are shorter: a longer rest is no marker's prefix
    return any(len(rest) < len(m) and m.startswith(rest) for m in markers)


def _head_prefix(text: str, i: int) -> bool:
    """text[i:] (the answer's end) could still grow into `{"name":` (or "type" / "function")."""
    m = _HEAD_PARTIAL.match(text, i)
    if m is None:
        return False
    key, closed = m.group(1), m.group(2)
    if key is None:
        return True
    return key in _CALL_KEYS if closed else any(k.startswith(key) for k in _CALL_KEYS)


def _call(obj: Any, offered: OfferedTools) -> ToolCall | None:
    """One call object -> ToolCall, or None: not a call of an offered function with valid arguments."""
    if isinstance(obj, dict) and isinstance(obj.get("function"), dict) and "name" not in obj:
        obj = obj["function"]  # OpenAI's own shape
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    if set(obj) - _CALL_FIELDS:  # e.g. a call echoed with its "response": a report, not a new call
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    if not isinstance(args, dict) or not offered.accepts(obj["name"], args):
        return None
    return ToolCall(obj["name"], json.dumps(args, ensure_ascii=False))


def _json_value(text: str, i: int, cx: "_Reading") -> tuple[Any, int] | _Verdict:
    end = cx.json_end(text, i)
    if end is None:
        return TEXT if cx.final else PENDING
    try:
        value, j = _DECODER.raw_decode(text, i)
    except ValueError:
        return TEXT
    return (value, j) if j == end else TEXT


def _one(text: str, i: int, cx: "_Reading") -> Read:
    """One call object, or a non-empty list of them, at text[i]."""
    if i >= len(text):
        return TEXT if cx.final else PENDING
    if text[i] == "[":
        head = _LIST_HEAD.match(text, i)
        if head is None:
            return PENDING if not cx.final and _LIST_PARTIAL.match(text, i) else TEXT
        inner = _one(text, head.end(), cx)  # the first call decides early
        if not isinstance(inner, tuple):
            return inner
    elif text[i] == "{":
        if not _KEY_END.match(text, i):
            return PENDING if not cx.final and _head_prefix(text, i) else TEXT
        named = _NAME_FIRST.match(text, i)
        if named and not cx.offered.knows(json.loads(named.group(1))):
            return TEXT
    else:
        return TEXT
    got = _json_value(text, i, cx)
    if not isinstance(got, tuple):
        return got
    value, end = got
    items = value if isinstance(value, list) else [value]
    calls = [_call(v, cx.offered) for v in items]
    if not calls or any(c is None for c in calls):
        return TEXT
    return calls, end  # type: ignore[return-value]


def _objects(text: str, i: int, cx: "_Reading") -> Read:
    """Calls (objects or lists) from text[i], joined by `;`, `,` or whitespace: the first
    must be a call; the run ends where what follows is not one."""
    got = _one(text, _WS.match(text, i).end(), cx)
    if not isinstance(got, tuple):
        return got
    calls, end = got
    while True:
        j = _SEP.match(text, end).end()
        if j == len(text):
            return (calls, end) if cx.final else PENDING
        if text[j] not in "{[":
            return calls, end
        more = _one(text, j, cx)
        if more is PENDING:
            return PENDING
        if more is TEXT:
            return calls, end
        calls, end = calls + more[0], more[1]  # type: ignore[index]


def _closed(text: str, calls: list[ToolCall], end: int, close: str, cx: "_Reading") -> Read:
    """The calls, once `close` follows them (or the answer ends there)."""
    j = _WS.match(text, end).end()
    if text.startswith(close, j):
        return calls, j + len(close)
    if j == len(text):
        return (calls, j) if cx.final else PENDING
    return PENDING if not cx.final and close.startswith(text[j:]) else _TextTo(j)


def _wrapped(text: str, s: int, cx: "_Reading") -> Read:
    """`<tag>` call(s) `</tag>`, the close tag left out only at the answer's end."""
    tag = next(t for t in WRAPPERS if text.startswith(t, s))
    got = _one(text, _WS.match(text, s + len(tag)).end(), cx)
    return got if not isinstance(got, tuple) else _closed(text, got[0], got[1], "</" + tag[1:], cx)


def _function_tag(text: str, s: int, cx: "_Reading") -> Read:
    """`<function=NAME>{arguments}</function>` or `<function name="NAME">...`."""
    m = _FUNC_EQ.match(text, s) or _FUNC_NAME.match(text, s)
    if m is None:
        partial = _FUNC_PARTIAL.match(text, s) or _prefix_of(text, s, WRAPPERS)  # <function_call> too
        return PENDING if not cx.final and partial else TEXT
    if not cx.offered.knows(m.group(1)):
        return TEXT
    i = _WS.match(text, m.end()).end()
    if i == len(text):
        return TEXT if cx.final else PENDING
    if text[i] != "{":
        return TEXT
    got = _json_value(text, i, cx)
    if not isinstance(got, tuple):
        return got
    call = _call({"name": m.group(1), "arguments": got[0]}, cx.offered)
    return TEXT if call is None else _closed(text, [call], got[1], FUNCTION_CLOSE, cx)


def _mistral(text: str, s: int, cx: "_Reading") -> Read:
    i = _WS.match(text, s + len(MISTRAL_MARK)).end()
    if i < len(text) and text[i] in "{[":
        return _objects(text, i, cx)
    m = _MISTRAL_NAME.match(text, i)
    if m is None:
        return PENDING if not cx.final and _MISTRAL_PARTIAL.match(text, i) else TEXT
    if not cx.offered.knows(m.group(1)):
        return TEXT
    if m.end() == len(text):
        return TEXT if cx.final else PENDING
    got = _json_value(text, m.end(), cx) if text[m.end()] == "{" else TEXT
    if not isinstance(got, tuple):
        return got
    call = _call({"name": m.group(1), "arguments": got[0]}, cx.offered)
    return TEXT if call is None else ([call], got[1])


def _inside_fence(text: str, i: int, cx: "_Reading") -> Read:
    if i >= len(text):
        return TEXT if cx.final else PENDING
    if text[i] == "<":
        if any(text.startswith(t, i) for t in WRAPPERS):
            return _wrapped(text, i, cx)
        if text.startswith("<function", i):
            return _function_tag(text, i, cx)
        return PENDING if not cx.final and _prefix_of(text, i, WRAPPERS + (FUNCTION_EQ, FUNCTION_NAME)) else TEXT
    return _objects(text, i, cx)


def _fence_prefix(text: str, s: int) -> bool:
    """text[s:] (the answer's end) could still grow into a fence that may hold a call."""
    if text[s:s + 3] in ("`", "``"):
        return True
    m = _FENCE_PARTIAL.match(text, s)
    if m is None:
        return False
    lang, spaced = m.group(1), bool(m.group(2))
    return lang in FENCE_LANGS if spaced else any(x.startswith(lang) for x in FENCE_LANGS)


def _fenced(text: str, s: int, cx: "_Reading") -> Read:
    """```` ```json ```` (or xml, or none) + a call + ```` ``` ```` (left out only at the answer's end)."""
    m = _FENCE_HEAD.match(text, s)
    if m is None:
        return PENDING if not cx.final and _fence_prefix(text, s) else TEXT
    if m.group(1) not in FENCE_LANGS:
        return TEXT
    got = _inside_fence(text, _WS.match(text, m.end()).end(), cx)
    return got if not isinstance(got, tuple) else _closed(text, got[0], got[1], FENCE, cx)


def _read(text: str, s: int, cx: "_Reading") -> Read:
    """What starts at text[s] (one of ` < [ {): calls and where they end, TEXT or PENDING."""
    c = text[s]
    if c == "`":
        return _fenced(text, s, cx)
    if c == "<":
        if any(text.startswith(t, s) for t in WRAPPERS):
            return _wrapped(text, s, cx)
        if text.startswith("<function", s):
            return _function_tag(text, s, cx)
        if text.startswith(PYTHON_TAG, s):
            return _objects(text, s + len(PYTHON_TAG), cx)
        return PENDING if not cx.final and _prefix_of(text, s, ANGLE_MARKERS) else TEXT
    if c == "[" and (text.startswith(MISTRAL_MARK, s) or _prefix_of(text, s, (MISTRAL_MARK,))):
        if text.startswith(MISTRAL_MARK, s):
            return _mistral(text, s, cx)
        return TEXT if cx.final else PENDING
    return _objects(text, s, cx)


@dataclass(frozen=True)
class _Segment:
    start: int
    end: int
    calls: tuple[ToolCall, ...] = ()  # none: text


class _Reading:
    """One reading of an answer: the functions offered, whether the answer is complete, and
    how far each JSON value held so far has been read (a stream reads a held call again as
    each piece arrives: it goes on from where it stopped, so a long call costs linear time)."""

    def __init__(self, offered: OfferedTools):
        self.offered = offered
        self.final = False
        self._ends: dict[int, tuple[int, int, bool]] = {}  # value start -> where its reading stopped

    def json_end(self, text: str, i: int) -> int | None:
        end, *stopped = _json_end_from(text, *self._ends.get(i, (i, 0, False)))
        if end is None:
            self._ends[i] = tuple(stopped)  # type: ignore[assignment]
        return end


def _scan(text: str, pos: int, cx: _Reading) -> tuple[list[_Segment], int]:
    """The decided segments of text[pos:] (text and calls, in order) and where the undecided
    rest begins (len(text) when `cx.final`: the answer is complete, everything is decided)."""
    segments: list[_Segment] = []
    i = pos
    while True:
        m = _OPEN.search(text, i)
        if m is None:
            if pos < len(text):
                segments.append(_Segment(pos, len(text)))
            return segments, len(text)
        s = m.start()
        got = _read(text, s, cx)
        if got is TEXT or isinstance(got, _TextTo):
            i = got.end if isinstance(got, _TextTo) else s + 1
            continue
        if s > pos:
            segments.append(_Segment(pos, s))
        if got is PENDING:
            return segments, s
        calls, end = got  # type: ignore[misc]
        segments.append(_Segment(s, end, tuple(calls)))
        pos = i = end


def parse(text: str, offered: OfferedLike = None) -> ParsedAnswer:
    """The answer's tool calls and the text outside them (the whole text when there is none).
    `offered`: the functions offered (`OfferedTools`, or their names: then arguments are not
    checked; None: any name)."""
    cx = _Reading(_offered(offered))
    cx.final = True
    segments, _ = _scan(text, 0, cx)
    content = "".join(text[g.start:g.end] for g in segments if not g.calls)
    return ParsedAnswer(content, tuple(c for g in segments for c in g.calls))


class ToolCallStream:
    """Splits a streamed answer: `feed(piece)` returns the text that can go out now as content,
    and `deltas()` the calls decided so far (OpenAI's `delta.tool_calls` items); `finish()`
    returns (the rest of the content, all the calls) once the answer is complete."""

    cut_short = False  # a free call is whole or it is text

    def __init__(self, offered: OfferedLike = None):
        self.reading = _Reading(_offered(offered))
        self.text = ""
        self.pos = 0  # text[:pos] is decided and gone out
        self.calls: list[ToolCall] = []
        self._ready: list[dict[str, Any]] = []

    def _advance(self, final: bool) -> str:
        self.reading.final = final
        segments, self.pos = _scan(self.text, self.pos, self.reading)
        out = []
        for g in segments:
            if not g.calls:
                out.append(self.text[g.start:g.end])
            for call in g.calls:
                self._ready += call.stream_items(len(self.calls))
                self.calls.append(call)
        return "".join(out)

    def feed(self, piece: str, tokens: Iterable[int] = ()) -> str:
        """`tokens`: the ids that wrote `piece` (read only by streams that follow them)."""
        self.text += piece
        return self._advance(final=False)

    def finish(self) -> tuple[str, tuple[ToolCall, ...]]:
        return self._advance(final=True), tuple(self.calls)

    def deltas(self) -> list[dict[str, Any]]:
        """The `delta.tool_calls` items ready to go (each returned once)."""
        out, self._ready = self._ready, []
        return out
