"""What an agent sees from a local server: a weather tool through the openai and anthropic
SDKs (the call, then the answer after its result), /infill with and without a draft, and
the Responses and Ollama APIs, each through its own client.

    python -m tools.agent_check [--pair qwen2.5-coder-1.5b] [--system TEXT | --no-system]
        [--url http://127.0.0.1:PORT]   # check a running server instead of starting one

It prints one line per check and exits 1 when one failed. Small models need a system
prompt to answer from a tool result (docs/server.md, "Tool calling"): the default one is
what agent frameworks send; `--no-system` shows the bare model. Needs the pair in the
model store (`tandem pull`) and the openai, anthropic and ollama packages (the test extra).
"""

from __future__ import annotations

import argparse
import contextlib
import json
from typing import Any

from tools.serve_process import served

SYSTEM = ("You are a helpful assistant. Call a tool when you need data; when a tool result is given, "
          "answer the user's question from it in plain language.")
QUESTION = "What is the weather in Paris right now?"
PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city",
                                           "parameters": PARAMS}}]
RESULT = {"temperature_c": 18, "sky": "cloudy"}
FIM = {"input_prefix": "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
       "input_suffix": "\n\nprint(fibonacci(10))\n", "n_predict": 48, "temperature": 0}


def _openai(base: str, system: list[dict[str, Any]]) -> list[tuple[str, bool, str]]:
    import openai

    c = openai.OpenAI(base_url=base + "/v1", api_key="local", timeout=600)
    msgs: list[Any] = system + [{"role": "user", "content": QUESTION}]
    r = c.chat.completions.create(model="any", messages=msgs, tools=TOOLS, tool_choice="auto", temperature=0,
                                  max_tokens=120)
    ch = r.choices[0]
    calls = ch.message.tool_calls or []
    called = ch.finish_reason == "tool_calls" and any(
        t.function.name == "get_weather" and "paris" in t.function.arguments.lower() for t in calls)
    out = [("openai: tool_choice auto calls get_weather(Paris)", called,
            f"finish={ch.finish_reason} calls={[(t.function.name, t.function.arguments) for t in calls]}")]
    if not calls:
        return out
    msgs += [ch.message.model_dump(exclude_none=True),
             {"role": "tool", "tool_call_id": calls[0].id, "content": json.dumps(RESULT)}]
    r2 = c.chat.completions.create(model="any", messages=msgs, tools=TOOLS, tool_choice="auto", temperature=0,
                                   max_tokens=80)
    text = r2.choices[0].message.content or ""
    answered = r2.choices[0].finish_reason == "stop" and "18" in text and not text.lstrip().startswith(("{", "`"))
    out.append(("openai: after the result, an answer in text", answered,
                f"finish={r2.choices[0].finish_reason} {text[:160]!r}"))
    return out


def _anthropic(base: str, system: str | None) -> list[tuple[str, bool, str]]:
    import anthropic

    a = anthropic.Anthropic(base_url=base, api_key="local", timeout=600)
    tools = [{"name": "get_weather", "description": "Current weather for a city", "input_schema": PARAMS}]
    extra: dict[str, Any] = {"system": system} if system else {}
    user = {"role": "user", "content": QUESTION}
    m = a.messages.create(model="any", max_tokens=120, tools=tools, messages=[user], extra_body={"temperature": 0}, **extra)
    use = next((b for b in m.content if b.type == "tool_use"), None)
    out = [("anthropic: stop_reason tool_use with the city", m.stop_reason == "tool_use" and use is not None
            and "paris" in json.dumps(use.input).lower(), f"stop={m.stop_reason} input={getattr(use, 'input', None)}")]
    if use is None:
        return out
    m2 = a.messages.create(model="any", max_tokens=80, tools=tools, extra_body={"temperature": 0}, **extra, messages=[
        user, {"role": "assistant", "content": [b.model_dump() for b in m.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": json.dumps(RESULT)}]}])
    text = "".join(b.text for b in m2.content if b.type == "text")
    out.append(("anthropic: after the result, an answer in text", m2.stop_reason == "end_turn" and "18" in text
                and not text.lstrip().startswith(("{", "`")), f"stop={m2.stop_reason} {text[:160]!r}"))
    return out


def _infill(base: str) -> list[tuple[str, bool, str]]:
    import httpx

    fills = {}
    for draft in ("none", "lookup"):
        r = httpx.post(base + "/infill", json={**FIM, "draft": draft}, timeout=600)
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code} {r.text[:200]}")
        fills[draft] = r.json()["content"]
    return [("/infill: a completion, the same with draft none and lookup",
             bool(fills["none"].strip()) and fills["none"] == fills["lookup"], repr(fills["none"][:120]))]


def _other_apis(base: str) -> list[tuple[str, bool, str]]:
    import ollama
    import openai

    out = []
    rr = openai.OpenAI(base_url=base + "/v1", api_key="local", timeout=600).responses.create(
        model="any", input="Say hello in three words.", max_output_tokens=16)
    out.append(("/v1/responses through the openai SDK", bool(rr.output_text.strip()), repr(rr.output_text[:80])))
    oc = ollama.Client(host=base)
    tags = [x.model for x in oc.list().models]
    out.append(("/api/tags through the ollama client", bool(tags), str(tags[:3])))
    said = oc.chat(model=tags[0] if tags else "any", messages=[{"role": "user", "content": "Say hi"}],
                   options={"num_predict": 8, "temperature": 0}).message.content or ""
    out.append(("/api/chat through the ollama client", bool(said.strip()), repr(said[:80])))
    return out


def _guarded(name: str, check: Any, *args: Any) -> list[tuple[str, bool, str]]:
    """A check that raised (a 4xx from the server, a client's validation error) is one
    failed line naming what it was, never a traceback that hides the other checks."""
    try:
        return check(*args)
    except Exception as e:  # noqa: BLE001 - every failure is reported, as one line
        return [(name, False, f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")]


def run(base: str, system: str | None) -> list[tuple[str, bool, str]]:
    sys_msgs = [{"role": "system", "content": system}] if system else []
    return (_guarded("openai tool calls", _openai, base, sys_msgs) + _guarded("anthropic tool use", _anthropic, base, system)
            + _guarded("/infill", _infill, base) + _guarded("other APIs", _other_apis, base))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pair", default="qwen2.5-coder-1.5b")
    ap.add_argument("--url", help="a running server to check instead of starting one")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--system", default=SYSTEM, help="the system prompt the tool checks send")
    group.add_argument("--no-system", action="store_true", help="send no system prompt")
    args = ap.parse_args(argv)
    system = None if args.no_system else args.system
    with contextlib.nullcontext(args.url) if args.url else served("--pair", args.pair, "--alias", "*") as base:
        results = run(base, system)
    for name, ok, detail in results:
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
    return 0 if all(ok for _, ok, _ in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
