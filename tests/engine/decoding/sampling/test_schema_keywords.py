"""JSON schema keywords are enforced by the grammar or refused with a 400 naming them, so a
constrained answer always matches its schema: integer ranges are written into the grammar
(llama.cpp's range rule), what the converter cannot express (number bounds, formats such as
email, uniqueItems, ...) and contradictions (minimum above maximum) are refused, and a
recursion that never ends says so."""

from __future__ import annotations

import json
import random
import re
from types import SimpleNamespace
from typing import Optional

import pytest
from pydantic import BaseModel, Field

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from engine import Engine  # noqa: E402
from engine.decoding.sampling.grammar import GrammarError, json_schema_grammar  # noqa: E402

MSGS = [{"role": "user", "content": "the value of the item"}]
RANGE = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 500, "maximum": 509}}, "required": ["n"]}


# -- the integer range rule ----------------------------------------------------------------------
def _as_regex(gbnf: str) -> re.Pattern:
    """The range rule's GBNF (literals, classes, groups, |, {m,n}) as a Python regex."""
    out = []
    for m in re.finditer(r'"([^"]*)"|(\[[^\]]*\])|(\{[^}]*\})|([()|])|\s+', gbnf):
        lit, cls, count, op = m.groups()
        out.append(re.escape(lit) if lit is not None else cls or count or op or "")
    return re.compile("(?:" + "".join(out) + ")")


def test_the_integer_range_rule_matches_exactly_the_range():
    from engine.llamacpp.int_range import int_range_rule

    rng = random.Random(33)
    cases = [(5, None), (None, 5), (0, None), (None, 0), (-3, None), (None, -3), (5, 1000), (-120, 37), (-50, -7),
             (0, 0), (10, None), (99, None), (101, None), (1001, None), (250, None), (None, 250), (None, -101),
             (-1001, None), (7, 123456)]
    cases += [tuple(sorted((rng.randint(-10**5, 10**5), rng.randint(-10**5, 10**5)))) for _ in range(20)]
    for low, high in cases:
        rx = _as_regex(int_range_rule(low, high))
        edges = [x + d for x in (low, high) if x is not None for d in (-1, 0, 1)]
        for n in list(range(-1100, 1100)) + [rng.randint(-10**9, 10**9) for _ in range(500)] + edges:
            want = (low is None or n >= low) and (high is None or n <= high)
            assert bool(rx.fullmatch(str(n))) == want, (low, high, n)
        for text in ("01", "00", "-", "", "1.0", "+1", "-01"):
            assert not rx.fullmatch(text), (low, high, text)


# -- what is refused, naming the keyword ---------------------------------------------------------
@pytest.mark.parametrize("schema, keyword", [
    ({"type": "integer", "minimum": 5, "maximum": 1}, "'minimum'"),
    ({"type": "integer", "exclusiveMinimum": 3, "exclusiveMaximum": 4}, "'minimum'"),
    ({"type": "number", "minimum": 0}, "'minimum'"),
    ({"type": "integer", "multipleOf": 3}, "'multipleOf'"),
    ({"type": "string", "format": "email"}, "'format'"),
    ({"type": "string", "minLength": 5, "maxLength": 2}, "'minLength'"),
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "'uniqueItems'"),
    ({"type": "object", "minProperties": 1}, "'minProperties'"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}, "'required'"),
    ({"not": {"type": "string"}}, "'not'"),
    ({"type": "string", "pattern": "^a+$", "maxLength": 3}, "'maxLength'"),
])
def test_a_keyword_the_grammar_would_skip_is_refused_by_name(schema, keyword):
    with pytest.raises(GrammarError, match=re.escape(keyword)):
        json_schema_grammar(schema)


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]},
    {"$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}, "required": ["next"]}},
     "$ref": "#/$defs/N"},
    {"$ref": "#"},
])
def test_a_recursion_without_end_says_recursion(schema):
    with pytest.raises(GrammarError, match="recursion"):
        json_schema_grammar(schema)


