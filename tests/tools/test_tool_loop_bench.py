"""The tool-loop suite holds together: each question's expected call, made on the suite's own
MCP server, answers with what the question's check looks for (so a WRONG in the bench is the
model's, not the suite's)."""

from __future__ import annotations

import sys

from engine.tooluse.config import parse_config
from engine.tooluse.hub import McpHub
from tools.tool_loop_bench import SERVER, _questions, _table


def test_every_expected_call_answers_what_its_question_checks():
    questions = _questions("all")
    assert {q["set"] for q in questions} == {"tuning", "heldout"} and len({q["id"] for q in questions}) == len(questions)
    servers = parse_config({"mcpServers": {"desk": {"command": sys.executable, "args": [str(SERVER)]}}})
    with McpHub(servers) as hub:
        tools = {t.name: t for t in hub.tools}
        for q in questions:
            res = hub.call(tools[q["tool"]], q["arguments"])
            assert not res.is_error and all(s.lower() in res.text.lower() for s in q["answer_has"]), (q["id"], res.text)


def test_the_table_sums_steps_by_kind_and_source():
    rows = [{"set": "tuning", "steps": [
        {"kind": "call", "generated": 30, "drafted": 20, "accepted": 12, "accepted_by": {"suffix:request": 12}},
        {"kind": "answer", "generated": 40, "drafted": 30, "accepted": 25, "accepted_by": {"lookup": 20, "model": 5}}]}]
    table = _table(rows)
    assert "| tuning | call | 1 | 30 | 20 | 12 | suffix:request 12 |" in table
    assert "| tuning | answer | 1 | 40 | 30 | 25 | lookup 20, model 5 |" in table


def test_an_answer_holds_a_number_written_with_thousands_separators():
    from tools.tool_loop_bench import _holds

    assert _holds("The invoice is for 12,840.50 EUR and unpaid.", ["12840"])
    assert not _holds("The invoice is unpaid.", ["12840"])
