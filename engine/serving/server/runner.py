"""Serving the app with uvicorn: in the foreground (`tandem serve`) or on a thread (the
desktop app's switch, the tests).

The listening socket is bound here, before uvicorn starts, so a busy port or a bad host
is one clear `ServerError` instead of uvicorn logging and exiting the process, and port 0
gives a free port whose number is known at once.
"""

from __future__ import annotations

import ipaddress
import logging
import signal
import socket
import threading
import time
from typing import Any

from ...errors import TandemError

log = logging.getLogger("tandem.server")


class ServerError(TandemError):
    """The server could not start (port in use, bad address)."""


def is_loopback(host: str) -> bool:
    """Only this machine can reach `host` (so no API key is needed)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_address(host: str, port: int) -> None:
    """Refuse a port outside 0..65535 (0: any free port) or an empty host before any bind:
    the OS would wrap or refuse them with a less helpful message."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ServerError(f"cannot listen on port {port!r}: a port is 1..65535 (0: any free port)")
    if not host or not host.strip():
        raise ServerError("cannot listen: the host is empty (use 127.0.0.1 for this machine, 0.0.0.0 for all)")


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: any free port)."""
    check_address(host, port)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise ServerError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    family, type_, proto, _, addr = infos[0]
    sock = socket.socket(family, type_, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(128)
    except OSError as e:
        sock.close()
        raise ServerError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.set_inheritable(True)
    return sock


def url_for(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def _uvicorn_server(app: Any, log_level: str, *, own_logging: bool) -> Any:
    """`own_logging`: let uvicorn configure its log format (the CLI); inside the app or the
    tests its loggers just propagate to whatever the host process set up."""
    import uvicorn
    from sse_starlette.sse import AppStatus

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            """The first Ctrl+C or SIGTERM cancels the generations too: a stream would
            otherwise run on through the graceful-shutdown wait and then be cut off.

            sse-starlette's own drain flag is left as it was: it is one flag for the whole
            process that nothing resets, so once one server had stopped on a signal every
            stream of every later server in the process was cut off 2 s in, without its
            finish reason. This server's streams end through `_cancel_generations`."""
            if not self.should_exit:
                n = _cancel_generations(app)
                if n:
                    log.warning("stopping: %d generation(s) cancelled", n)
            before = AppStatus.should_exit
            try:
                super().handle_exit(sig, frame)
            finally:
                AppStatus.should_exit = before

    config = uvicorn.Config(app, log_level=log_level, timeout_graceful_shutdown=3,
                            access_log=log_level in ("info", "debug"), **({} if own_logging else {"log_config": None}))
    return Server(config)


def _cancel_generations(app: Any) -> int:
    """Mark the app as stopping (streams then end with an error chunk, not a quiet finish)
    and cancel its running and waiting generations; returns how many."""
    state = getattr(app, "state", None)
    stopping = getattr(state, "stopping", None)
    if stopping is not None:
        stopping.set()
    queue = getattr(state, "queue", None)
    return queue.cancel_all("server") if queue is not None else 0


class _Terminated(Exception):
    """SIGTERM, re-raised by uvicorn once it has shut down gracefully."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise _Terminated()


def serve_forever(app: Any, host: str = "127.0.0.1", port: int = 8080, *, log_level: str = "info") -> str:
    """Serve in the foreground until Ctrl+C or SIGTERM; returns what stopped it ("SIGINT",
    "SIGTERM" or "" when the server stopped by itself).

    On the signal, running generations are cancelled at once, so a stream ends with an
    error chunk within uvicorn's graceful shutdown instead of being cut off after it, and
    SIGTERM returns here (uvicorn re-raises it after shutting down, which would otherwise
    end the process before the caller's last line)."""
    sock = bind(host, port)
    server = _uvicorn_server(app, log_level, own_logging=True)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
    stopped_by = ""
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        stopped_by = "SIGINT"  # uvicorn shut down gracefully on Ctrl+C, then re-raised it
    except _Terminated:
        stopped_by = "SIGTERM"
    finally:
        _cancel_generations(app)
        sock.close()
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
    return stopped_by


class ServerThread:
    """The server on a daemon thread: `start()` returns once it accepts connections."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, *, log_level: str = "warning"):
        self.app, self.host, self.port, self.log_level = app, host, port, log_level
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    @property
    def url(self) -> str:
        return url_for(self.host, self.port)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, timeout: float = 15.0) -> "ServerThread":
        self._sock = bind(self.host, self.port)
        self.port = self._sock.getsockname()[1]
        self._server = _uvicorn_server(self.app, self.log_level, own_logging=False)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]},
                                        name=f"tandem-server-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise ServerError(f"the server on {self.url} did not start")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel running and waiting generations, then shut the server down and wait for it."""
        _cancel_generations(self.app)
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        if self._sock is not None:
            self._sock.close()
        self._thread = self._server = self._sock = None

    def __enter__(self) -> "ServerThread":
        return self.start() if not self.running else self

    def __exit__(self, *exc: object) -> None:
        self.stop()
