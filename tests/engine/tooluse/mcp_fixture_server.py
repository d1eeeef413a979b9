"""A real MCP server for the tests, written with the official SDK's FastMCP (1.x).

Run over stdio (no arguments) as an mcp.json command, or over Streamable HTTP on 127.0.0.1
(`--http PORT`). Either way it ends by itself after `--lifetime` seconds (default 120), so a
test that dies cannot leave it running.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import threading
from typing import Annotated

from mcp.server.fastmcp import FastMCP
from pydantic import Field

SHIPMENTS = {
    "NX-4471": "Shipment NX-4471: at the Rotterdam container terminal, cleared customs, arriving Thursday 14 March.",
    "KQ-1020": "Shipment KQ-1020: delayed in Singapore by a storm, new date 2 April.",
}


def build(host: str = "127.0.0.1", port: int = 8000) -> FastMCP:
    server = FastMCP("shipments", host=host, port=port, log_level="WARNING")

    @server.tool()
    def track_shipment(shipment_id: Annotated[str, Field(pattern=r"^[A-Z]{2}-[0-9]{4}$")]) -> str:
        """Where a shipment is now and when it arrives, by its id."""
        return SHIPMENTS.get(shipment_id.strip().upper(), f"No shipment has the id {shipment_id!r}.")

    @server.tool()
    def read_env(name: str) -> str:
        """The value of one environment variable of this server's process."""
        return os.environ.get(name, "<unset>")

    @server.tool()
    def server_pid() -> int:
        """This server's process id."""
        return os.getpid()

    @server.tool()
    async def wait(seconds: float) -> str:
        """Waits, then says so (a tool that hangs, for the time limit)."""
        await asyncio.sleep(seconds)
        return f"waited {seconds} s"

    @server.tool()
    def broken(reason: str = "the warehouse database is down") -> str:
        """Always fails."""
        raise RuntimeError(reason)

    @server.tool()
    def long_report(lines: int = 5000) -> str:
        """A result far longer than any context."""
        return "\n".join(f"line {i}: pallet {i} checked, seal intact, temperature 4 C" for i in range(lines))

    return server


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--http", type=int, default=None, help="serve Streamable HTTP on 127.0.0.1:PORT")
    ap.add_argument("--lifetime", type=float, default=120.0)
    args = ap.parse_args()
    timer = threading.Timer(args.lifetime, lambda: os._exit(0))
    timer.daemon = True
    timer.start()
    if args.http is None:
        build().run("stdio")
    else:
        build(port=args.http).run("streamable-http")


if __name__ == "__main__":
    main()
