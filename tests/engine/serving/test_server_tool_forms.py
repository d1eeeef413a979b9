"""A model that writes its tool call as a fenced JSON block (as the default pair's 1.5B does
with `tool_choice: auto`), through `tandem serve` and real clients, and the second turn.

The scripted tiny model (its next token depends only on the current one) carries Qwen 2.5's
own chat template (tests/templates/qwen2.5-instruct.jinja: llama.cpp's
models/templates/Qwen-Qwen2.5-7B-Instruct.jinja, the template the Qwen 2.5 GGUFs carry). It
answers "Let me check." and then a ```` ```json ```` block calling get_weather: the openai SDK
gets finish_reason "tool_calls" with the city, streamed and not, with every draft choice;
langchain's `bind_tools` runs the tool; the second turn (the SDK's own assistant message and
the tool's result sent back) is rendered in the template's own `<tool_call>` /
`<tool_response>` form."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import openai
import pytest

from engine import Engine
from scripted_models import write_scripted_pair

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
QWEN25 = (ROOT / "tests" / "templates" / "qwen2.5-instruct.jinja").read_text(encoding="utf-8")
SCRIPT = ["Let me check.", "\n```json\n", '{"name": "get_weather", ', '"arguments": {"city": "Paris"}}', "\n```"]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from engine.serving.server import ServedModel, ServerThread, create_app

    target, draft = write_scripted_pair(tmp_path_factory.mktemp("fenced"), SCRIPT, name="fenced", draft_seed=8,
                                        chat_template=QWEN25)
    eng = Engine(target, n_ctx=2048, metrics_log=False)
    srv = ServerThread(create_app(ServedModel(eng, "qwen", draft=draft, lookahead=3))).start()
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=60)
    yield SimpleNamespace(eng=eng, url=srv.url, client=client)
    client.close()
    srv.stop()
    eng.close()


def ask(served, **kw):
    extra = {k: kw.pop(k) for k in ("draft",) if k in kw}
    kw.setdefault("messages", ASK)
    kw.setdefault("max_tokens", 16)
    return served.client.chat.completions.create(model="qwen", temperature=0, extra_body=extra or None, **kw)


@pytest.mark.parametrize("draft", ["none", "lookup", "model"])
def test_a_fenced_json_call_is_a_tool_call(served, draft):
    r = ask(served, tools=TOOLS, tool_choice="auto", draft=draft)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me check.\n"  # the text before the call
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_") and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}


@pytest.mark.parametrize("draft", ["none", "model"])
def test_the_streamed_call_matches_and_text_comes_first(served, draft):
    whole = ask(served, tools=TOOLS, draft=draft).choices[0]
    chunks = [c for c in ask(served, tools=TOOLS, stream=True, draft=draft) if c.choices]
    deltas = [c.choices[0].delta for c in chunks]
    assert "".join(d.content or "" for d in deltas) == whole.message.content
    parts = [tc for d in deltas for tc in d.tool_calls or []]
    assert parts[0].function.name == "get_weather" and parts[0].id.startswith("call_")
    assert "".join(p.function.arguments or "" for p in parts) == whole.message.tool_calls[0].function.arguments
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    first_text = next(i for i, d in enumerate(deltas) if d.content)
    assert first_text < next(i for i, d in enumerate(deltas) if d.tool_calls)


def test_without_tools_the_same_answer_is_text(served):
    """Parsing reads the output, never changes it: the same tokens with tools not offered."""
    plain = ask(served, tools=TOOLS, tool_choice="none").choices[0]
    assert plain.finish_reason == "stop" and plain.message.tool_calls is None
    assert plain.message.content == "".join(SCRIPT)


def test_a_call_of_a_function_not_offered_is_text(served):
    other = [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]
    r = ask(served, tools=other).choices[0]
    assert r.finish_reason == "stop" and r.message.tool_calls is None and r.message.content == "".join(SCRIPT)


def test_the_sdk_stream_helper_accumulates_the_call(served):
    with served.client.chat.completions.stream(model="qwen", messages=ASK, tools=TOOLS, temperature=0,
                                               max_tokens=16) as stream:
        final = stream.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    assert final.choices[0].finish_reason == "tool_calls"


QWEN_TOOLS_SYSTEM = (
    "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\n"
    "You may call one or more functions to assist with the user query.\n\nYou are provided with function "
    "signatures within <tools></tools> XML tags:\n<tools>\n" + json.dumps(TOOLS[0], ensure_ascii=False) +
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n")
SECOND_TURN = (
    "<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n"
    "<|im_start|>assistant\nLet me check.\n\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n'
    "<|im_start|>user\n<tool_response>\n22 C and sunny\n</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n")


def test_the_second_turn_renders_the_call_and_its_result_in_qwens_own_form(served):
    """The SDK's own assistant message and the tool's result come back; the prompt is the
    Qwen 2.5 tool-use text, token for token (the call as a `<tool_call>` block with its
    arguments as an object, the result as a user turn in `<tool_response>` tags)."""
    eng = served.eng
    first = ask(served, tools=TOOLS).choices[0].message
    assistant = first.model_dump(exclude_none=True)  # content "Let me check.\n" and the call
    result = {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "22 C and sunny"}
    history = ASK + [assistant, result]
    tokens = eng.tokens_for(history, chat=True, tools=TOOLS)
    assert tokens == eng.target.tokenize(QWEN_TOOLS_SYSTEM + SECOND_TURN, parse_special=True)
    r = ask(served, messages=history, tools=TOOLS)
    assert r.usage.prompt_tokens == len(tokens)
    # the tools not offered again: Qwen's plain system prompt, the history in the same form
    plain = "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
    assert eng.tokens_for(history, chat=True) == eng.target.tokenize(plain + SECOND_TURN, parse_special=True)


def test_langchain_bind_tools_runs_the_tool_end_to_end(served):
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    ran = []

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        ran.append(city)
        return "22 C and sunny"

    llm = ChatOpenAI(base_url=served.url + "/v1", api_key="none", model="qwen", temperature=0, max_tokens=16,
                     max_retries=0).bind_tools([get_weather])
    messages = [HumanMessage("What is the weather in Paris?")]
    reply = llm.invoke(messages)
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [("get_weather", {"city": "Paris"})]
    for call in reply.tool_calls:
        messages += [reply, ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"])]
    assert ran == ["Paris"]
    streamed = None
    for part in llm.stream(messages[:1]):
        streamed = part if streamed is None else streamed + part
    assert [(c["name"], c["args"]) for c in streamed.tool_calls] == [("get_weather", {"city": "Paris"})]
    second = llm.invoke(messages)  # the scripted model answers the same way; the round trip is accepted
    assert second.response_metadata["finish_reason"] == "tool_calls"
