"""Every API's wire output for a fixed set of requests (text, tool calls, errors, streams),
compared with a recorded copy: a change to how the server builds its answers must not change
one byte a client reads, apart from ids, clocks and measured times (masked) and the last digits
of a float: llama.cpp's kernels for another CPU sum in another order (logprobs moved by 2e-6 to
4e-5 between the machine that recorded and one building AVX-512 kernels). Re-record on purpose
with `TANDEM_RECORD_WIRE=1` and say why in the commit."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from engine import Engine  # noqa: E402
from engine.decoding.prompt_cache import CacheLimits  # noqa: E402
from engine.models.tinymodel import FIM_TOKENS, chain_through, make_vocab, write_model  # noqa: E402
from scripted_models import write_scripted_pair  # noqa: E402

GOLDEN = Path(__file__).with_name("wire_snapshot.json")
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
LONDON = '{"name": "get_weather", "arguments": {"city": "London"}}'
SCRIPT = ["Sure.", "<tool_call>", "\n" + CALL + "\n", "</tool_call>\n<tool_call>", "\n" + LONDON + "\n", "</tool_call>"]
FN = {"name": "get_weather", "description": "The weather in a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
OPENAI_TOOLS = [{"type": "function", "function": FN}]
ANTHROPIC_TOOLS = [{"name": FN["name"], "description": FN["description"], "input_schema": FN["parameters"]}]
RESPONSES_TOOLS = [{"type": "function", **FN}]
MSGS = [{"role": "user", "content": "the value of the item"}]
VOLATILE_KEYS = {"id", "created", "created_at", "call_id", "item_id", "system_fingerprint"}
VOLATILE = re.compile(r"(_ms|_per_second|_duration|_s)$")
IDS = re.compile(r"\b(chatcmpl|cmpl|call|msg|resp|fc|toolu)_[0-9A-Za-z_]+")


def mask(obj: Any) -> Any:
    """Ids, clocks and measured times replaced by their kind: what a client cannot rely on."""
    if isinstance(obj, dict):
        return {k: ("<id>" if k in VOLATILE_KEYS and v is not None else "<t>" if VOLATILE.search(k)
                    and isinstance(v, (int, float)) else mask(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [mask(v) for v in obj]
    if isinstance(obj, str):
        return IDS.sub(r"\1_<id>", obj)
    return obj


def compact(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def record(r: httpx.Response) -> dict[str, Any]:
    """A response as a client reads it: status, content type, and the body (JSON, SSE events
    or NDJSON lines), each JSON value masked; `compact`: the server wrote it as compact JSON."""
    kind = r.headers.get("content-type", "").split(";")[0]
    out: dict[str, Any] = {"status": r.status_code, "type": kind}
    text = r.text
    if kind == "text/event-stream":
        events = []
        for block in text.replace("\r\n", "\n").split("\n\n"):
            if not block.strip():
                continue
            ev: dict[str, Any] = {}
            for line in block.split("\n"):
                field, _, value = line.partition(": ")
                if field == "data" and value != "[DONE]":
                    parsed = json.loads(value)
                    ev["data"], ev["compact"] = mask(parsed), compact(parsed) == value
                else:
                    ev[field] = value
            events.append(ev)
        out["events"] = events
    elif kind == "application/x-ndjson":
        out["lines"] = [mask(json.loads(line)) for line in text.splitlines() if line.strip()]
    else:
        out["body"] = mask(r.json()) if kind == "application/json" else text
    return out


def cases() -> list[tuple[str, str, str, dict[str, Any]]]:
    """(name, server, path, body): the fixed requests."""
    tools, greedy = "tools", {"temperature": 0}
    chat = {"model": "m", "messages": MSGS, "max_tokens": 12, **greedy}
    out: list[tuple[str, str, str, dict[str, Any]]] = []
    for draft in ("none", "model", "lookup"):
        out += [(f"chat-{draft}", "plain", "/v1/chat/completions", {**chat, "draft": draft}),
                (f"chat-stream-{draft}", "plain", "/v1/chat/completions",
                 {**chat, "draft": draft, "stream": True, "stream_options": {"include_usage": True}})]
    out += [
        ("chat-provenance-logprobs", "plain", "/v1/chat/completions",
         {**chat, "provenance": True, "logprobs": True, "top_logprobs": 2}),
        ("chat-stream-provenance-logprobs", "plain", "/v1/chat/completions",
         {**chat, "provenance": True, "logprobs": True, "top_logprobs": 2, "stream": True}),
        ("chat-n2-seed", "plain", "/v1/chat/completions", {**chat, "n": 2, "temperature": 0.8, "seed": 7}),
        ("chat-stream-n2-seed", "plain", "/v1/chat/completions",
         {**chat, "n": 2, "temperature": 0.8, "seed": 7, "stream": True, "stream_options": {"include_usage": True}}),
        ("chat-stop", "plain", "/v1/chat/completions", {**chat, "stop": ["value"]}),
        ("chat-json-schema", "plain", "/v1/chat/completions",
         {**chat, "max_tokens": 20, "response_format": {"type": "json_schema", "json_schema": {
             "name": "x", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}}),
        ("text-two-prompts-logprobs", "plain", "/v1/completions",
         {"model": "m", "prompt": ["the value", "of the"], "max_tokens": 6, "logprobs": 2, **greedy}),
        ("text-stream-logprobs", "plain", "/v1/completions",
         {"model": "m", "prompt": "the value", "max_tokens": 6, "logprobs": 2, "stream": True, **greedy}),
        ("error-model", "plain", "/v1/chat/completions", {**chat, "model": "nope"}),
        ("error-field", "plain", "/v1/chat/completions", {**chat, "max_tokens": -1}),
        ("error-too-long", "plain", "/v1/chat/completions",
         {**chat, "messages": [{"role": "user", "content": "the value of " * 800}]}),
        ("tools-auto", tools, "/v1/chat/completions", {**chat, "max_tokens": 24, "tools": OPENAI_TOOLS}),
        ("tools-auto-stream", tools, "/v1/chat/completions",
         {**chat, "max_tokens": 24, "tools": OPENAI_TOOLS, "stream": True, "provenance": True}),
        ("tools-required-stream", tools, "/v1/chat/completions",
         {**chat, "max_tokens": 40, "tools": OPENAI_TOOLS, "tool_choice": "required", "stream": True}),
        ("tools-required-cut", tools, "/v1/chat/completions",
         {**chat, "max_tokens": 6, "tools": OPENAI_TOOLS, "tool_choice": "required"}),
        ("responses", "plain", "/v1/responses", {"model": "m", "input": "the value of", "max_output_tokens": 8, **greedy}),
        ("responses-stream", "plain", "/v1/responses",
         {"model": "m", "input": "the value of", "max_output_tokens": 8, "stream": True, "provenance": True, **greedy}),
        ("responses-tools", tools, "/v1/responses",
         {"model": "m", "input": "the value", "max_output_tokens": 24, "tools": RESPONSES_TOOLS, **greedy}),
        ("responses-tools-stream", tools, "/v1/responses",
         {"model": "m", "input": "the value", "max_output_tokens": 24, "tools": RESPONSES_TOOLS, "stream": True,
          **greedy}),
        ("responses-error", "plain", "/v1/responses", {"model": "m", "input": [{"type": "bogus"}]}),
        ("anthropic", "plain", "/v1/messages", {"model": "m", "max_tokens": 8, "messages": MSGS, **greedy}),
        ("anthropic-stream", "plain", "/v1/messages",
         {"model": "m", "max_tokens": 8, "messages": MSGS, "stream": True, "provenance": True, **greedy}),
        ("anthropic-stop", "plain", "/v1/messages",
         {"model": "m", "max_tokens": 12, "messages": MSGS, "stop_sequences": ["value"], **greedy}),
        ("anthropic-tools", tools, "/v1/messages",
         {"model": "m", "max_tokens": 24, "messages": MSGS, "tools": ANTHROPIC_TOOLS, **greedy}),
        ("anthropic-tools-stream", tools, "/v1/messages",
         {"model": "m", "max_tokens": 24, "messages": MSGS, "tools": ANTHROPIC_TOOLS, "stream": True, **greedy}),
        ("anthropic-count", "plain", "/v1/messages/count_tokens", {"model": "m", "messages": MSGS}),
        ("anthropic-error", "plain", "/v1/messages", {"model": "m", "messages": MSGS}),
        ("ollama-chat", "plain", "/api/chat",
         {"model": "m", "messages": MSGS, "stream": False, "options": {"num_predict": 8, **greedy}}),
        ("ollama-chat-stream", "plain", "/api/chat", {"model": "m", "messages": MSGS, "options": {"num_predict": 8,
                                                                                                **greedy}}),
        ("ollama-generate-raw", "plain", "/api/generate",
         {"model": "m", "prompt": "the value", "raw": True, "stream": False, "options": {"num_predict": 6, **greedy}}),
        ("ollama-generate-stream", "plain", "/api/generate",
         {"model": "m", "prompt": "the value", "options": {"num_predict": 6, **greedy}}),
        ("ollama-tools", tools, "/api/chat", {"model": "m", "messages": MSGS, "stream": False,
                                              "tools": OPENAI_TOOLS, "options": {"num_predict": 24, **greedy}}),
        ("ollama-tools-stream", tools, "/api/chat",
         {"model": "m", "messages": MSGS, "tools": OPENAI_TOOLS, "options": {"num_predict": 24, **greedy}}),
        ("ollama-error", "plain", "/api/chat", {"model": "m", "messages": "nope"}),
        ("infill", "fim", "/infill", {"input_prefix": "ab", "input_suffix": "z", "n_predict": 8, "return_tokens": True,
                                      **greedy}),
        ("infill-stream", "fim", "/infill", {"input_prefix": "ab", "input_suffix": "z", "n_predict": 8, "stream": True,
                                             **greedy}),
        ("infill-fields", "fim", "/infill", {"input_prefix": "ab", "input_suffix": "", "n_predict": 4,
                                             "response_fields": ["content", "timings/predicted_n"], **greedy}),
        ("text-suffix", "fim", "/v1/completions", {"model": "m", "prompt": "ab", "suffix": "z", "max_tokens": 8,
                                                   **greedy}),
        ("infill-error", "plain", "/infill", {"input_prefix": "ab", "input_suffix": "z"}),
    ]
    return out


@pytest.fixture(scope="module")
def servers(tiny_target, tiny_draft, tmp_path_factory):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    folder = tmp_path_factory.mktemp("wire")
    caller, caller_draft = write_scripted_pair(folder, SCRIPT)
    v = make_vocab(fim=True)
    fim = write_model(folder / "fim.gguf", vocab=v, name="fim",
                      chain=chain_through([v.id(FIM_TOKENS["fim_mid"])] + [v.id(c) for c in "cdefg"] + [2]))
    made = {}
    for name, target, draft in (("plain", tiny_target, tiny_draft), ("tools", caller, caller_draft),
                                ("fim", fim, fim)):
        # The prompt cache in memory only: states another test process left on disk would
        # make this module's first answers cached ones (cache_n), by the order tests ran in.
        eng = Engine(target, n_ctx=1024, metrics_log=False, calibration=False, prompt_cache=CacheLimits(disk_bytes=0))
        srv = ServerThread(create_app(ServedModel(eng, "m", draft=draft, lookahead=3), ServerConfig())).start()
        made[name] = (eng, srv)
    yield {name: srv.url for name, (_, srv) in made.items()}
    for eng, srv in made.values():
        srv.stop()
        eng.close()


def test_every_apis_wire_output_is_the_recorded_one(servers):
    got = {}
    with httpx.Client(timeout=120) as client:
        for name, server, path, body in cases():
            got[name] = record(client.post(servers[server] + path, json=body))
    if os.environ.get("TANDEM_RECORD_WIRE"):
        GOLDEN.write_text(json.dumps(got, ensure_ascii=False, indent=1) + "\n")
    want = json.loads(GOLDEN.read_text())
    assert list(got) == list(want)
    for name in want:
        if not alike(got[name], want[name]):
            assert got[name] == want[name], name  # pytest's diff of the two


def alike(got: Any, want: Any) -> bool:
    """Equal, floats within 1e-4 (relative, or absolute near 0)."""
    if isinstance(got, float) or isinstance(want, float):
        return isinstance(got, (int, float)) and isinstance(want, (int, float)) \
            and abs(got - want) <= 1e-4 * max(1.0, abs(want))
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(alike(got[k], want[k]) for k in want)
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(alike(a, b) for a, b in zip(got, want))
    return got == want


def test_alike_allows_a_floats_last_digits_and_nothing_else():
    assert alike({"a": [1.0000001, "x"]}, {"a": [1.0, "x"]})
    assert not alike({"a": [1.01, "x"]}, {"a": [1.0, "x"]})
    assert not alike({"a": [1.0, "y"]}, {"a": [1.0, "x"]})
    assert not alike({"a": 1.0, "b": 2}, {"a": 1.0})
    assert not alike([1.0], [1.0, 2.0])
    assert not alike("1.0", 1.0)
