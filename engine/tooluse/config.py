"""`mcp.json`: the MCP servers the user configured, in the notation LM Studio and Cursor use.

    {"mcpServers": {
        "files":    {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."],
                     "env": {"LOG_LEVEL": "warn"}},
        "tickets":  {"url": "https://tickets.example.com/mcp", "headers": {"Authorization": "Bearer ..."}}}}

A server is either a command (stdio: `command`, optional `args`, `env`, `cwd`) or a URL
(Streamable HTTP: `url`, optional `headers`). `type` may say which ("stdio", "http",
"streamable-http"); `"disabled": true` leaves a server out. Only these servers ever start, with
only the environment written here (and the few variables the SDK passes to start any process,
see `STARTUP_ENV`). A URL must be https, or http on this machine (127.0.0.1, ::1, localhost),
unless the caller allows plain http elsewhere. Every mistake is one line naming the file, the
server and the problem.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit

from ..errors import TandemError

# What the SDK (mcp.client.stdio.get_default_environment) gives every stdio child besides the
# configured `env`, so a command can be found and started at all; nothing else of ours passes.
STARTUP_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
_KNOWN = {"command", "args", "env", "cwd", "url", "headers", "type", "disabled"}
_LOOPBACK_NAMES = {"localhost", "localhost."}


class McpConfigError(TandemError):
    """mcp.json is missing, not JSON, or describes a server wrongly."""


@dataclass(frozen=True)
class McpServerConfig:
    """One configured server: a command to start (stdio) or a URL (Streamable HTTP)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    @property
    def where(self) -> str:
        """What the server is, for a message: its command line or its URL."""
        return " ".join((self.command or "", *self.args)) if self.command is not None else str(self.url)


def load_config(path: str | Path, *, allow_http: bool = False) -> list[McpServerConfig]:
    """The enabled servers of an mcp.json file, in its order. `allow_http`: plain http to
    another machine is allowed (otherwise only https, or http on loopback)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise McpConfigError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise McpConfigError(f"{path}: cannot be read: {e}") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise McpConfigError(f"{path}: not valid JSON: {e}") from None
    return parse_config(data, str(path), allow_http=allow_http)


def parse_config(data: Any, source: str = "mcp.json", *, allow_http: bool = False) -> list[McpServerConfig]:
    """The enabled servers of an already parsed mcp.json (`source` names it in messages)."""
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise McpConfigError(f'{source}: needs an object "mcpServers" mapping each server\'s name to its settings')
    out = []
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            raise McpConfigError(f"{source}: server {name!r}: its settings must be an object")
        if entry.get("disabled") is True:
            continue
        out.append(_server(str(name), entry, f"{source}: server {name!r}", allow_http))
    return out


def _strings(value: Any, what: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise McpConfigError(f'{where}: "{what}" must be a list of strings')
    return tuple(value)


def _string_map(value: Any, what: str, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise McpConfigError(f'{where}: "{what}" must be an object of strings (numbers in quotes)')
    return dict(value)


def _server(name: str, entry: Mapping[str, Any], where: str, allow_http: bool) -> McpServerConfig:
    unknown = sorted(set(entry) - _KNOWN)
    if unknown:
        raise McpConfigError(f"{where}: unknown setting {unknown[0]!r} (known: {', '.join(sorted(_KNOWN))})")
    kind = entry.get("type")
    if kind is not None and kind not in ("stdio", "http", "streamable-http", "streamableHttp"):
        raise McpConfigError(f"{where}: type {kind!r} is not supported (stdio or streamable-http; "
                             "the old SSE transport is not)")
    has_command, has_url = "command" in entry, "url" in entry
    if has_command == has_url:
        raise McpConfigError(f'{where}: give either "command" (a program started over stdio) or "url" '
                             "(a Streamable HTTP server), not " + ("both" if has_command else "neither"))
    if has_command:
        if kind not in (None, "stdio"):
            raise McpConfigError(f'{where}: type {kind!r} needs a "url", not a "command"')
        command = entry["command"]
        if not isinstance(command, str) or not command.strip():
            raise McpConfigError(f'{where}: "command" must be a program name or path')
        cwd = entry.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise McpConfigError(f'{where}: "cwd" must be a folder path')
        return McpServerConfig(name, command=command, args=_strings(entry.get("args", []), "args", where),
                            env=_string_map(entry.get("env", {}), "env", where), cwd=cwd)
    if kind == "stdio":
        raise McpConfigError(f'{where}: type "stdio" needs a "command", not a "url"')
    for key in ("args", "env", "cwd"):
        if key in entry:
            raise McpConfigError(f'{where}: "{key}" belongs to a command, not to a "url" server')
    url = entry["url"]
    if not isinstance(url, str):
        raise McpConfigError(f'{where}: "url" must be a string')
    check_url(url, where, allow_http)
    return McpServerConfig(name, url=url, headers=_string_map(entry.get("headers", {}), "headers", where))


def check_url(url: str, where: str, allow_http: bool) -> None:
    """An https URL, or http on this machine (or anywhere with `allow_http`)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError as e:
        raise McpConfigError(f"{where}: url {url!r} is not a URL: {e}") from None
    if parts.scheme not in ("http", "https") or not host:
        raise McpConfigError(f"{where}: url {url!r} must be an http:// or https:// address with a host")
    if parts.scheme == "http" and not allow_http and not is_loopback(host):
        raise McpConfigError(f"{where}: url {url!r} is plain http to another machine: use https, or allow it "
                             "explicitly (--mcp-allow-http)")


def is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
