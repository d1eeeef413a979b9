"""`tandem serve` in a child process on a free loopback port, for the tools that measure or
check a server as a client sees it (its own process, its own GIL): started, waited for on
/health, stopped on exit. Its log goes to a file, not a pipe nobody reads (a full pipe would
stop the server mid-answer)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def served(*options: str, ready_s: float = 600.0) -> Iterator[str]:
    """`tandem serve OPTIONS --port P` (e.g. `"--pair", "qwen2.5-coder-1.5b"`), its base URL
    once /health answers; a server that stops or never comes up ends the tool with its log's
    tail."""
    import httpx

    port = free_port()
    env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "serve", *options, "--port", str(port)],
                                stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
        base = f"http://127.0.0.1:{port}"

        def tail() -> str:
            log.seek(0)
            return log.read()[-2000:]

        try:
            deadline = time.monotonic() + ready_s
            while True:
                if proc.poll() is not None:
                    raise SystemExit(f"the server stopped: {tail()}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(base + "/health", timeout=2).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise SystemExit(f"the server did not come up within {ready_s:.0f} s: {tail()}")
                time.sleep(0.5)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
