"""The optional parts, each made to do its job once: documents, pictures, tools (MCP), the
Library and the server. `tandem doctor` lists them; a packaged bundle's `--self-test` fails
when one is broken, because a freezer (PyInstaller) drops what it does not see imported and
a part that merely imports can still miss its native library, template or data file.

Each check works on throw-away data in memory or a temporary folder and takes well under a
second; a part that is not installed says which extra brings it.
"""

from __future__ import annotations

import io
import sqlite3
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Callable

from .doctor import Check

EXTRA = "pip install 'tandem-studio[{}]'"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


def documents() -> str:
    """Every document reader imports, and python-docx opens its own template (the DOCX export)."""
    import docx
    import odf.opendocument  # noqa: F401
    import openpyxl  # noqa: F401
    import pptx
    import pypdf  # noqa: F401
    import striprtf.striprtf  # noqa: F401

    docx.Document()
    pptx.Presentation()
    return f"pypdf {_version('pypdf')}, DOCX, XLSX, PPTX, ODF and RTF readers; the DOCX export's template"


def pictures() -> str:
    """Pillow decodes a PNG, PDFium renders a page (scanned PDFs), libmtmd loads (projectors)."""
    import pypdfium2 as pdfium
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (4, 4), (200, 30, 30)).save(buf, format="PNG")
    with Image.open(io.BytesIO(buf.getvalue())) as im:
        im.load()
    pdf = pdfium.PdfDocument.new()
    try:
        pdf.new_page(72, 72)
        bitmap = pdf[0].render(scale=1)
        bitmap.to_pil()
    finally:
        pdf.close()
    from ..llamacpp.vision import _mtmd

    _mtmd()
    return f"Pillow {_version('Pillow')}, PDFium {_version('pypdfium2')}, libmtmd"


def tools() -> str:
    """The MCP SDK lists and calls a tool over an in-memory session (its client, models and anyio)."""
    import anyio
    from mcp import types
    from mcp.server.lowlevel import Server
    from mcp.shared.memory import create_connected_server_and_client_session

    server: Server = Server("tandem-self-test")  # the low-level server: FastMCP would set up logging

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [types.Tool(name="echo", description="Say text back.",
                           inputSchema={"type": "object", "properties": {"text": {"type": "string"}}})]

    @server.call_tool()
    async def call_tool(name: str, arguments: dict) -> list[types.TextContent]:
        return [types.TextContent(type="text", text=str(arguments.get("text")))]

    async def call() -> str:
        async with create_connected_server_and_client_session(server) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("echo", {"text": "ok"})
            return f"{names}:{result.content[0].text}"

    got = anyio.run(call)
    if got != "['echo']:ok":
        raise RuntimeError(f"the in-memory tool call gave {got!r}")
    return f"mcp {_version('mcp')}: a tool listed and called"


def library() -> str:
    """SQLite has FTS5 (the Library's index) and watchdog watches a folder (re-indexing)."""
    db = sqlite3.connect(":memory:")
    try:
        db.execute("CREATE VIRTUAL TABLE t USING fts5(text)")
        db.execute("INSERT INTO t VALUES ('the budget of project Kestrel')")
        if db.execute("SELECT count(*) FROM t WHERE t MATCH 'kestrel'").fetchone()[0] != 1:
            raise RuntimeError("FTS5 found nothing")
    finally:
        db.close()
    from watchdog.events import FileSystemEventHandler
    from watchdog.observers import Observer

    seen: list[str] = []

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event) -> None:  # noqa: ANN001 - watchdog's event
            seen.append(event.src_path)

    with tempfile.TemporaryDirectory() as tmp:
        observer = Observer()
        observer.schedule(Handler(), tmp)
        observer.start()
        try:
            (Path(tmp) / "new.txt").write_text("x")
            deadline = time.monotonic() + 10
            while not seen and time.monotonic() < deadline:
                time.sleep(0.02)
        finally:
            observer.stop()
            observer.join(5)
    watch = f"watchdog {_version('watchdog')} ({type(observer).__name__})" if seen else "watchdog saw no change in 10 s"
    if not seen:
        raise RuntimeError(watch)
    return f"SQLite {sqlite3.sqlite_version} with FTS5, {watch}"


def server() -> str:
    """The server's libraries import (FastAPI, uvicorn, SSE, Prometheus, jsonschema)."""
    import fastapi  # noqa: F401
    import jsonschema  # noqa: F401
    import prometheus_client  # noqa: F401
    import sse_starlette  # noqa: F401
    import uvicorn  # noqa: F401

    return f"FastAPI {_version('fastapi')}, uvicorn {_version('uvicorn')}"


# (name, check, the extra that brings it)
PARTS: tuple[tuple[str, Callable[[], str], str], ...] = (
    ("documents", documents, "docs"),
    ("pictures", pictures, "vision"),
    ("tools (MCP)", tools, "mcp"),
    ("library", library, "library"),
    ("server", server, "server"),
)


def part_checks(*, required: bool = False) -> list[Check]:
    """One Check per optional part: what it did, or why it could not. A part that is not installed
    is a problem only when `required` (a packaged bundle, which promises them all); elsewhere it
    is a note naming the extra that brings it. A part that is installed and fails is a problem."""
    checks = []
    for name, check, extra in PARTS:
        try:
            checks.append(Check(name, True, check()))
        except ImportError as e:
            missing = f"not installed ({e.name or e})"
            checks.append(Check(name, not required, missing if required else f"{missing}: {EXTRA.format(extra)}",
                                EXTRA.format(extra)))
        except Exception as e:  # noqa: BLE001 - a broken part is reported, not raised
            checks.append(Check(name, False, f"broken: {type(e).__name__}: {e}", EXTRA.format(extra)))
    return checks
