"""OpenAI's Responses API (`/v1/responses`) on `tandem serve`, driven by the official `openai`
client: answers identical to the chat endpoint's for the same conversation, the documented
stream events, previous_response_id, function tools with a scripted tiny model, and errors."""

from __future__ import annotations

import json

import pytest

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from api_servers import KEY, api_server, scripted_server  # noqa: E402

ASK = "the value of the item"
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
SCRIPT = ["Sure.", "<tool_call>", "\n" + CALL + "\n", "</tool_call>"]
LONDON = '{"name": "get_weather", "arguments": {"city": "London"}}'
TWO_CALLS = SCRIPT[:3] + ["</tool_call>\n<tool_call>", "\n" + LONDON + "\n", "</tool_call>"]  # each piece once
TOOL = {"type": "function", "name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


CLIENTS = {"client": lambda url: openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0, timeout=60)}


@pytest.fixture(scope="module")
def served(tiny_target, tiny_draft):
    with api_server(tiny_target, tiny_draft, CLIENTS) as s:
        yield s


@pytest.fixture(scope="module")
def caller(tmp_path_factory):
    """A target that answers "Sure." and a <tool_call> block, then ends its turn."""
    yield from scripted_server(tmp_path_factory, "responses_tools", SCRIPT, CLIENTS)


@pytest.fixture(scope="module")
def two_calls(tmp_path_factory):
    """A target that answers "Sure." and two <tool_call> blocks (Paris, then London)."""
    yield from scripted_server(tmp_path_factory, "responses_two_calls", TWO_CALLS, CLIENTS)


def chat(s, messages, **kw):
    kw.setdefault("max_tokens", 24)
    return s.client.chat.completions.create(model="tiny-pair", messages=messages, temperature=0, **kw)


def respond(s, **kw):
    kw.setdefault("max_output_tokens", 24)
    return s.client.responses.create(model="tiny-pair", temperature=0, **kw)


@pytest.mark.parametrize("draft", ["none", "lookup", "model"])
def test_greedy_text_is_the_chat_endpoints(served, draft):
    want = chat(served, [{"role": "user", "content": ASK}], extra_body={"draft": draft})
    r = respond(served, input=ASK, extra_body={"draft": draft})
    assert r.object == "response" and r.id.startswith("resp_") and r.model == "tiny-pair"
    assert r.output_text == want.choices[0].message.content
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"  # 24 tokens, cut
    assert r.usage.output_tokens == 24 == want.usage.completion_tokens
    assert r.usage.input_tokens == want.usage.prompt_tokens
    assert r.model_extra["timings"]["draft"] == {"none": "target", "lookup": "lookup", "model": "model"}[draft]


