"""A real MCP server for the chat's tool tests (the official SDK's FastMCP, stdio): tools
without arguments, so that a tiny model forced to call one always writes a valid call, and
short descriptions; `--tools` names the ones it offers, so that they fit a tiny model's
context (a quarter of it goes to the tools' definitions). Ends by itself after
`--lifetime` seconds, so a test that dies cannot leave it running."""

from __future__ import annotations

import argparse
import asyncio
import os
import threading
from pathlib import Path

from mcp.server.fastmcp import FastMCP

server = FastMCP("chat-tools", log_level="WARNING")


def server_pid() -> int:
    """pid"""
    return os.getpid()


def touch() -> str:
    """touch"""
    with Path(os.environ["TOUCH_FILE"]).open("a", encoding="utf-8") as f:
        f.write("touched\n")
    return "touched"


async def hang() -> str:
    """hang"""
    await asyncio.sleep(120)
    return "woke"


def broken() -> str:
    """fail"""
    raise RuntimeError("the warehouse database is down")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--lifetime", type=float, default=120.0)
    ap.add_argument("--tools", default="server_pid,touch,hang")
    ap.add_argument("--slow-start", type=float, default=0.0, help="seconds before it answers at all")
    args = ap.parse_args()
    for name in args.tools.split(","):
        server.add_tool(globals()[name])
    timer = threading.Timer(args.lifetime, lambda: os._exit(0))
    timer.daemon = True
    timer.start()
    if args.slow_start:
        import time

        Path(os.environ["PID_FILE"]).write_text(str(os.getpid())) if os.environ.get("PID_FILE") else None
        time.sleep(args.slow_start)
    server.run("stdio")
