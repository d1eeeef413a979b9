"""What the APIs translated onto the chat request share: their body read with the one reader
and its limits, the chat or text request built from it (a 400 naming the first bad field),
Tandem's own fields, and Ollama's clock.

Responses, Anthropic and Ollama turn their body into a `ChatCompletionRequest` (or a
`CompletionRequest`) and hand it to the answer core (`answer.AnswerCore.begin`), which runs
it exactly as `/v1/chat/completions`: the same checks, queue place, prompt rendering, tool
offer and parsing, grammar, speculation and cancellation. What comes back are the core's
neutral events, which each API writes in its own form.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import Request
from pydantic import BaseModel, ValidationError

from ....toolcalls.tool_calls import ToolCall
from ....decoding.events import TokenEvent
from ..doors import json_body
from ....documents.images import ImageError, image_from_url
from ..errors import ApiError, validation_message
from ..wire import provenance_items

EXTENSIONS = ("draft", "lookahead", "provenance", "library")  # Tandem's own fields, accepted by every API


async def read_body(request: Request) -> dict[str, Any]:
    """The request's JSON object (read by `json_body`, the depth limit included), or a 400 saying
    what is wrong with it."""
    try:
        return json_body.parse_object(await request.body())
    except json_body.BodyError as e:
        raise ApiError(400, str(e))


def validate(model: type[BaseModel], data: Any) -> Any:
    """`model` read from `data`, or a 400 naming the first offending field."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        message, param = validation_message(e.errors()[0])
        raise ApiError(400, message, param=param, code="invalid_value")


def extensions(source: dict[str, Any]) -> dict[str, Any]:
    """Tandem's speculation fields present in `source` (draft, lookahead, provenance)."""
    return {k: source[k] for k in EXTENSIONS if source.get(k) is not None}


def now_iso() -> str:
    """The current UTC time as RFC 3339 with nanosecond-style precision, as Ollama writes it."""
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int((t % 1) * 1e9):09d}Z"


def provenance(req: Any, tokens: list[TokenEvent]) -> list[dict[str, Any]] | None:
    """Where these tokens came from, when the request asked (`provenance`) and there are any."""
    return provenance_items(tokens) if req.provenance and tokens else None


def calls_as_dicts(calls: tuple[ToolCall, ...]) -> list[dict[str, Any]]:
    """Tool calls as {"id", "name", "arguments"} (arguments: JSON text)."""
    return [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]


def data_uri(media_type: str | None, b64: str) -> str:
    """A data: URI of base64 `b64` (what Anthropic's and Ollama's picture forms carry)."""
    return f"data:{media_type or 'application/octet-stream'};base64,{b64}"


def image_part(url: Any, where: str) -> dict[str, Any]:
    """The chat request's `image_url` part for a picture another API sent, checked now so a
    refusal names that API's field (`where`)."""
    try:
        image_from_url(url)
    except ImageError as e:
        raise ApiError(400, f"{where}: {e}", param=where, code="invalid_value") from None
    return {"type": "image_url", "image_url": {"url": url}}


def content_of(items: list[Any], sep: str) -> Any:
    """Texts joined by `sep`, or, with pictures among them (`image_part`s), the chat request's
    content parts in the same order with `sep` between them."""
    if all(isinstance(t, str) for t in items):
        return sep.join(items)
    parts: list[Any] = []
    for i, t in enumerate(items):
        if i and sep:
            parts.append({"type": "text", "text": sep})
        parts.append({"type": "text", "text": t} if isinstance(t, str) else t)
    return parts
