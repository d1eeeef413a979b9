"""Which web pages may make the server work: the defence against cross-site requests.

CORS only keeps a page from *reading* an answer. A page on any site can still *send* a
POST without asking first (a "simple" request: `Content-Type: text/plain`, a form or
multipart), and the browser sends it with the visitor's network position: straight to a
server on their loopback. Routes that parse their body whatever its type (Ollama's,
Anthropic's, the Responses API) would then generate for the page, unseen. So a request
that can generate or change something (any method but GET, HEAD and OPTIONS) is refused
with 403 when a browser says it comes from a page the server does not know:

* its `Origin` is neither the server's own (the same host and port as its `Host`) nor one
  given with `--cors-origin` (`ServerConfig.cors_origins`, a loopback origin under each
  loopback name; `*` allows any). `Origin: null` (a sandboxed page, a local file) is
  foreign, allowed only by `*`;
* or it has no `Origin` but `Sec-Fetch-Site` says another site sent it.

A request without either header (curl, SDKs, every non-browser client) is answered as
before; so is a CORS preflight (OPTIONS), which `CORSMiddleware` answers. Ollama refuses
foreign origins with 403 too. Applied as middleware, so no route, present or future, can
miss it.
"""

from __future__ import annotations

from typing import Any, Iterable
from urllib.parse import urlsplit

from ..config import with_loopback_twins
from ..error_shapes import send_error
from .hosts import host_port, normalise

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
ANY_ORIGIN = "*"
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
FOREIGN_SITES = frozenset({"cross-site", "same-site"})  # Sec-Fetch-Site values of another origin
MAX_SHOWN = 200  # characters of an Origin quoted in a refusal
_READ = (b"origin", b"host", b"sec-fetch-site")  # the headers the check reads (ASGI names are lowercase)


def _key(origin: str) -> str:
    return origin.strip().lower().rstrip("/")


def is_own_origin(origin: str, host: str | None, scheme: str) -> bool:
    """Whether `origin` is the server's own: the name and port of the request's `Host` (a
    port left out on both sides is the scheme's default on both: a TLS proxy in front
    changes the scheme, not the origin)."""
    if host is None:
        return False
    ours = host_port(host)
    try:
        parts = urlsplit(origin.strip())
        theirs_port = parts.port
    except ValueError:  # a port that is not a number: no origin of ours
        return False
    if ours is None or not parts.hostname or parts.scheme not in DEFAULT_PORTS:
        return False
    if normalise(parts.hostname) != normalise(ours[0]):
        return False
    if theirs_port is None and ours[1] is None:
        return True
    return (theirs_port or DEFAULT_PORTS[parts.scheme]) == (ours[1] or DEFAULT_PORTS.get(scheme, 80))


def refusal(origin: str | None, site: str | None) -> str:
    """The one line a refused request gets: who sent it and the flag that allows it."""
    if origin is None:
        return (f"a web page on another site sent this request (Sec-Fetch-Site: {site}) and this server "
                "answers pages only from its own origin and those given with --cors-origin")
    shown = origin if origin.isprintable() and len(origin) <= MAX_SHOWN else repr(origin[:MAX_SHOWN])
    if origin.strip() == "null":
        return ("a web page with origin 'null' (a sandboxed page or a local file) may not call this server; "
                "only --cors-origin '*' (with --api-key) allows it")
    return (f"a web page from {shown} may not call this server (cross-origin request refused); "
            f"start it with --cors-origin {shown} to allow it")


class OriginCheck:
    """ASGI middleware: refuse (403) a state-changing request a browser sent from a foreign page."""

    def __init__(self, app: Any, allowed: Iterable[str] = ()):
        self.app = app
        allowed = tuple(allowed)
        self.any = ANY_ORIGIN in allowed
        self.allowed = frozenset(_key(o) for o in with_loopback_twins(tuple(o for o in allowed if o != ANY_ORIGIN)))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.any or scope.get("method", "GET") in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        headers = {k.decode(): v.decode("latin-1") for k, v in scope.get("headers", ()) if k in _READ}
        origin, site = headers.get("origin"), headers.get("sec-fetch-site", "").strip().lower()
        if origin is None:
            foreign = site in FOREIGN_SITES
        else:
            foreign = _key(origin) not in self.allowed and not is_own_origin(origin, headers.get("host"),
                                                                             scope.get("scheme", "http"))
        if not foreign:
            await self.app(scope, receive, send)
            return
        await send_error(scope, send, 403, refusal(origin, site), code="origin_not_allowed", close=True)
