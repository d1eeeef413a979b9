"""Ollama's API (`/api/*`) on `tandem serve`, driven by the official `ollama` client:
answers identical to the OpenAI endpoints' for the same request, NDJSON streams (the
default), options and format, the model listing, embeddings, tools with a scripted tiny
model, and Ollama-shaped errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

ollama = pytest.importorskip("ollama")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from engine.models.tinymodel import FIM_TOKENS, chain_through, make_vocab, write_model  # noqa: E402
from api_servers import KEY, api_server, scripted_server  # noqa: E402

AUTH = {"Authorization": f"Bearer {KEY}"}
MSGS = [{"role": "user", "content": "the value of the item"}]
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
SCRIPT = ["Sure.", "<tool_call>", "\n" + CALL + "\n", "</tool_call>"]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
GREEDY = {"temperature": 0, "num_predict": 24}
FILLED = "abcdefghijklm"  # distinct characters: what the FIM model writes after <|fim_middle|>
FIM_MARKUP = "<|fim_prefix|>def add(a, b):\n    <|fim_suffix|>\n\nprint(add(1, 2))\n<|fim_middle|>"


CLIENTS = {"client": lambda url: ollama.Client(host=url, headers=AUTH, timeout=60),
           "openai": lambda url: openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0, timeout=60)}


@pytest.fixture(scope="module")
def served(tiny_target, tiny_draft):
    with api_server(tiny_target, tiny_draft, CLIENTS, aliases=("llama3",)) as s:
        yield s


@pytest.fixture(scope="module")
def caller(tmp_path_factory):
    """A target that answers "Sure." and a <tool_call> block, then ends its turn."""
    yield from scripted_server(tmp_path_factory, "ollama_tools", SCRIPT, CLIENTS, aliases=("llama3",))


@pytest.fixture(scope="module")
def filler(tmp_path_factory):
    """A FIM model that writes FILLED after <|fim_middle|> (and anything else after other text)."""
    v = make_vocab(fim=True)
    ids = [v.id(FIM_TOKENS["fim_mid"])] + [v.id(c) for c in FILLED] + [2]
    target = write_model(tmp_path_factory.mktemp("ollama_fim") / "fim.gguf", vocab=v, chain=chain_through(ids),
                         name="fim")
    with api_server(target, target, CLIENTS, aliases=("llama3",)) as s:
        yield s


def chat(s, messages=MSGS, **kw):
    kw.setdefault("max_tokens", 24)
    return s.openai.chat.completions.create(model="tiny-pair", messages=messages, temperature=0, **kw)


@pytest.mark.parametrize("draft", ["none", "lookup", "model"])
def test_greedy_chat_is_the_openai_endpoints_streamed_or_not(served, draft):
    want = chat(served, extra_body={"draft": draft})
    r = served.client.chat(model="tiny-pair", messages=MSGS, options={**GREEDY, "draft": draft}, stream=False)
    assert r.message.role == "assistant" and r.message.content == want.choices[0].message.content
    assert r.done and r.done_reason == "length" and r.eval_count == 24
    assert r.prompt_eval_count == want.usage.prompt_tokens and r.eval_duration > 0
    raw = httpx.post(served.url + "/api/chat", headers=AUTH, timeout=60, json={  # the client drops extra fields
        "model": "tiny-pair", "messages": MSGS, "stream": False, "draft": draft, "options": GREEDY}).json()
    assert raw["message"]["content"] == r.message.content
    assert raw["timings"]["draft"] == {"none": "target", "lookup": "lookup", "model": "model"}[draft]
    parts = list(served.client.chat(model="tiny-pair:latest", messages=MSGS, options=GREEDY, stream=True))
    assert "".join(p.message.content for p in parts) == r.message.content
    assert [p.done for p in parts] == [False] * (len(parts) - 1) + [True] and parts[-1].done_reason == "length"


def test_streaming_is_the_default(served):
    r = httpx.post(served.url + "/api/chat", headers=AUTH, timeout=60,
                   json={"model": "tiny-pair", "messages": MSGS, "options": {"num_predict": 5, "temperature": 0}})
    assert r.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(x) for x in r.text.splitlines()]
    assert len(lines) > 1 and lines[-1]["done"] and lines[-1]["eval_count"] == 5


def test_generate_templated_and_raw(served):
    want = chat(served).choices[0].message.content
    g = served.client.generate(model="tiny-pair", prompt=MSGS[0]["content"], options=GREEDY)
    assert g.response == want and g.done_reason == "length"
    sys_want = chat(served, [{"role": "system", "content": "Be brief."}] + MSGS).choices[0].message.content
    assert served.client.generate(model="tiny-pair", prompt=MSGS[0]["content"], system="Be brief.",
                                  options=GREEDY).response == sys_want
    text = served.openai.completions.create(model="tiny-pair", prompt="def count(items):", max_tokens=8, temperature=0)
    raw = served.client.generate(model="tiny-pair", prompt="def count(items):", raw=True,
                                 options={"temperature": 0, "num_predict": 8})
    assert raw.response == text.choices[0].text
    streamed = served.client.generate(model="tiny-pair", prompt="def count(items):", raw=True, stream=True,
                                      options={"temperature": 0, "num_predict": 8})
    assert "".join(p.response for p in streamed) == raw.response


def generate(s, **body):
    r = httpx.post(s.url + "/api/generate", headers=AUTH, timeout=60,
                   json={"model": "tiny-pair", "stream": False, "options": {"temperature": 0, "num_predict": 16},
                         **body})
    return r.status_code, r.json()


def test_raw_fim_markup_reaches_the_model_as_its_tokens(filler):
    """raw: true means the client formatted the prompt: <|fim_prefix|> is that one control token
    (as Ollama tokenises a raw prompt), not 14 characters of text."""
    tok = filler.eng.target.tokenize
    status, g = generate(filler, prompt=FIM_MARKUP, raw=True)
    assert status == 200, g
    assert g["prompt_eval_count"] == len(tok(FIM_MARKUP, add_special=True, parse_special=True))
    assert g["prompt_eval_count"] < len(tok(FIM_MARKUP, add_special=True, parse_special=False)) - 20
    assert g["response"] == FILLED  # the model saw <|fim_middle|> last
    streamed = [json.loads(x) for x in httpx.post(filler.url + "/api/generate", headers=AUTH, timeout=60, json={
        "model": "tiny-pair", "prompt": FIM_MARKUP, "raw": True, "options": {"temperature": 0}}).text.splitlines()]
    assert "".join(p["response"] for p in streamed) == FILLED and streamed[-1]["prompt_eval_count"] == g[
        "prompt_eval_count"]
    # everywhere else control-token text stays text: /v1/completions' prompt
    text = filler.openai.completions.create(model="tiny-pair", prompt=FIM_MARKUP, max_tokens=4, temperature=0)
    assert text.usage.prompt_tokens == len(tok(FIM_MARKUP, add_special=True, parse_special=False))


def test_suffix_fills_in_the_middle_as_completions_suffix(filler, served):
    status, g = generate(filler, prompt="def add(a, b):\n    ", suffix="\n\nprint(add(1, 2))\n")
    assert status == 200, g
    want = filler.openai.completions.create(model="tiny-pair", prompt="def add(a, b):\n    ", max_tokens=16,
                                            temperature=0, suffix="\n\nprint(add(1, 2))\n")
    assert g["response"] == want.choices[0].text == FILLED
    assert g["prompt_eval_count"] == want.usage.prompt_tokens
    assert filler.client.generate(model="tiny-pair", prompt="def add(a, b):\n    ", suffix="\n",
                                  options={"temperature": 0}).response == FILLED  # the official client's field
    status, err = generate(served, prompt="def add(a, b):", suffix="\n")  # a model without FIM tokens
    assert status == 400 and set(err) == {"error"} and "no fill-in-the-middle tokens" in err["error"]
    for body in ({"raw": True, "system": "Be brief."}, {"suffix": "x", "system": "Be brief."}):
        status, err = generate(filler, prompt="x", **body)
        assert status == 400 and err["error"].startswith("system: not used with"), err


def test_show_names_insert_for_a_fim_model(filler, served):
    assert "insert" in filler.client.show("tiny-pair").capabilities
    assert "insert" not in served.client.show("tiny-pair").capabilities


def test_options_and_format_reach_the_request(served):
    base = served.client.chat(model="tiny-pair", messages=MSGS, options=GREEDY)
    stopped_at = base.message.content[5:8]
    cut = served.client.chat(model="tiny-pair", messages=MSGS, options={**GREEDY, "stop": [stopped_at]})
    assert cut.message.content == base.message.content[:base.message.content.index(stopped_at)]
    assert cut.done_reason == "stop"
    as_json = served.client.chat(model="tiny-pair", messages=MSGS, format="json", options=GREEDY)
    want = chat(served, response_format={"type": "json_object"}).choices[0].message.content
    assert as_json.message.content == want != base.message.content
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    typed = served.client.chat(model="tiny-pair", messages=MSGS, format=schema, options={"temperature": 0})
    assert isinstance(json.loads(typed.message.content)["n"], int)
    sampled = [served.client.chat(model="tiny-pair", messages=MSGS, options={"temperature": 1.0, "seed": 7,
                                                                              "num_predict": 12}).message.content
               for _ in range(2)]
    assert sampled[0] == sampled[1]  # a seed makes a sampled answer repeatable


def test_tags_show_ps_and_version(served, tiny_target):
    tags = served.client.list()
    assert [m.model for m in tags.models] == ["tiny-pair", "llama3"]
    assert tags.models[0].details.format == "gguf" and tags.models[0].size == tiny_target.stat().st_size
    show = served.client.show("llama3:latest")
    assert "completion" in show.capabilities and show.details.family == "llama"
    assert show.modelinfo["tandem.n_ctx"] == 1024 and show.template == served.eng.target.chat_template
    ps = served.client.ps()
    assert ps.models[0].context_length == 1024 and ps.models[0].name == "tiny-pair"
    assert httpx.get(served.url + "/api/version", headers=AUTH).json()["version"]


def test_embed_is_the_openai_endpoints(served):
    want = served.openai.embeddings.create(model="tiny-pair", input=["hello", "world"])
    got = served.client.embed(model="tiny-pair", input=["hello", "world"])
    assert np.allclose(got.embeddings, [d.embedding for d in want.data])
    legacy = served.client.embeddings(model="tiny-pair", prompt="hello")
    assert np.allclose(legacy.embedding, got.embeddings[0])


def test_an_empty_request_loads_the_model(served):
    r = httpx.post(served.url + "/api/generate", headers=AUTH, json={"model": "tiny-pair", "stream": False})
    assert r.json()["done_reason"] == "load"


def test_errors_have_ollamas_shape(served):
    with pytest.raises(ollama.ResponseError) as e:
        served.client.chat(model="mistral", messages=MSGS)
    assert e.value.status_code == 404 and "does not exist" in e.value.error
    for body in ({"model": "tiny-pair", "messages": [{"role": "user", "content": "x", "images": ["AAAA"]}]},
                 {"model": "tiny-pair", "messages": MSGS, "format": "yaml"},
                 {"model": "tiny-pair", "messages": MSGS, "options": {"temperature": 9}}):
        r = httpx.post(served.url + "/api/chat", headers=AUTH, json=body)
        assert r.status_code == 400 and set(r.json()) == {"error"}, r.text
    r = httpx.post(served.url + "/api/generate", headers=AUTH, json={"model": "tiny-pair", "prompt": "x", "context": [1]})
    assert r.status_code == 400 and "context" in r.json()["error"]
    r = httpx.post(served.url + "/api/chat", json={"model": "tiny-pair", "messages": MSGS})
    assert r.status_code == 401 and "API key" in r.json()["error"]


def test_tool_calls_streamed_or_not_and_a_tool_result(caller):
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = caller.client.chat(model="tiny-pair", messages=ask, tools=TOOLS, options={"temperature": 0})
    assert r.message.content == "Sure."
    assert [(c.function.name, dict(c.function.arguments)) for c in r.message.tool_calls] == \
        [("get_weather", {"city": "Paris"})]
    parts = list(caller.client.chat(model="tiny-pair", messages=ask, tools=TOOLS, options={"temperature": 0},
                                    stream=True))
    calls = [c for p in parts for c in p.message.tool_calls or []]
    assert [c.function.arguments for c in calls] == [{"city": "Paris"}]
    assert "".join(p.message.content for p in parts) == "Sure."
    history = ask + [{"role": "assistant", "content": "Sure.", "tool_calls": [
        {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": "22 C", "tool_name": "get_weather"}]
    again = caller.client.chat(model="tiny-pair", messages=history, tools=TOOLS, options={"temperature": 0})
    want = chat(caller, ask + [{"role": "assistant", "content": "Sure.", "tool_calls": [
        {"id": "call_1_0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1_0", "name": "get_weather", "content": "22 C"}], tools=TOOLS)
    assert again.prompt_eval_count == want.usage.prompt_tokens
