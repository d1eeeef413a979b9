"""Structured output on the server: `response_format` json_object / json_schema (the official
SDK's `.parse()`), llama.cpp's `grammar` and `json_schema` fields, on both endpoints; the
answer always parses, greedy text is identical with every draft, bad input is a 400."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from engine import Engine  # noqa: E402

MSGS = [{"role": "user", "content": "the value of the item"}]


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Literal["the", "value", "item", "data"]
    count: int
    ok: bool


@pytest.fixture(scope="module")
def served(tiny_target, tiny_draft):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(tiny_target, n_ctx=1024, metrics_log=False)
    app = create_app(ServedModel(eng, "tiny-pair", draft=tiny_draft, lookahead=4), ServerConfig(list_catalog=False))
    srv = ServerThread(app).start()
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=120)
    yield SimpleNamespace(eng=eng, url=srv.url, client=client)
    client.close()
    srv.stop()
    eng.close()


def parse(client, draft: str, **kw):
    kw.setdefault("max_tokens", 200)
    return client.chat.completions.parse(model="tiny-pair", messages=MSGS, temperature=0, response_format=Item,
                                         extra_body={"draft": draft}, **kw)


def test_sdk_parse_returns_the_object_with_every_draft_and_the_same_text(served):
    texts = {}
    for draft in ("none", "lookup", "model"):
        r = parse(served.client, draft)
        msg = r.choices[0].message
        assert isinstance(msg.parsed, Item), msg.content
        assert r.choices[0].finish_reason == "stop"
        texts[draft] = msg.content
        if draft == "model":
            assert r.model_extra["timings"]["draft_n"] > 0
    assert len(set(texts.values())) == 1, texts
    ref = served.eng.generate(MSGS, chat=True, max_tokens=200, json_schema=Item.model_json_schema())
    assert Item.model_validate_json(ref.text)


def post(served, path: str, body: dict) -> httpx.Response:
    base = {"model": "tiny-pair", "max_tokens": 40, "temperature": 0}
    if path.endswith("chat/completions"):
        base["messages"] = MSGS
    else:
        base["prompt"] = "the value"
    return httpx.post(served.url + path, json={**base, **body}, timeout=120)


def content(r: httpx.Response) -> str:
    ch = r.json()["choices"][0]
    return ch["message"]["content"] if "message" in ch else ch["text"]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_json_object_and_grammar_on_both_endpoints(served, path):
    r = post(served, path, {"response_format": {"type": "json_object"}, "max_tokens": 200})
    assert r.status_code == 200, r.text
    text = content(r)
    assert text.lstrip().startswith("{")
    if r.json()["choices"][0]["finish_reason"] == "stop":
        assert isinstance(json.loads(text), dict)
    r = post(served, path, {"grammar": 'root ::= ("yes" | "no") "."'})
    assert r.status_code == 200 and content(r) in ("yes.", "no."), r.text
    r = post(served, path, {"json_schema": {"const": "42"}})
    assert r.status_code == 200 and content(r).strip() == '"42"', r.text


def test_streamed_structured_output_equals_the_whole_answer(served):
    fmt = {"type": "json_schema", "json_schema": {"name": "item", "schema": Item.model_json_schema(), "strict": True}}
    whole = served.client.chat.completions.create(model="tiny-pair", messages=MSGS, temperature=0, max_tokens=200,
                                                  response_format=fmt)
    chunks = served.client.chat.completions.create(model="tiny-pair", messages=MSGS, temperature=0, max_tokens=200,
                                                   response_format=fmt, stream=True, extra_body={"draft": "lookup"})
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    Item.model_validate_json(text)


BAD = [
    ({"response_format": {"type": "sound"}}, "response_format", "'json_object' or 'json_schema'"),
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": 5}}}, "response_format", "schema"),
    ({"response_format": {"type": "json_object", "schema": {"type": "hiccup"}}}, "response_format",
     "response_format cannot be turned into a grammar"),
    ({"grammar": 'root ::= "a'}, "grammar", "not a valid GBNF grammar"),
    ({"json_schema": {"type": 123}}, "json_schema", "json_schema"),
    ({"grammar": 'root ::= "a"', "response_format": {"type": "json_object"}}, "response_format", "not grammar and"),
]


@pytest.mark.parametrize("body,param,fragment", BAD, ids=[b[2] for b in BAD])
def test_bad_formats_get_a_400_naming_the_field(served, body, param, fragment):
    r = post(served, "/v1/chat/completions", body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["param"] == param, err
    assert fragment in err["message"] and "\n" not in err["message"], err["message"]
    assert httpx.get(served.url + "/health").json()["status"] == "ok"


@pytest.mark.real
def test_real_smollm2_parse_with_every_draft():
    from conftest import require_real

    from engine.serving.server import ServedModel, ServerThread, create_app

    class Colour(BaseModel):
        model_config = ConfigDict(extra="forbid")
        name: str
        warm: bool

    path = require_real("smollm2-135m-instruct-q4_1")
    eng = Engine(path, n_ctx=1024, metrics_log=False)
    try:
        app = create_app(ServedModel(eng, "smollm2", draft=path, lookahead=4))
        with ServerThread(app) as srv:
            c = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=120)
            q = [{"role": "user", "content": "Give one colour of the rainbow as JSON."}]
            texts = {}
            for draft in ("none", "lookup", "model"):
                r = c.chat.completions.parse(model="smollm2", messages=q, max_tokens=60, temperature=0,
                                             response_format=Colour, extra_body={"draft": draft})
                assert isinstance(r.choices[0].message.parsed, Colour), r.choices[0].message.content
                texts[draft] = r.choices[0].message.content
            assert len(set(texts.values())) == 1, texts
    finally:
        eng.close()


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_langchain_with_structured_output_returns_the_object(served, method):
    """LangChain's `with_structured_output`: through response_format json_schema, and through a
    forced tool call (tool_choice named); both come back as a validated Item."""
    pytest.importorskip("langchain_openai")
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(base_url=served.url + "/v1", api_key="none", model="tiny-pair", temperature=0,
                     max_tokens=200, max_retries=0)
    item = llm.with_structured_output(Item, method=method).invoke("the value of the item")
    assert isinstance(item, Item)
