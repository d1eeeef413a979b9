"""Serving the app with uvicorn: in the foreground (`tandem serve`) or on a thread (the
desktop app's switch, the tests).

The listening socket is bound here, before uvicorn starts, so a busy port or a bad host
is one clear `ServerError` instead of uvicorn logging and exiting the process, and port 0
gives a free port whose number is known at once.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from typing import Any

from ...errors import TandemError


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


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: any free port)."""
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

    config = uvicorn.Config(app, log_level=log_level, timeout_graceful_shutdown=3,
                            access_log=log_level in ("info", "debug"), **({} if own_logging else {"log_config": None}))
    return uvicorn.Server(config)


def _cancel_generations(app: Any) -> None:
    queue = getattr(getattr(app, "state", None), "queue", None)
    if queue is not None:
        queue.cancel_all("server")


def serve_forever(app: Any, host: str = "127.0.0.1", port: int = 8080, *, log_level: str = "info") -> None:
    """Serve in the foreground until Ctrl+C (uvicorn handles the signal, then we stop generations)."""
    sock = bind(host, port)
    server = _uvicorn_server(app, log_level, own_logging=True)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass  # uvicorn shut down gracefully on Ctrl+C, then re-raised it
    finally:
        _cancel_generations(app)
        sock.close()


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