class Tree(BaseModel):
    value: int = Field(ge=0, le=9)
    children: list["Tree"] = Field(default_factory=list, max_length=3)


class Form(BaseModel):
    name: str = Field(max_length=20)
    age: Optional[int] = Field(None, ge=0, le=150)
    tags: list[str] = []


@pytest.mark.parametrize("schema", [
    Tree.model_json_schema(), Form.model_json_schema(),
    {"type": "object", "properties": {"child": {"$ref": "#"}, "v": {"type": "integer", "minimum": -5}}},
    {"type": ["string", "null"], "maxLength": 3},
    {"type": "integer", "format": "int32", "maxLength": 2},  # keywords of other types say nothing here
    {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "minItems": 2, "maxItems": 2},
    {"type": "array", "maxItems": 2}, {"type": "array", "items": {}}, {}, {"description": "any value"},
])
def test_common_schemas_still_compile(schema):
    assert "root ::=" in json_schema_grammar(schema)


def test_finishing_rules():
    from engine.llamacpp.gbnf_check import finishing_rules

    rules = {"root": 'a | "x" b', "a": '"{" a "}"', "b": '("y" b)* "z"{2,3}', "c": "[0-9]+ c?"}
    assert finishing_rules(rules) == {"root", "b", "c"}


# -- on the server -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(tiny_target, tiny_draft):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(tiny_target, n_ctx=1024, metrics_log=False)
    app = create_app(ServedModel(eng, "tiny-pair", draft=tiny_draft, lookahead=4), ServerConfig(list_catalog=False))
    srv = ServerThread(app).start()
    yield SimpleNamespace(eng=eng, url=srv.url)
    srv.stop()
    eng.close()


def chat(served, **body):
    base = {"model": "tiny-pair", "messages": MSGS, "max_tokens": 60, "temperature": 0}
    return httpx.post(served.url + "/v1/chat/completions", json={**base, **body}, timeout=300)


def test_minimum_above_maximum_is_a_400_naming_the_keyword(served):
    schema = {"type": "integer", "minimum": 5, "maximum": 1}
    r = chat(served, response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": schema}})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "response_format" and "'minimum'" in err["message"]
    r = chat(served, json_schema={"type": "number", "maximum": 3})
    assert r.status_code == 400 and "'maximum'" in r.json()["error"]["message"]


def test_an_integer_range_is_enforced_with_every_draft(served):
    texts = set()
    for draft in ("none", "lookup", "model"):
        r = chat(served, json_schema=RANGE, draft=draft)
        assert r.status_code == 200, r.text
        text = r.json()["choices"][0]["message"]["content"]
        assert 500 <= json.loads(text)["n"] <= 509, text
        texts.add(text)
    assert len(texts) == 1, texts


def test_a_forced_tool_call_keeps_to_its_integer_range_and_refuses_number_bounds(served):
    def call(params):
        tools = [{"type": "function", "function": {"name": "pick", "parameters": params}}]
        return chat(served, tools=tools, tool_choice="required")

    r = call(RANGE)
    assert r.status_code == 200, r.text
    calls = r.json()["choices"][0]["message"]["tool_calls"]
    assert calls and 500 <= json.loads(calls[0]["function"]["arguments"])["n"] <= 509
    r = call({"type": "object", "properties": {"x": {"type": "number", "minimum": 0}}, "required": ["x"]})
    assert r.status_code == 400 and "'minimum'" in r.json()["error"]["message"], r.text


def test_a_recursive_schema_that_can_end_is_served_and_matches(served):
    schema = {"type": "object", "properties": {"child": {"$ref": "#"}, "v": {"type": "integer", "minimum": 0,
                                                                           "maximum": 3}}, "required": ["v"]}
    r = chat(served, json_schema=schema, max_tokens=120)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    if choice["finish_reason"] == "stop":
        node = json.loads(choice["message"]["content"])
        while node is not None:
            assert 0 <= node["v"] <= 3
            node = node.get("child")
