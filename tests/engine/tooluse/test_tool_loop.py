"""The tool loop end to end: the real SmolLM2-135M, the real MCP server of mcp_fixture_server.py
over stdio, `tandem generate --mcp ... --chat --json`.

A 135M model rarely writes a good call on its own, so the first step forces a call of
`track_shipment` (`--tool-choice`, the grammar machinery the server's `tool_choice` uses); the
grammar fixes the call's shape and the argument's pattern (the tool's own schema: two letters,
a dash, four digits), but which id it writes is the model's: it must copy NX-4471 from the
question. The answer after the result is free. Nothing is scripted: the test fails if the call,
its argument, the server's result or the answer's use of it breaks.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import require_real
from engine.cli.main import main

SERVER = Path(__file__).with_name("mcp_fixture_server.py")
QUESTION = "Where is shipment NX-4471 now, and when does it arrive? Use the tools."


@pytest.fixture(scope="module")
def smol() -> Path:
    return require_real("smollm2-135m-instruct-q4_1")


@pytest.fixture
def mcp_json(tmp_path) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"ships": {"command": sys.executable, "args": [str(SERVER)]}}}),
                    encoding="utf-8")
    return path


def _generate(capsys, smol, mcp_json, *extra: str) -> tuple[int, dict, str]:
    rc = main(["generate", QUESTION, "--target", str(smol), "--mcp", str(mcp_json), "--chat", "--json",
               "--tool-choice", "track_shipment", "--max-tokens", "48", "--ctx", "2048", *extra])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if rc == 0 else {}), err


def test_the_loop_calls_the_tool_with_the_questions_id_and_answers_from_its_result(capsys, smol, mcp_json):
    rc, got, err = _generate(capsys, smol, mcp_json, "--allow-tools", "all", "--draft", "lookup", "--lookahead", "auto")
    assert rc == 0, err
    (call,) = got["tool_calls"]
    assert call["name"] == "track_shipment" and call["arguments"] == {"shipment_id": "NX-4471"}
    assert call["allowed"] and not call["error"] and "Rotterdam" in call["result"]
    assert "Rotterdam" in got["text"] and "<tool_call>" not in got["text"]
    assert len(got["steps"]) == 2  # the call, then the answer from its result


def test_drafts_leave_the_loop_as_the_target_alone_writes_it(smol, mcp_json):
    """The same loop with prompt lookup and with no draft: the same call, and the same answer, or
    one parted only at a near-tie (llama.cpp's batched-vs-single rounding, as docs/benchmarks.md
    counts it): the result quoted back is what lookup drafts from."""
    from engine.decoding.engine import Engine
    from engine.decoding.request import GenerationRequest
    from engine.tooluse.config import load_config
    from engine.tooluse.hub import McpHub
    from engine.tooluse.loop import LoopDone, ToolLoop
    from engine.tooluse.toolset import Allowance

    eng = Engine(smol, n_ctx=2048)
    runs = {}
    with McpHub(load_config(mcp_json)) as hub:
        loop = ToolLoop(eng, hub, Allowance.parse("all"), choice="track_shipment")
        for draft in ("lookup", None):
            req = GenerationRequest.from_options(QUESTION, draft_model=draft, lookahead=5, chat=True, max_tokens=48)
            runs[draft] = next(ev.result for ev in loop.run(req) if isinstance(ev, LoopDone))
    fast, plain = runs["lookup"], runs[None]
    assert fast.steps[-1].stats.accepted > 0  # lookup drafted the answer's quote of the result
    assert [(c.name, c.arguments, c.result) for c in fast.calls] == [(c.name, c.arguments, c.result) for c in plain.calls]
    a, b = fast.steps[-1].tokens, plain.steps[-1].tokens
    if a != b:
        prompt = eng.tokens_for(plain.messages[:-1], chat=True, tools=loop.tools.definitions)
        div = eng.first_divergence(prompt, b, a)
        assert div is not None and div.within_noise, div
    eng.close()


def test_a_tool_not_allowed_is_reported_to_the_model_and_the_user_not_run(capsys, smol, mcp_json):
    rc, got, err = _generate(capsys, smol, mcp_json, "--allow-tools", "read_env", "--max-tool-steps", "1")
    assert rc == 0, err
    call = got["tool_calls"][0]
    assert call["name"] == "track_shipment" and not call["allowed"] and call["server"] == "ships"
    assert "did not allow" in call["result"] and "Rotterdam" not in call["result"]
    assert "Rotterdam" not in got["text"]  # the model never saw the shipment's whereabouts


def test_tool_flags_are_checked_before_anything_starts(capsys, tmp_path, smol, mcp_json):
    assert main(["generate", QUESTION, "--mcp", str(mcp_json)]) == 2
    assert "add --chat" in capsys.readouterr().err
    assert main(["generate", QUESTION, "--allow-tools", "all", "--chat"]) == 2
    assert "need --mcp" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text('{"mcpServers": {"x": {"command": "a", "url": "https://h/mcp"}}}')
    assert main(["generate", QUESTION, "--target", str(smol), "--mcp", str(tmp_path / "bad.json"),
                 "--chat"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "bad.json: server 'x'" in err


def test_tandem_tools_lists_each_servers_tools(capsys, mcp_json):
    assert main(["tools", str(mcp_json), "--json"]) == 0
    (server,) = json.loads(capsys.readouterr().out)["servers"]
    assert server["name"] == "ships" and server["transport"] == "stdio"
    assert "track_shipment" in [t["name"] for t in server["tools"]]


def test_the_loop_keeps_the_questions_picture_in_every_step(capsys, tiny_vision, mcp_json, tmp_path):
    """`generate --image --mcp`: the tiny seeing target forced to call the tool, the result read,
    and the answer written with the picture still in its prompt."""
    from image_files import png_bytes

    target, _ = tiny_vision
    label = tmp_path / "label.png"
    label.write_bytes(png_bytes(32, 32, seed=2))
    rc = main(["generate", QUESTION, "--target", str(target), "--image", str(label), "--mcp", str(mcp_json), "--chat",
               "--json", "--tool-choice", "track_shipment", "--allow-tools", "all", "--max-tokens", "200", "--ctx", "4096",
               "--threads", "1"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    got = json.loads(out)
    assert [c["name"] for c in got["tool_calls"]] == ["track_shipment"]
    first, last = got["steps"][0], got["steps"][-1]
    assert len(got["steps"]) == 2 and last["prompt_tokens"] > first["prompt_tokens"]
    plain = main(["generate", QUESTION, "--target", str(target), "--mcp", str(mcp_json), "--chat", "--json",
                  "--tool-choice", "track_shipment", "--allow-tools", "all", "--max-tokens", "200", "--ctx", "4096",
                  "--threads", "1"])
    assert plain == 0
    without = json.loads(capsys.readouterr().out)
    assert first["prompt_tokens"] >= without["steps"][0]["prompt_tokens"] + 16  # the picture, in the first step
