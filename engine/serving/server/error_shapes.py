"""Error bodies in the shape of the API a request called, chosen from its path in this one place.

Anthropic's `{"type": "error", "error": {"type", "message"}}` under `/v1/messages`, Ollama's
`{"error": "message"}` under `/api/`, OpenAI's `{"error": {"message", "type", "param", "code"}}`
everywhere else (the Responses API and llama.cpp's endpoints included). The routes' errors,
the exception handlers (validation, unknown endpoint, a bug) and the middlewares' refusals
(Host, Origin, body size and depth) all write their bodies here, so a client always reads
the error shape of the API it called, whatever part of the server refused it.
"""

from __future__ import annotations

from typing import Any

from .wire import dumps

ANTHROPIC, OLLAMA, OPENAI = "anthropic", "ollama", "openai"
ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                   404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error"}


def api_of(path: str) -> str:
    """Which API a request path belongs to: ANTHROPIC, OLLAMA or OPENAI."""
    if path == "/v1/messages" or path.startswith("/v1/messages/"):
        return ANTHROPIC
    if path.startswith("/api/"):
        return OLLAMA
    return OPENAI


def anthropic_error(status: int, message: str) -> dict[str, Any]:
    """Anthropic's error body; its `type` follows the status."""
    return {"type": "error", "error": {"type": ANTHROPIC_TYPES.get(status, "api_error"), "message": message}}


def openai_error(message: str, *, type: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def error_body(path: str, status: int, message: str, *, type: str = "invalid_request_error",
               param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """The error body the API of `path` writes (OpenAI's fields `type`, `param` and `code`
    appear only in OpenAI's shape)."""
    api = api_of(path)
    if api == ANTHROPIC:
        return anthropic_error(status, message)
    if api == OLLAMA:
        return {"error": message}
    return openai_error(message, type=type, param=param, code=code)


async def send_error(scope: Any, send: Any, status: int, message: str, *, type: str = "invalid_request_error",
                     code: str | None = None, close: bool = False) -> None:
    """Answer an ASGI request with an error in its API's shape (for middlewares, before any route)."""
    body = dumps(error_body(scope.get("path", ""), status, message, type=type, code=code)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:  # the client may still be sending a body nobody will read
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
