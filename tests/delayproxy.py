"""A loopback TCP proxy that adds a fixed latency, for RPC tests and the RPC benchmark.

Each chunk read on one side is written to the other side `delay / 2` seconds after it
arrived (a latency line, not a bandwidth limit: chunks in flight overlap), so one
request/response round trip through the proxy costs `delay` more than without it.
"""

from __future__ import annotations

import asyncio
import threading
import time


class DelayProxy:
    def __init__(self, upstream: str, delay_s: float):
        self.upstream_host, _, port = upstream.partition(":")
        self.upstream_port = int(port)
        self.delay_s = delay_s
        self.port = 0
        self.chunks = 0
        self.held = 0  # chunks swallowed while holding
        self._holding = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="delay-proxy", daemon=True)
        self._server: asyncio.AbstractServer | None = None
        self._senders: set[asyncio.Future] = set()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "DelayProxy":
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("delay proxy did not start")
        return self

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def hold(self) -> None:
        """Stop forwarding (a hung worker: the connection stays open, nothing comes back)."""
        self._holding.set()

    def __enter__(self) -> "DelayProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(self.upstream_host, self.upstream_port)
        except OSError:
            writer.close()
            return
        for w in (writer, up_writer):
            sock = w.get_extra_info("socket")
            if sock is not None:
                import socket

                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                if data is None:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()

        sender = asyncio.ensure_future(deliver())
        self._senders.add(sender)
        sender.add_done_callback(self._senders.discard)
        try:
            while True:
                data = await reader.read(1 << 20)
                if not data:
                    break
                self.chunks += 1
                if self._holding.is_set():
                    self.held += 1
                    continue
                queue.put_nowait((time.monotonic() + self.delay_s / 2, data))
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            queue.put_nowait((0.0, None))
            try:
                await sender
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                writer.close()
