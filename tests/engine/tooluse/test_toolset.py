"""What the model is offered of the servers' tools: names it can call, definitions within the
context's share, and only the allowed tools run."""

from __future__ import annotations

import json

import pytest

from engine.errors import TandemError
from engine.tooluse.hub import McpTool
from engine.tooluse.results import Bounds, DESCRIPTION_CHARS
from engine.tooluse.toolset import Allowance, ToolSet

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def count(text: str) -> int:  # a token count of the right order, for the budgets alone
    return len(text) // 4 + 1


def test_a_name_two_servers_list_is_offered_once_per_server_under_the_servers_name():
    tools = ToolSet([McpTool("git", "search", "Search commits", SCHEMA), McpTool("tickets", "search", "Search tickets", SCHEMA),
                     McpTool("tickets", "open_ticket", "Open one", SCHEMA)], Bounds(4000, 500), count)
    assert sorted(tools.by_name) == ["git__search", "open_ticket", "tickets__search"]
    assert tools.tool("tickets__search").server == "tickets" and tools.tool("tickets__search").name == "search"
    fn = tools.definitions[0]["function"]
    assert fn == {"name": "git__search", "description": "Search commits", "parameters": SCHEMA}


def test_names_a_template_cannot_carry_are_left_out_with_a_note():
    tools = ToolSet([McpTool("s", "find files", "", SCHEMA), McpTool("s", "ok", "", {})], Bounds(4000, 500), count)
    assert list(tools.by_name) == ["ok"] and "'find files'" in tools.notes[0]
    assert tools.definitions[0]["function"]["parameters"] == {"type": "object", "properties": {}}


def test_definitions_stay_within_their_share_of_the_context_and_say_what_was_left_out():
    long = "x" * 5000
    many = [McpTool("s", f"tool_{i}", long, SCHEMA) for i in range(10)]
    tools = ToolSet(many, Bounds(1200, 500), count)
    used = sum(count(json.dumps(d)) for d in tools.definitions)
    assert used <= 1200 and 0 < len(tools.definitions) < 10
    assert len(tools.notes) == 10 - len(tools.definitions) and "1,200 tokens" in tools.notes[0]
    desc = tools.definitions[0]["function"]["description"]
    assert desc.startswith("x" * DESCRIPTION_CHARS) and "description cut: 3,976 characters" in desc


def test_an_allowance_naming_no_offered_tool_is_refused_in_one_line():
    tools = ToolSet([McpTool("s", "track_shipment", "", SCHEMA)], Bounds(4000, 500), count)
    tools.check(Allowance.parse("all"))
    tools.check(Allowance.parse("track_shipment"))
    with pytest.raises(TandemError, match=r"--allow-tools names 'track_shipmnet', which no configured server offers "
                                          r"\(offered: track_shipment\)"):
        tools.check(Allowance.parse("track_shipmnet"))
    with pytest.raises(TandemError, match="'all' or a comma list"):
        Allowance.parse(" , ")
