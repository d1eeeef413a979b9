"""Which `Host` headers the server answers: the defence against DNS rebinding.

A web page on evil.example can make its name resolve to 127.0.0.1 and then read the
local server's answers as if they were its own (same origin: CORS never applies). The
browser still sends `Host: evil.example`, so the server answers only Host names it knows
to be its own:

* `localhost` and loopback addresses (127.0.0.1, [::1], ...): no page elsewhere can be
  served from them;
* the address the connection arrived on (the bound address; with 0.0.0.0 the interface
  the client used, e.g. 192.168.1.5);
* the names in `ServerConfig.allowed_hosts`: `tandem serve --allow-host NAME`, plus the
  listening name and, on a network address, this machine's own names (`machine_names`);
  `*` there turns the check off (a reverse proxy that checks names itself).

A request without a Host header (not a browser) is answered. A refused one gets 403 in the
called API's error shape naming the Host and the flag that would allow it; a Host that is
no name and port at all ("127.0.0.1:8080@evil.com": its port part is not digits) is never
ours, whatever name it starts with.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any, Iterable

from ..error_shapes import send_error
from ..prom import ServerMetrics

ANY_HOST = "*"


def host_port(header: str) -> tuple[str, int | None] | None:
    """The name and port of a Host header value (name lowercase, without brackets or a trailing
    dot; port None when the value gives none), or None when it is not a host and port at all:
    "[::1]:8080" -> ("::1", 8080), "Example.COM." -> ("example.com", None), and
    "127.0.0.1:8080@evil.com" -> None (a port part that is not digits: not a name of ours)."""
    value = header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1:]
        if rest and not rest.startswith(":"):
            return None
        port = rest[1:]
    elif value.count(":") == 1:  # name:port (a bare IPv6 address has several colons)
        name, port = value.split(":", 1)
    else:
        name, port = value, ""
    if port and not (port.isascii() and port.isdigit()):
        return None
    return name.rstrip("."), int(port) if port else None


def host_name(header: str) -> str:
    """The name in a Host header value, lowercase, without the port or a trailing dot
    ("[::1]:8080" -> "::1", "Example.COM.:80" -> "example.com"); a value that is no host and
    port ("127.0.0.1:8080@evil.com") is returned whole, which no allowed name matches."""
    parts = host_port(header)
    return parts[0] if parts is not None else header.strip().lower()


def _ip(name: str) -> Any:
    try:
        return ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return None


def normalise(name: str) -> str:
    """How names are compared: lowercase, no trailing dot, IP addresses in canonical form."""
    name = host_name(name)
    ip = _ip(name)
    return str(ip) if ip is not None else name


def machine_names() -> list[str]:
    """This machine's own names (host name, fully qualified name, its mDNS `.local` name):
    what users type to reach a server bound to a network address."""
    names: list[str] = []
    try:
        short = socket.gethostname()
    except OSError:
        return names
    for n in (short, f"{short.split('.')[0]}.local"):
        names.append(n)
    try:
        fqdn = socket.getfqdn(short)
    except OSError:
        fqdn = short
    names.append(fqdn)
    return [normalise(n) for n in dict.fromkeys(names) if n and n != "localhost"]


def allows(name: str, local_address: str | None, allowed: Iterable[str]) -> bool:
    """Whether a request with Host `name` (normalised) that arrived on `local_address` is answered."""
    if name == "localhost":
        return True
    ip = _ip(name)
    if ip is not None and (ip.is_loopback or (local_address is not None and normalise(local_address) == str(ip))):
        return True
    if local_address is not None and normalise(local_address) == name:  # a named server address
        return True
    extra = set(allowed)
    return ANY_HOST in extra or name in extra


class HostCheck:
    """ASGI middleware: refuse (403) a request whose Host is not one of the server's names."""

    def __init__(self, app: Any, allowed: Iterable[str], metrics: ServerMetrics | None = None):
        self.app, self.metrics = app, metrics
        self.allowed = frozenset(normalise(a) if a != ANY_HOST else a for a in allowed)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or ANY_HOST in self.allowed:
            await self.app(scope, receive, send)
            return
        header = next((v for k, v in scope.get("headers", ()) if k == b"host"), None)
        if header is None:
            await self.app(scope, receive, send)
            return
        text = header.decode("latin-1")
        name = normalise(text)
        server = scope.get("server")
        local = str(server[0]) if server else None
        if allows(name, local, self.allowed):
            await self.app(scope, receive, send)
            return
        if self.metrics is not None:
            self.metrics.requests.labels("rejected", "403").inc()
        if host_port(text) is None:
            message = f"Host {text!r} is not a host name with an optional port, so not a name of this server"
        else:
            shown = name if name.isprintable() and name else text
            message = f"Host '{shown}' is not allowed; add --allow-host {shown}"
        await send_error(scope, send, 403, message, code="host_not_allowed")
