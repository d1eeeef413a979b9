"""mcp.json in LM Studio's and Cursor's notation: what is read, and one line for each mistake."""

from __future__ import annotations

import json

import pytest

from engine.tooluse.config import McpConfigError, load_config, parse_config
from engine.tooluse.toolset import Allowance


def test_reads_stdio_and_http_servers_in_order(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "server-filesystem", "."], "env": {"LOG": "warn"}},
        "tickets": {"url": "https://tickets.example.com/mcp", "headers": {"Authorization": "Bearer x"}},
        "local": {"type": "streamable-http", "url": "http://127.0.0.1:8931/mcp"},
        "off": {"command": "never-started", "disabled": True}}}), encoding="utf-8")
    files, tickets, local = load_config(path)
    assert (files.transport, files.command, files.args, dict(files.env)) == ("stdio", "npx", ("-y", "server-filesystem", "."), {"LOG": "warn"})
    assert (tickets.transport, tickets.url, dict(tickets.headers)) == ("http", "https://tickets.example.com/mcp", {"Authorization": "Bearer x"})
    assert local.url == "http://127.0.0.1:8931/mcp"


@pytest.mark.parametrize("data, says", [
    ([], 'needs an object "mcpServers"'),
    ({"servers": {}}, 'needs an object "mcpServers"'),
    ({"mcpServers": {"a": "npx"}}, "server 'a': its settings must be an object"),
    ({"mcpServers": {"a": {}}}, 'give either "command"'),
    ({"mcpServers": {"a": {"command": "x", "url": "https://h/mcp"}}}, "not both"),
    ({"mcpServers": {"a": {"command": "x", "args": "--flag"}}}, '"args" must be a list of strings'),
    ({"mcpServers": {"a": {"command": "x", "env": {"N": 3}}}}, '"env" must be an object of strings'),
    ({"mcpServers": {"a": {"command": ""}}}, '"command" must be a program name'),
    ({"mcpServers": {"a": {"command": "x", "autoApprove": ["t"]}}}, "unknown setting 'autoApprove'"),
    ({"mcpServers": {"a": {"type": "sse", "url": "https://h/sse"}}}, "old SSE transport is not"),
    ({"mcpServers": {"a": {"url": "ftp://h/mcp"}}}, "must be an http:// or https:// address"),
    ({"mcpServers": {"a": {"url": "http://192.168.1.9:8000/mcp"}}}, "plain http to another machine"),
    ({"mcpServers": {"a": {"url": "https://h/mcp", "env": {}}}}, '"env" belongs to a command'),
])
def test_each_mistake_is_one_line_naming_the_file_and_server(data, says):
    with pytest.raises(McpConfigError) as e:
        parse_config(data, "/home/u/mcp.json")
    msg = str(e.value)
    assert says in msg and msg.startswith("/home/u/mcp.json: ") and "\n" not in msg


def test_plain_http_elsewhere_only_when_allowed():
    data = {"mcpServers": {"lan": {"url": "http://192.168.1.9:8000/mcp"}}}
    assert parse_config(data, allow_http=True)[0].url == "http://192.168.1.9:8000/mcp"
    for host in ("localhost", "127.0.0.1", "[::1]"):
        assert parse_config({"mcpServers": {"a": {"url": f"http://{host}:1/mcp"}}})


def test_a_missing_or_broken_file_is_one_line(tmp_path):
    with pytest.raises(McpConfigError, match=r"mcp.json: no such file"):
        load_config(tmp_path / "mcp.json")
    (tmp_path / "bad.json").write_text('{"mcpServers": {', encoding="utf-8")
    with pytest.raises(McpConfigError, match=r"bad.json: not valid JSON"):
        load_config(tmp_path / "bad.json")


def test_no_tool_may_run_unless_allowed():
    assert not Allowance.parse(None).allows("track_shipment")
    assert Allowance.parse("all").allows("anything")
    some = Allowance.parse("track_shipment, read_env")
    assert some.allows("read_env") and not some.allows("broken")
