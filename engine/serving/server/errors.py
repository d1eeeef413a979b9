"""Errors: the `ApiError` routes raise, the handlers that answer every failure (validation,
unknown endpoint, a bug) in the error shape of the API called (`error_shapes`), and the
API-key check."""

from __future__ import annotations

import hmac
import logging
import re
from typing import Any, Awaitable, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ...errors import TandemError
from .bridge import GenerationFailed
from .error_shapes import error_body, openai_error
from .redact import scrub, server_side

log = logging.getLogger("tandem.server")


class ApiError(Exception):
    """An error a route raises: answered in the called API's shape (`body_for`); `body` is
    OpenAI's, for the errors an OpenAI stream carries."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.body, self.headers = openai_error(message, type=type, param=param, code=code), headers

    def body_for(self, path: str) -> dict[str, Any]:
        """The body in the shape of the API `path` belongs to."""
        return error_body(path, self.status, self.message, type=self.type, param=self.param, code=self.code)

    def renamed(self, names: dict[str, str]) -> "ApiError":
        """The same error naming its field as another API does (an API translated onto the chat
        request): `param`, and the message that begins with it, renamed by `names` (see `rename`)."""
        new = rename(self.param, names) if self.param else None
        if new is None:
            return self
        message = new + self.message[len(self.param):] if self.message.startswith(self.param) else self.message
        return ApiError(self.status, message, type=self.type, param=new, code=self.code, headers=self.headers)


def rename(path: str, names: dict[str, str]) -> str | None:
    """`path` ("tools[2].function.parameters") with its leading field path renamed by `names`
    (chat request path -> another API's; "[i]" stands for any index and keeps it), the longest
    match first; None when no name matches."""
    for old in sorted(names, key=len, reverse=True):
        pattern = re.escape(old).replace(r"\[i\]", r"\[(\d+)\]")
        m = re.match(pattern + r"(?=$|[.\[])", path)
        if m:
            new = names[old]
            for index in m.groups():
                new = new.replace("[i]", f"[{index}]", 1)
            return new + path[m.end():]
    return None


def failure(e: GenerationFailed, served: Any = None) -> ApiError:
    """The answer to a generation that raised: 400 for bad input, 503 for a lost RPC worker
    (retrying will not help until the server is restarted: no Retry-After), 500 for the
    server's own trouble or a bug; models named by id, not by path (`redact`)."""
    message = scrub(str(e), served)
    if e.lost_worker:
        return ApiError(503, message, type="server_error", code="rpc_worker_lost")
    return ApiError(400 if e.user else 500, message, type="invalid_request_error" if e.user else "server_error")


def engine_error(e: TandemError, served: Any, *, param: str | None = None) -> ApiError:
    """An engine error met while serving a request: 500 when it is the server's trouble (a
    context that cannot be made, a failed decode), else 400 naming `param`; paths scrubbed."""
    if server_side(e):
        return ApiError(500, scrub(str(e), served), type="server_error")
    return ApiError(400, scrub(str(e), served), param=param, code="invalid_value")


def bug_body(e: Exception, app: Any, path: str = "") -> dict[str, Any]:
    """The 500 body for an exception nothing handled (paths scrubbed: it may quote a file), in
    the shape of the API `path` belongs to."""
    served = getattr(getattr(app, "state", None), "served", None)
    return error_body(path, 500, scrub(f"internal error: {type(e).__name__}: {e}", served), type="server_error")


def validation_message(err: dict[str, Any]) -> tuple[str, str | None]:
    """One readable line (and the offending parameter) from pydantic's first error."""
    loc = [x for x in err.get("loc", ()) if x != "body"]
    param = "".join(f"[{x}]" if isinstance(x, int) else (f".{x}" if i else str(x)) for i, x in enumerate(loc)) or None
    kind = err.get("type", "")
    msg = str(err.get("msg", "invalid value"))
    if kind == "json_invalid":
        detail = (err.get("ctx") or {}).get("error", "")
        return f"the request body is not valid JSON{f' ({detail})' if detail else ''}", None
    if kind in ("model_attributes_type", "dict_type") and not loc:
        return "the request body must be a JSON object, sent with 'Content-Type: application/json'", None
    if kind == "missing" and not loc:
        return "the request body is empty; send a JSON object (with 'Content-Type: application/json')", None
    if kind == "missing":
        return f"{param}: this field is required", param
    msg = msg.removeprefix("Value error, ")
    return (f"{param}: {msg}" if param else msg), param


def install_error_handlers(app: FastAPI) -> None:
    """Every error the app can meet is answered in the called API's error shape, never a dead server."""

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, e: ApiError) -> JSONResponse:
        return JSONResponse(e.body_for(request.url.path), status_code=e.status, headers=e.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, e: RequestValidationError) -> JSONResponse:
        errors = e.errors()
        message, param = validation_message(errors[0]) if errors else ("invalid request", None)
        return JSONResponse(error_body(request.url.path, 400, message, param=param, code="invalid_value"),
                            status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, e: StarletteHTTPException) -> JSONResponse:
        path = request.url.path
        message = {404: f"no such endpoint: {request.method} {path}",
                   405: f"method {request.method} is not allowed on {path}"}.get(e.status_code, str(e.detail))
        return JSONResponse(error_body(path, e.status_code, message, code=str(e.status_code)),
                            status_code=e.status_code)

    @app.exception_handler(Exception)
    async def _bug(request: Request, e: Exception) -> JSONResponse:
        log.exception("request failed")
        return JSONResponse(bug_body(e, request.app, request.url.path), status_code=500)


def key_check(config: Any) -> Callable[[Request], Awaitable[None]]:
    """A FastAPI dependency: 401 unless the request carries 'Authorization: Bearer KEY' (no check while
    `config.api_key` is unset; read per request, so a key set later applies at once)."""

    async def check_key(request: Request) -> None:
        api_key = config.api_key
        if not api_key:
            return
        got = request.headers.get("authorization", "")
        scheme, _, token = got.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), api_key.encode()):
            raise ApiError(401, "missing or incorrect API key: send the header 'Authorization: Bearer KEY'",
                           code="invalid_api_key")

    return check_key
