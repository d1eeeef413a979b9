"""Anthropic's Messages API (`/v1/messages`) on `tandem serve`, driven by the official
`anthropic` client: answers identical to the chat endpoint's, Anthropic's stream events,
a tool_use / tool_result round trip with a scripted tiny model, the key headers and
Anthropic-shaped errors."""

from __future__ import annotations


import pytest

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from api_servers import KEY, api_server, scripted_server  # noqa: E402

MSGS = [{"role": "user", "content": "the value of the item"}]
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
SCRIPT = ["Sure.", "<tool_call>", "\n" + CALL + "\n", "</tool_call>"]
LONDON = '{"name": "get_weather", "arguments": {"city": "London"}}'
TWO_CALLS = SCRIPT[:3] + ["</tool_call>\n<tool_call>", "\n" + LONDON + "\n", "</tool_call>"]  # each piece once
TOOL = {"name": "get_weather", "description": "The weather in a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
GREEDY = {"temperature": 0}  # the newest anthropic clients take sampling settings only as extra_body


CLIENTS = {"client": lambda url: anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0, timeout=60),
           "openai": lambda url: openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0, timeout=60)}


@pytest.fixture(scope="module")
def served(tiny_target, tiny_draft):
    with api_server(tiny_target, tiny_draft, CLIENTS) as s:
        yield s


@pytest.fixture(scope="module")
def caller(tmp_path_factory):
    """A target that answers "Sure." and a <tool_call> block, then ends its turn."""
    yield from scripted_server(tmp_path_factory, "anthropic_tools", SCRIPT, CLIENTS)


@pytest.fixture(scope="module")
def two_calls(tmp_path_factory):
    """A target that answers "Sure." and two <tool_call> blocks (Paris, then London)."""
    yield from scripted_server(tmp_path_factory, "anthropic_two_calls", TWO_CALLS, CLIENTS)


def chat(s, messages, **kw):
    kw.setdefault("max_tokens", 24)
    return s.openai.chat.completions.create(model="tiny-pair", messages=messages, temperature=0, **kw)


def create(s, extra=None, **kw):
    kw.setdefault("max_tokens", 24)
    kw.setdefault("messages", MSGS)
    return s.client.messages.create(model="tiny-pair", extra_body={**GREEDY, **(extra or {})}, **kw)


@pytest.mark.parametrize("draft", ["none", "lookup", "model"])
def test_greedy_text_is_the_chat_endpoints(served, draft):
    want = chat(served, [{"role": "system", "content": "Be brief."}] + MSGS, extra_body={"draft": draft})
    m = create(served, system="Be brief.", extra={"draft": draft})
    assert m.type == "message" and m.role == "assistant" and m.id.startswith("msg_")
    assert [b.type for b in m.content] == ["text"] and m.content[0].text == want.choices[0].message.content
    assert m.stop_reason == "max_tokens" and m.stop_sequence is None
    assert m.usage.output_tokens == 24
    assert m.usage.input_tokens + m.usage.cache_read_input_tokens == want.usage.prompt_tokens
    assert m.model_extra["timings"]["draft"] == {"none": "target", "lookup": "lookup", "model": "model"}[draft]
    blocks = create(served, system=[{"type": "text", "text": "Be brief."}], extra={"draft": draft})
    assert blocks.content[0].text == m.content[0].text


def test_streaming_sends_anthropics_events(served):
    whole = create(served)
    with served.client.messages.stream(model="tiny-pair", max_tokens=24, messages=MSGS, extra_body=GREEDY) as s:
        events = list(s)
        final = s.get_final_message()
    kinds = [e.type for e in events if not e.type.startswith(("text", "input_json"))]  # the SDK's own extras
    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(kinds[2:-3]) == {"content_block_delta"}
    deltas = [e.delta.text for e in events if e.type == "content_block_delta"]
    assert "".join(deltas) == whole.content[0].text == final.content[0].text
    assert final.stop_reason == "max_tokens" and final.usage.output_tokens == 24
    prompt = whole.usage.input_tokens + whole.usage.cache_read_input_tokens
    assert events[0].message.usage.input_tokens == prompt  # message_start tells the prompt's size
    assert final.usage.input_tokens + final.usage.cache_read_input_tokens == prompt  # from message_delta


def test_a_stop_sequence_ends_the_answer_and_is_named(served):
    text = create(served).content[0].text
    stop = text[6:9]
    cut = text[:text.index(stop)]
    m = create(served, stop_sequences=[stop])
    assert m.content[0].text == cut and m.stop_reason == "stop_sequence" and m.stop_sequence == stop


def test_provenance_and_lookahead_are_accepted_as_extensions(served):
    m = create(served, extra={"draft": "model", "lookahead": 2, "provenance": True})
    assert m.model_extra["timings"]["lookahead"] in (2, "2")
    assert len(m.model_extra["provenance"]) == 24