def test_items_and_instructions_are_the_same_conversation(served):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": ASK},
                {"role": "assistant", "content": "It is 4."}, {"role": "user", "content": "and the next"}]
    want = chat(served, messages).choices[0].message.content
    items = [{"role": "user", "content": [{"type": "input_text", "text": ASK}]},
             {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It is 4."}]},
             {"role": "user", "content": "and the next"}]
    assert respond(served, instructions="Be brief.", input=items).output_text == want


def test_streaming_sends_the_documented_events(served):
    whole = respond(served, input=ASK)
    events = list(respond(served, input=ASK, stream=True))
    kinds = [e.type for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.incomplete"]
    assert set(kinds[4:-4]) == {"response.output_text.delta"}
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == whole.output_text == events[-4].text
    final = events[-1].response
    assert final.output_text == text and final.usage.output_tokens == 24
    assert events[0].response.status == "in_progress" and final.status == "incomplete"


def test_previous_response_id_continues_the_conversation(served):
    first = respond(served, input=ASK, instructions="Be brief.")
    second = respond(served, input="and the next", previous_response_id=first.id, max_output_tokens=12)
    want = chat(served, [{"role": "user", "content": ASK}, {"role": "assistant", "content": first.output_text},
                         {"role": "user", "content": "and the next"}], max_tokens=12)  # instructions not carried over
    assert second.output_text == want.choices[0].message.content
    assert second.previous_response_id == first.id
    assert served.client.responses.retrieve(first.id).output_text == first.output_text
    served.client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError, match="no response with id"):
        respond(served, input="x", previous_response_id=first.id)


def test_the_store_forgets_the_oldest_first():
    from engine.serving.server.apis.responses import ResponseStore

    store = ResponseStore(limit=2)
    for i in range(3):
        store.put({"id": f"r{i}"}, [{"role": "user", "content": str(i)}])
    assert store.get("r0") is None and store.get("r1") is not None and store.get("r2")[1][0]["content"] == "2"


def test_store_false_keeps_nothing(served):
    r = respond(served, input=ASK, store=False, max_output_tokens=4)
    with pytest.raises(openai.NotFoundError):
        served.client.responses.retrieve(r.id)


def test_a_function_call_and_its_output(caller):
    r = respond(caller, input="What is the weather in Paris?", tools=[TOOL])
    kinds = [it.type for it in r.output]
    assert kinds == ["message", "function_call"] and r.status == "completed"
    call = r.output[1]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    assert call.call_id.startswith("call_") and r.output_text == "Sure."
    # the call's output sent back: the same conversation as the chat endpoint's
    items = [{"role": "user", "content": "What is the weather in Paris?"},
             {"type": "function_call", "call_id": call.call_id, "name": "get_weather", "arguments": call.arguments},
             {"type": "function_call_output", "call_id": call.call_id, "output": "22 C"}]
    again = respond(caller, input=items, tools=[TOOL])
    chat_tools = [{"type": "function", "function": {k: v for k, v in TOOL.items() if k != "type"}}]
    want = chat(caller, [{"role": "user", "content": "What is the weather in Paris?"},
                         {"role": "assistant", "content": None, "tool_calls": [{"id": call.call_id, "type": "function",
                          "function": {"name": "get_weather", "arguments": call.arguments}}]},
                         {"role": "tool", "tool_call_id": call.call_id, "content": "22 C"}], tools=chat_tools)
    assert again.usage.input_tokens == want.usage.prompt_tokens
    assert again.output_text == (want.choices[0].message.content or "")
    # previous_response_id carries the answer's text and call too
    chained = respond(caller, previous_response_id=r.id, tools=[TOOL],
                      input=[{"type": "function_call_output", "call_id": call.call_id, "output": "22 C"}])
    with_text = [{"role": "user", "content": "What is the weather in Paris?"},
                 {"role": "assistant", "content": "Sure.", "tool_calls": [{"id": call.call_id, "type": "function",
                  "function": {"name": "get_weather", "arguments": call.arguments}}]},
                 {"role": "tool", "tool_call_id": call.call_id, "content": "22 C"}]
    assert chained.usage.input_tokens == chat(caller, with_text, tools=chat_tools).usage.prompt_tokens


def test_a_streamed_function_call(caller):
    events = list(respond(caller, input="What is the weather in Paris?", tools=[TOOL], stream=True))
    kinds = [e.type for e in events]
    assert "response.function_call_arguments.delta" in kinds and kinds[-1] == "response.completed"
    added = [e.item for e in events if e.type == "response.output_item.added"]
    assert [a.type for a in added] == ["message", "function_call"] and added[1].name == "get_weather"
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert json.loads(args) == json.loads(done.arguments) == {"city": "Paris"}
    final = events[-1].response
    assert [it.type for it in final.output] == ["message", "function_call"] and final.output_text == "Sure."


def test_two_streamed_calls_each_end_before_the_next_is_added(two_calls):
    """OpenAI's stream writes one output item at a time: its .done events and output_item.done
    before the next output_item.added (the second call used to be added inside the first)."""
    events = list(respond(two_calls, input="The weather in Paris and London?", tools=[TOOL], stream=True,
                          max_output_tokens=48))
    kinds = [e.type.removeprefix("response.") for e in events]
    order = [k for i, k in enumerate(kinds) if i == 0 or k != kinds[i - 1] or not k.endswith(".delta")]
    call = ["output_item.added", "function_call_arguments.delta", "function_call_arguments.done", "output_item.done"]
    assert order == ["created", "in_progress", "output_item.added", "content_part.added", "output_text.delta",
                     "output_text.done", "content_part.done", "output_item.done"] + call + call + ["completed"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    items = [(e.output_index, e.item.type) for e in events if e.type == "response.output_item.done"]
    assert items == [(0, "message"), (1, "function_call"), (2, "function_call")]
    done = [json.loads(e.arguments) for e in events if e.type == "response.function_call_arguments.done"]
    assert done == [{"city": "Paris"}, {"city": "London"}]
    final = events[-1].response
    assert [json.loads(it.arguments) for it in final.output if it.type == "function_call"] == done


def test_a_forced_call_with_tool_choice(caller):
    r = respond(caller, input="weather?", tools=[TOOL], tool_choice={"type": "function", "name": "get_weather"})
    calls = [it for it in r.output if it.type == "function_call"]
    assert [c.name for c in calls] == ["get_weather"] and json.loads(calls[0].arguments) == {"city": "Paris"}


@pytest.mark.parametrize("body, fragment", [
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "a data:image/...;base64"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "x"}]}]}, "only text and input_image parts"),
    ({"input": [{"role": "system", "content": [{"type": "input_image", "image_url": "x"}]}]}, "only text parts"),
    ({"input": "x", "tools": [{"type": "web_search"}]}, "only function tools"),
    ({"input": [{"type": "item_reference", "id": "x"}]}, "'item_reference' are not supported"),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
    ({}, "input: this field is required"),
])
def test_bad_requests_get_one_clear_400(served, body, fragment):
    r = httpx.post(served.url + "/v1/responses", json={"model": "tiny-pair", **body},
                   headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert fragment in err["message"] and "\n" not in err["message"]


def test_the_key_is_checked_as_on_the_chat_endpoint(served):
    r = httpx.post(served.url + "/v1/responses", json={"model": "tiny-pair", "input": "x"}, timeout=30)
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
