"""Reading a request body as JSON, with one depth limit for every API.

Python's `json.loads` recurses once per nesting level, so a body of 100,000 `[` was a
`RecursionError` (a 500) where it was parsed, and a deeply nested value that did parse could
still overflow the stack in code that walks it (validation, schemas, `json.dumps`). The
depth is therefore measured first, without recursion and at C speed (escapes dropped, strings
cut out by splitting at the quotes, the brackets left summed with `itertools.accumulate`:
a third of what parsing the same body costs), and a body nested deeper than `MAX_DEPTH` is
refused before any parser sees it. `BodyLimit` (the middleware every request passes)
checks every body this way; `parse_object` is the reader of the routes that parse their
own body (Responses, Ollama, Anthropic); `replaying` hands a body received whole to the app.
"""

from __future__ import annotations

import json
from itertools import accumulate
from typing import Any, Awaitable, Callable

MAX_DEPTH = 128  # arrays and objects inside one another; a deep tool schema nests ~60
EMPTY = "the request body is empty; send a JSON object (with 'Content-Type: application/json')"

_BRACKETS = b"[]{}"
_OTHER_BYTES = bytes(b for b in range(256) if b not in _BRACKETS)
_STEP = [0] * 256
for _b in b"[{":
    _STEP[_b] = 1
for _b in b"]}":
    _STEP[_b] = -1


class BodyError(ValueError):
    """The body is not what the route reads: the message says why, in one line."""


def too_deep_message(limit: int = MAX_DEPTH) -> str:
    return (f"the request body nests arrays and objects more than {limit} levels deep; "
            f"this server reads at most {limit}")


def _utf8(raw: bytes) -> bytes:
    """The body as UTF-8 (JSON may come as UTF-16 or UTF-32, whose bytes the scan cannot read)."""
    encoding = json.detect_encoding(raw)
    return raw if encoding == "utf-8" else raw.decode(encoding, "replace").encode("utf-8", "replace")


def depth(raw: bytes) -> int:
    """How deep arrays and objects nest in a JSON text (brackets inside strings not counted)."""
    if raw.count(b"[") + raw.count(b"{") == 0:
        return 0
    text = _utf8(raw).replace(b"\\\\", b"").replace(b'\\"', b"")  # escapes pair left to right, as JSON reads them
    outside = b"".join(text.split(b'"')[::2])  # every other piece lies between quotes: a string's text
    brackets = outside.translate(None, _OTHER_BYTES)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def too_deep(raw: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether a body nests deeper than `limit` (fast when it has fewer opening brackets)."""
    return raw.count(b"[") + raw.count(b"{") > limit and depth(raw) > limit


def parse(raw: bytes) -> Any:
    """The JSON value of a body, or BodyError: empty, nested too deep, or not JSON."""
    if not raw.strip():
        raise BodyError(EMPTY)
    if too_deep(raw):
        raise BodyError(too_deep_message())
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise BodyError(f"the request body is not valid JSON ({e})") from None


def parse_object(raw: bytes) -> dict[str, Any]:
    """The body's JSON object, or BodyError (a JSON array or string is not a request)."""
    body = parse(raw)
    if not isinstance(body, dict):
        raise BodyError("the request body must be a JSON object")
    return body


def replaying(body: bytes, receive: Any) -> Callable[[], Awaitable[Any]]:
    """A `receive` that hands the app the body, received whole already, then passes the
    client's later messages (a disconnect) through."""
    replayed = False

    async def replay() -> Any:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
