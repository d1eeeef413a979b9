"""The MCP servers the app may start: which mcp.json it reads, each server's tools listed on
demand, and the servers running for the open chat.

The file is the user's choice (Settings › MCP servers), else `mcp.json` in Tandem's data
folder; nothing starts until a chat turns a server on and asks a question, or the user asks
for the list. A chat's servers run in one McpHub (engine/tooluse/hub.py) kept between its
answers and stopped, children included, when the chat turns them off, another chat opens,
or the app quits. Qt-free except for QSettings, where the chosen file is kept.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from engine.paths import data_dir

CONFIG_KEY = "tools/mcp_json"  # QSettings: the mcp.json the app reads ("": the default one)
CALL_TIMEOUT_S = 60.0  # how long a tool may take before its call is an error result (tests shorten it)
START_TIMEOUT_S = 30.0
EMPTY_CONFIG = '{\n  "mcpServers": {\n  }\n}\n'


def default_config() -> Path:
    return data_dir() / "mcp.json"


@dataclass(frozen=True)
class ServerListing:
    """One configured server as Settings lists it: its tools, or why it did not start (one line)."""

    name: str
    where: str
    tools: tuple[tuple[str, str], ...] = ()  # (name, first line of its description)
    error: str = ""


class ToolServers:
    """The mcp.json the app reads (kept in QSettings) and what it configures."""

    def __init__(self, settings: Any = None):
        self._settings = settings
        self._chosen = str(settings.value(CONFIG_KEY, "") or "") if settings is not None else ""

    @property
    def path(self) -> Path:
        return Path(self._chosen) if self._chosen else default_config()

    @property
    def is_default(self) -> bool:
        return not self._chosen

    def choose(self, path: str | Path | None) -> None:
        """Read `path` from now on (None or "": the default file in the data folder)."""
        self._chosen = str(path) if path else ""
        if self._settings is not None:
            self._settings.setValue(CONFIG_KEY, self._chosen)

    def create_default(self) -> Path:
        """Write an empty mcp.json at the default place if there is none (for the user to fill)."""
        path = default_config()
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(EMPTY_CONFIG, encoding="utf-8")
        return path

    def servers(self) -> list[Any]:
        """The enabled servers of the file (McpConfigError: one line saying what is wrong;
        a missing default file configures none)."""
        from engine.tooluse.config import load_config

        if self.is_default and not self.path.exists():
            return []
        return load_config(self.path)

    def listing(self) -> list[ServerListing]:
        """Start each server alone, list its tools, stop it: errors are per server (slow: call
        it off the GUI thread). McpConfigError when the file itself is wrong."""
        from engine.errors import TandemError
        from engine.tooluse.hub import McpHub

        out = []
        for cfg in self.servers():
            try:
                with McpHub([cfg], start_timeout=START_TIMEOUT_S) as hub:
                    tools = tuple((t.name, (t.description.strip().splitlines() or [""])[0][:120]) for t in hub.tools)
                out.append(ServerListing(cfg.name, cfg.where, tools))
            except TandemError as e:
                out.append(ServerListing(cfg.name, cfg.where, error=" ".join(str(e).split())))
        return out


class ChatServers:
    """The servers running for the open chat: started by the answer that first needs them (on
    its worker thread), kept for the next answers, stopped when the chat's choice changes, the
    chat closes or the app quits. Thread-safe: the worker starts, the GUI stops."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hub: Any = None
        self._names: tuple[str, ...] = ()
        self._stops = 0  # how many times stop() ran: servers started across a stop are stopped at once
        self._stopping: list[threading.Thread] = []

    @property
    def running(self) -> tuple[str, ...]:
        """The names of the servers running now (none: ())."""
        with self._lock:
            return self._names if self._hub is not None else ()

    def hub(self, servers: Sequence[Any], cancel: Any = None) -> Any:
        """The running hub of exactly `servers` (McpServerConfig), started if needed (blocks:
        the worker's thread); McpServerError names a server that did not start; a Stop
        (`cancel.cancelled`) while they start stops them and raises Cancelled at once."""
        from engine.tooluse.hub import McpHub

        from engine.errors import TandemError

        names = tuple(s.name for s in servers)
        with self._lock:
            if self._hub is not None and self._names == names:
                return self._hub
            old, self._hub, self._names, stops = self._hub, None, (), self._stops
        if old is not None:
            old.close()
        hub = McpHub(servers, start_timeout=START_TIMEOUT_S).start(cancel)
        with self._lock:
            stale = stops != self._stops
            if not stale:
                self._hub, self._names = hub, names
        if stale:  # switched off (or the chat closed) while they started: they do not outlive it
            hub.close()
            raise TandemError("the chat's MCP servers were switched off while they started")
        return hub

    def stop(self, *, wait: bool = False) -> None:
        """Stop the running servers (their children end: stdin closed, then SIGTERM, SIGKILL).
        In the background unless `wait` (the app quitting waits for every stop)."""
        with self._lock:
            hub, self._hub, self._names = self._hub, None, ()
            self._stops += 1
        if hub is not None:
            t = threading.Thread(target=hub.close, name="mcp-stop", daemon=True)
            t.start()
            self._stopping.append(t)
        if wait:
            for t in self._stopping:
                t.join()
        self._stopping = [t for t in self._stopping if t.is_alive()]
