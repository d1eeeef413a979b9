"""The configured MCP servers, running: started together, their tools listed, calls made with a
time limit, stopped together.

The official SDK (1.x) is asynchronous; the engine and the CLI are not. So the hub runs one
asyncio loop on a thread of its own: each server lives in one task there (the SDK's transports
must be entered and left in one task) until the hub closes, and a call is a coroutine handed to
that loop. Closing ends every task: a stdio child gets its stdin closed, then SIGTERM, then
SIGKILL (the SDK's shutdown), an HTTP session is ended with a DELETE. A hub that is never
closed is closed when the interpreter exits, so no child outlives the command that started it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..errors import Cancelled, TandemError
from .config import McpServerConfig
from .results import ToolResult, result_of

START_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0


class McpServerError(TandemError):
    """An MCP server did not start, or the SDK is not installed."""


@dataclass(frozen=True)
class McpTool:
    """A tool one server offers, as it listed it."""

    server: str
    name: str
    description: str
    input_schema: Mapping[str, Any]


def _leaf(e: BaseException) -> BaseException:
    """The first real error inside the task groups' exception groups."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e


def _why(e: BaseException) -> str:
    e = _leaf(e)
    text = str(e).strip()
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


class McpHub:
    """The running servers of one configuration. Use as a context manager, or `start()` and `close()`."""

    def __init__(self, servers: Sequence[McpServerConfig], *, start_timeout: float = START_TIMEOUT_S):
        try:
            import mcp  # noqa: F401
        except ImportError:
            raise McpServerError("MCP tools need the official MCP SDK: pip install 'tandem-studio[mcp]'") from None
        self.servers = list(servers)
        self.start_timeout = start_timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-hub", daemon=True)
        self._sessions: dict[str, Any] = {}
        self._tools: list[McpTool] = []
        self._stop: asyncio.Event | None = None
        self._tasks: list[asyncio.Future[Any]] = []
        self._errlogs: dict[str, Any] = {}
        self._closed = False

    # -- life ----------------------------------------------------------------------------------
    def start(self, cancel: Any = None) -> "McpHub":
        """Start every server and list its tools; the first that fails closes the others and
        raises one line naming it. `cancel` (anything with `.cancelled`: a CancelToken, a
        worker): a Stop while they start closes them and raises Cancelled at once."""
        self._thread.start()
        atexit.register(self.close)
        try:
            fut = asyncio.run_coroutine_threadsafe(self._start_all(), self._loop)
            _result(fut, self.start_timeout * max(1, len(self.servers)) + 5, cancel)
        except _Stopped:
            self.close()
            raise Cancelled("stopped while the MCP servers started") from None
        except BaseException:
            self.close()
            raise
        return self

    def __enter__(self) -> "McpHub":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stop every server (children included) and the loop; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                self._await(self._stop_all(), STOP_TIMEOUT_S + 5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()
        for f in self._errlogs.values():
            f.close()

    def _await(self, coro: Any, timeout: float) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # -- what it offers ------------------------------------------------------------------------
    @property
    def tools(self) -> list[McpTool]:
        return list(self._tools)

    def call(self, tool: McpTool, arguments: Mapping[str, Any], timeout: float = CALL_TIMEOUT_S,
             cancel: Any = None) -> ToolResult:
        """Call one tool. A tool that fails, answers an error, or does not answer within
        `timeout` seconds gives an error result (what the model is told), never an exception.
        `cancel` (a CancelToken): a Stop ends the wait at once (the call is cancelled)."""
        session = self._sessions.get(tool.server)
        if session is None or self._closed:
            return ToolResult(f"the server {tool.server!r} is not running", is_error=True)
        began = time.monotonic()
        fut = asyncio.run_coroutine_threadsafe(asyncio.wait_for(session.call_tool(tool.name, dict(arguments)), timeout),
                                               self._loop)
        try:
            raw = _result(fut, timeout + 10, cancel)
        except _Stopped:
            return ToolResult(f"the call of {tool.name!r} was stopped by the user", is_error=True,
                              seconds=time.monotonic() - began)
        except (asyncio.TimeoutError, TimeoutError):
            return ToolResult(f"the tool {tool.name!r} did not answer within {timeout:g} s", is_error=True,
                              seconds=time.monotonic() - began)
        except Exception as e:  # the server refused the call, or it broke: the model is told, the loop goes on
            return ToolResult(f"the tool {tool.name!r} failed: {_why(e)}", is_error=True, seconds=time.monotonic() - began)
        return result_of(raw, seconds=time.monotonic() - began)

    # -- on the hub's loop ---------------------------------------------------------------------
    async def _start_all(self) -> None:
        self._stop = asyncio.Event()
        for cfg in self.servers:
            ready: asyncio.Future[tuple[Any, list[McpTool]]] = self._loop.create_future()
            self._tasks.append(asyncio.ensure_future(self._serve(cfg, ready)))
            try:
                session, tools = await asyncio.wait_for(asyncio.shield(ready), self.start_timeout)
            except (asyncio.TimeoutError, TimeoutError):
                raise McpServerError(f"MCP server {cfg.name!r} ({cfg.where}) did not answer within "
                                     f"{self.start_timeout:g} s{self._stderr_tail(cfg)}") from None
            except Exception as e:
                raise McpServerError(f"MCP server {cfg.name!r} ({cfg.where}) did not start: "
                                     f"{_why(e)}{self._stderr_tail(cfg)}") from None
            self._sessions[cfg.name] = session
            self._tools += tools

    async def _stop_all(self) -> None:
        if self._stop is not None:
            self._stop.set()
        for cfg, task in zip(self.servers, self._tasks):
            if cfg.name not in self._sessions:  # still starting (a Stop, a failed start): nothing to wait for
                task.cancel()
        if self._tasks:
            _, pending = await asyncio.wait(self._tasks, timeout=STOP_TIMEOUT_S)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending, timeout=2)
        self._sessions.clear()

    async def _serve(self, cfg: McpServerConfig, ready: asyncio.Future[Any]) -> None:
        """One server's whole life in one task: connect, list its tools, wait for the stop."""
        from mcp import ClientSession

        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._transport(cfg, stack)
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                tools = await _list_tools(session, cfg.name)
                if not ready.done():
                    ready.set_result((session, tools))
                assert self._stop is not None
                await self._stop.wait()
        except BaseException as e:  # noqa: BLE001 (told to the starter; after the start, the end of a server)
            if not ready.done():
                ready.set_exception(e if isinstance(e, Exception) else RuntimeError(_why(e)))
            if isinstance(e, asyncio.CancelledError):
                raise

    async def _transport(self, cfg: McpServerConfig, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        if cfg.command is not None:
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            errlog = self._errlogs.setdefault(cfg.name, tempfile.TemporaryFile(mode="w+", encoding="utf-8",
                                                                                errors="replace"))
            params = StdioServerParameters(command=cfg.command, args=list(cfg.args), env=dict(cfg.env), cwd=cfg.cwd)
            return await stack.enter_async_context(stdio_client(params, errlog=errlog))
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        http = await stack.enter_async_context(create_mcp_http_client(headers=dict(cfg.headers)))
        read, write, _ = await stack.enter_async_context(streamable_http_client(str(cfg.url), http_client=http))
        return read, write

    def _stderr_tail(self, cfg: McpServerConfig) -> str:
        """The last line the server wrote to stderr, which usually says why it stopped."""
        f = self._errlogs.get(cfg.name)
        if f is None:
            return ""
        with contextlib.suppress(Exception):
            f.flush()
            f.seek(0)
            lines = [ln.strip() for ln in f.read()[-4000:].splitlines() if ln.strip()]
            if lines:
                return f" (its last words: {lines[-1][:300]})"
        return ""


class _Stopped(Exception):
    """The caller's cancel token was set while a call ran."""


def _result(fut: Any, timeout: float, cancel: Any) -> Any:
    """A concurrent future's result within `timeout`, checking `cancel` every 50 ms."""
    if cancel is None:
        return fut.result(timeout)
    end = time.monotonic() + timeout
    while True:
        try:
            return fut.result(max(0.0, min(0.05, end - time.monotonic())))
        except TimeoutError:
            if fut.done():  # the call's own time limit (asyncio's TimeoutError is this one since 3.11)
                raise
            if cancel.cancelled:
                fut.cancel()
                raise _Stopped from None
            if time.monotonic() >= end:
                raise


async def _list_tools(session: Any, server: str, pages: int = 20) -> list[McpTool]:
    """Every tool the server lists (following its pages, at most `pages`)."""
    out: list[McpTool] = []
    cursor = None
    for _ in range(pages):
        listed = await session.list_tools(cursor) if cursor else await session.list_tools()
        out += [McpTool(server, t.name, t.description or "", dict(t.inputSchema or {})) for t in listed.tools]
        cursor = listed.nextCursor
        if not cursor:
            break
    return out
