"""The MCP client against a real server written with the official SDK (tests/engine/tooluse/
mcp_fixture_server.py, FastMCP 1.x): started over stdio from an mcp.json, and over Streamable
HTTP on 127.0.0.1; its tools listed and called; a hanging tool times out, a failing one is an
error result; the child gets only the configured environment and stops with the hub."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.tooluse.config import load_config
from engine.tooluse.hub import McpHub, McpServerError
from engine.tooluse.results import Bounds, cut_text

SERVER = Path(__file__).with_name("mcp_fixture_server.py")


def _config(tmp_path: Path, entry: dict) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"ships": entry}}), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    os.environ["TANDEM_TEST_PARENT_SECRET"] = "must not reach the child"
    path = _config(tmp_path_factory.mktemp("mcp"), {"command": sys.executable, "args": [str(SERVER)],
                                                    "env": {"SHIP_TOKEN": "configured-value"}})
    with McpHub(load_config(path)) as h:
        yield h
    os.environ.pop("TANDEM_TEST_PARENT_SECRET", None)


def _tool(hub: McpHub, name: str):
    return next(t for t in hub.tools if t.name == name)


def test_lists_the_servers_tools_with_their_schemas(hub):
    names = {t.name for t in hub.tools}
    assert {"track_shipment", "read_env", "wait", "broken", "long_report", "server_pid"} <= names
    track = _tool(hub, "track_shipment")
    assert track.server == "ships" and "shipment" in track.description
    assert track.input_schema["properties"]["shipment_id"]["pattern"] == "^[A-Z]{2}-[0-9]{4}$"


def test_a_call_returns_the_tools_answer(hub):
    res = hub.call(_tool(hub, "track_shipment"), {"shipment_id": "NX-4471"})
    assert not res.is_error and "Rotterdam" in res.text and "14 March" in res.text


def test_the_child_gets_only_the_configured_environment_and_what_starting_it_needs(hub):
    read = _tool(hub, "read_env")
    assert hub.call(read, {"name": "SHIP_TOKEN"}).text == "configured-value"
    assert hub.call(read, {"name": "TANDEM_TEST_PARENT_SECRET"}).text == "<unset>"
    assert hub.call(read, {"name": "PATH"}).text == os.environ["PATH"]  # the SDK passes PATH, HOME, ... to start it


def test_a_hanging_tool_times_out_and_the_server_still_answers(hub):
    began = time.monotonic()
    res = hub.call(_tool(hub, "wait"), {"seconds": 60}, timeout=1.0)
    assert res.is_error and "did not answer within 1 s" in res.text
    assert time.monotonic() - began < 10
    assert "KQ-1020" in hub.call(_tool(hub, "track_shipment"), {"shipment_id": "KQ-1020"}).text


def test_a_failing_tool_is_an_error_result_not_an_exception(hub):
    res = hub.call(_tool(hub, "broken"), {})
    assert res.is_error and "the warehouse database is down" in res.text
    assert res.for_model().startswith("error: ")
    bad_args = hub.call(_tool(hub, "track_shipment"), {"shipment_id": "not an id"})
    assert bad_args.is_error and "pattern" in bad_args.text


def test_a_long_result_is_cut_with_a_note_within_its_budget(hub):
    res = hub.call(_tool(hub, "long_report"), {"lines": 5000})
    assert len(res.text) > 200_000
    count = lambda s: len(s) // 4 + 1  # noqa: E731 (a token count of the right order, for the bound alone)
    budget = Bounds.for_context(4096).result
    cut = cut_text(res.text, budget, count)
    assert count(cut) <= budget and cut.startswith("line 0: pallet 0") and "result cut:" in cut


def test_the_child_stops_with_the_hub(tmp_path):
    path = _config(tmp_path, {"command": sys.executable, "args": [str(SERVER)]})
    with McpHub(load_config(path)) as h:
        pid = int(h.call(_tool(h, "server_pid"), {}).text)
        os.kill(pid, 0)  # running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_server_that_cannot_start_is_one_line_naming_it(tmp_path):
    missing = _config(tmp_path, {"command": str(tmp_path / "no-such-server")})
    with pytest.raises(McpServerError, match=r"MCP server 'ships' \(.*no-such-server\) did not start"):
        McpHub(load_config(missing)).start()
    dies = _config(tmp_path, {"command": sys.executable,
                              "args": ["-c", "import sys; sys.stderr.write('no licence key\\n'); sys.exit(3)"]})
    with pytest.raises(McpServerError, match="ships.*no licence key") as e:
        McpHub(load_config(dies), start_timeout=20).start()
    assert "\n" not in str(e.value)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_streamable_http_server_on_loopback(tmp_path):
    port = _free_port()
    proc = subprocess.Popen([sys.executable, str(SERVER), "--http", str(port), "--lifetime", "90"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "the HTTP server did not start"
                time.sleep(0.2)
        path = _config(tmp_path, {"url": f"http://127.0.0.1:{port}/mcp", "headers": {"X-Test": "1"}})
        with McpHub(load_config(path)) as h:
            assert "track_shipment" in {t.name for t in h.tools}
            assert "Rotterdam" in h.call(_tool(h, "track_shipment"), {"shipment_id": "NX-4471"}).text
            assert h.call(_tool(h, "broken"), {}).is_error
    finally:
        proc.terminate()
        proc.wait(timeout=10)
