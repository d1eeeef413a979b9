"""Free tool calls under `tool_choice: auto` stream as they are written: the text before the
call as content, then the call's header once its name is written and its arguments piece by
piece (OpenAI's `delta.tool_calls[].function.arguments` chunks), from the point where the lazy
call grammar takes over. Exact under speculation: the same answer and the same final call with
a draft model (a random one, and the target drafting for itself, which drafts through the
grammar's start), prompt lookup and none, streamed or whole. Scripted tiny models write the
call over several tokens, in a `<tool_call>` tag and in a fenced block (the default pair's form)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import openai
import pytest

pytest.importorskip("fastapi")

from engine import Engine  # noqa: E402
from scripted_models import write_scripted_pair  # noqa: E402

ARGS = '{"city": "Paris", "days": 3}'
FORMS = {
    "tag": ["Sure.", "<tool_call>", '\n{"name": "get_weather", ', '"arguments": {"city": ', '"Par', 'is", ',
            '"days": 3}}', "\n</tool_call>"],
    "fence": ["Let me check.", "\n```json\n", '{"name": "get_weather", ', '"arguments": {"city": ', '"Par', 'is", ',
              '"days": 3}}', "\n```"],
}
CONTENT = {"tag": "Sure.", "fence": "Let me check.\n"}
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}}]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module", params=list(FORMS))
def served(request, tmp_path_factory):
    from engine.serving.server import ServedModel, ServerThread, create_app

    form = request.param
    target, draft = write_scripted_pair(tmp_path_factory.mktemp(f"auto_{form}"), FORMS[form], name=f"auto-{form}")
    eng = Engine(target, n_ctx=1024, metrics_log=False)
    srv = ServerThread(create_app(ServedModel(eng, "caller", draft=draft, lookahead=3))).start()
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=60)
    yield SimpleNamespace(form=form, eng=eng, client=client, target=target)
    client.close()
    srv.stop()
    eng.close()


def ask(served, draft, **kw):
    return served.client.chat.completions.create(model="caller", messages=ASK, tools=TOOLS, temperature=0,
                                                 extra_body={"draft": draft}, **kw)


def streamed(served, draft, **kw):
    chunks = list(ask(served, draft, stream=True, **kw))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    return SimpleNamespace(content="".join(d.content or "" for d in deltas),
                           parts=[tc for d in deltas for tc in d.tool_calls or []],
                           finish=[c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason])


@pytest.mark.parametrize("draft", ["none", "lookup", "model"])
def test_a_free_call_streams_its_arguments_as_they_are_written(served, draft):
    s = streamed(served, draft, max_tokens=32)
    assert s.content == CONTENT[served.form] and s.finish == ["tool_calls"]
    head, *pieces = s.parts
    assert head.index == 0 and head.id.startswith("call_") and head.function.name == "get_weather"
    assert head.function.arguments == ""
    args = [p.function.arguments for p in pieces]
    assert len(args) >= 3, args  # the arguments in several pieces, not one piece once the call is complete
    assert "".join(args) == ARGS and all(p.index == 0 and p.id is None for p in pieces)
    whole = ask(served, draft, max_tokens=32).choices[0]
    assert whole.finish_reason == "tool_calls" and whole.message.content == CONTENT[served.form]
    [call] = whole.message.tool_calls
    assert call.function.name == "get_weather" and call.function.arguments == ARGS


def test_the_same_answer_with_every_draft_and_with_the_target_drafting_for_itself(served):
    from engine.serving.server import ServedModel, ServerThread, create_app

    seen = set()
    for draft in ("none", "lookup", "model"):
        r = ask(served, draft, max_tokens=32)
        seen.add((r.choices[0].message.content, r.choices[0].message.tool_calls[0].function.arguments,
                  r.usage.completion_tokens))
    # a draft that agrees with the target drafts through the call's start, where the grammar begins
    srv = ServerThread(create_app(ServedModel(served.eng, "caller", draft=served.target, lookahead=6))).start()
    try:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=60)
        r = client.chat.completions.create(model="caller", messages=ASK, tools=TOOLS, temperature=0, max_tokens=32)
        assert r.model_extra["timings"]["draft_n_accepted"] > 3
        seen.add((r.choices[0].message.content, r.choices[0].message.tool_calls[0].function.arguments,
                  r.usage.completion_tokens))
        client.close()
    finally:
        srv.stop()
    assert len(seen) == 1, seen


def test_a_call_cut_short_keeps_what_was_written_streamed_or_whole(served):
    s = streamed(served, "lookup", max_tokens=5)
    whole = ask(served, "lookup", max_tokens=5).choices[0]
    assert whole.finish_reason == s.finish[0] == "length"
    [call] = whole.message.tool_calls
    assert call.function.name == "get_weather"
    assert "".join(p.function.arguments for p in s.parts[1:]) == call.function.arguments
    assert ARGS.startswith(call.function.arguments) and call.function.arguments != ARGS


def test_with_tool_choice_none_the_answer_is_text(served):
    r = ask(served, "lookup", max_tokens=32, tool_choice="none").choices[0]
    assert r.message.tool_calls is None and r.message.content == "".join(FORMS[served.form])