def test_the_key_as_x_api_key_or_bearer_and_any_version(served):
    body = {"model": "tiny-pair", "max_tokens": 2, "messages": MSGS}
    for headers in ({"x-api-key": KEY, "anthropic-version": "2023-06-01"}, {"Authorization": f"Bearer {KEY}"},
                    {"x-api-key": KEY, "anthropic-version": "2099-01-01"}):
        assert httpx.post(served.url + "/v1/messages", json=body, headers=headers, timeout=60).status_code == 200
    bad = anthropic.Anthropic(base_url=served.url, api_key="wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as e:
        bad.messages.create(model="tiny-pair", max_tokens=2, messages=MSGS)
    assert e.value.body["type"] == "error" and e.value.body["error"]["type"] == "authentication_error"


@pytest.mark.parametrize("body, fragment", [
    ({"messages": MSGS}, "max_tokens: this field is required"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
     "an image block needs a base64 source"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]},
     "'document' blocks are not supported"),
    ({"max_tokens": 4, "messages": MSGS, "tools": [{"type": "web_search_20250305", "name": "web_search"}]},
     "only custom tools"),
    ({"max_tokens": 4, "messages": [{"role": "system", "content": "x"}]}, "must be 'user' or 'assistant'"),
    ({"max_tokens": 4, "messages": MSGS, "model": "claude-nope"}, "does not exist"),
])
def test_bad_requests_get_anthropics_error_shape(served, body, fragment):
    r = httpx.post(served.url + "/v1/messages", json={"model": "tiny-pair", **body}, headers={"x-api-key": KEY},
                   timeout=30)
    assert r.status_code in (400, 404), r.text
    out = r.json()
    assert out["type"] == "error" and fragment in out["error"]["message"]
    assert out["error"]["type"] == ("not_found_error" if r.status_code == 404 else "invalid_request_error")


def test_a_tool_use_round_trip(caller):
    m = create(caller, tools=[TOOL], messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    assert m.stop_reason == "tool_use"
    assert [b.type for b in m.content] == ["text", "tool_use"] and m.content[0].text == "Sure."
    use = m.content[1]
    assert use.name == "get_weather" and use.input == {"city": "Paris"} and use.id
    history = [{"role": "user", "content": "What is the weather in Paris?"},
               {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "22 C"}]}]
    again = create(caller, tools=[TOOL], messages=history)
    chat_tools = [{"type": "function", "function": {"name": TOOL["name"], "description": TOOL["description"],
                                                    "parameters": TOOL["input_schema"]}}]
    want = chat(caller, [history[0], {"role": "assistant", "content": "Sure.", "tool_calls": [
        {"id": use.id, "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": use.id, "content": "22 C"}], tools=chat_tools)
    assert again.usage.input_tokens + again.usage.cache_read_input_tokens == want.usage.prompt_tokens
    assert again.stop_reason == {"tool_calls": "tool_use", "stop": "end_turn"}[want.choices[0].finish_reason]


def test_a_streamed_tool_use_and_a_forced_one(caller):
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    with caller.client.messages.stream(model="tiny-pair", max_tokens=24, messages=ask, tools=[TOOL],
                                       extra_body=GREEDY) as s:
        events = list(s)
        final = s.get_final_message()
    starts = [e.content_block.type for e in events if e.type == "content_block_start"]
    assert starts == ["text", "tool_use"]
    assert any(e.type == "content_block_delta" and e.delta.type == "input_json_delta" for e in events)
    assert final.stop_reason == "tool_use" and final.content[1].input == {"city": "Paris"}
    for choice in ({"type": "any"}, {"type": "tool", "name": "get_weather"}):
        forced = create(caller, tools=[TOOL], tool_choice=choice, messages=ask)
        uses = [b for b in forced.content if b.type == "tool_use"]
        assert forced.stop_reason == "tool_use" and [u.input for u in uses] == [{"city": "Paris"}]


def test_two_streamed_tool_uses_each_end_before_the_next_starts(two_calls):
    """Anthropic's stream has one content block open at a time: content_block_stop ends each
    before the next content_block_start (the second tool_use used to start inside the first)."""
    ask = [{"role": "user", "content": "The weather in Paris and London?"}]
    events = list(two_calls.client.messages.create(model="tiny-pair", max_tokens=48, messages=ask, tools=[TOOL],
                                                   stream=True, extra_body=GREEDY))
    blocks = [(e.type.removeprefix("content_block_"), e.index) for e in events if e.type.startswith("content_block")]
    order = [b for i, b in enumerate(blocks) if i == 0 or b != blocks[i - 1]]  # a run of deltas as one
    assert order == [(kind, i) for i in range(3) for kind in ("start", "delta", "stop")]
    assert [e.type for e in events][-2:] == ["message_delta", "message_stop"]
    starts = [e.content_block for e in events if e.type == "content_block_start"]
    assert [b.type for b in starts] == ["text", "tool_use", "tool_use"]
    with two_calls.client.messages.stream(model="tiny-pair", max_tokens=48, messages=ask, tools=[TOOL],
                                          extra_body=GREEDY) as s:
        final = s.get_final_message()  # the SDK's accumulator reads the same stream
    assert final.stop_reason == "tool_use"
    assert [b.input for b in final.content if b.type == "tool_use"] == [{"city": "Paris"}, {"city": "London"}]


def test_count_tokens_is_the_prompt_the_answer_reads(served):
    n = served.client.messages.count_tokens(model="tiny-pair", system="Be brief.", messages=MSGS)
    m = create(served, system="Be brief.", max_tokens=2)
    assert n.input_tokens == m.usage.input_tokens + m.usage.cache_read_input_tokens
    with_tools = served.client.messages.count_tokens(model="tiny-pair", messages=MSGS, tools=[TOOL])
    assert with_tools.input_tokens > n.input_tokens  # the tools are offered in the prompt
