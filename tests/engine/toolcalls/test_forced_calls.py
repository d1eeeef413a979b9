"""A grammar-forced tool call read as it is written: its header as soon as the name is known,
its arguments piece by piece, and the pieces always join into the arguments of the same
answer read whole (cut short or not, at any split)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from engine.toolcalls.forced_calls import ForcedCallStream, json_end, read_forced, scan

HERMES = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa}r\\"is", "days": [1, {"x": "]"}]}}\n'
          '</tool_call>\n<tool_call>\n{"name": "lookup", "arguments": {}}\n</tool_call>')
BARE = '{"name": "get_weather", "arguments": {"city": "Rome"}}\n{"name": "lookup", "arguments": {"ids": [3]}}'


def stream(text: str, cuts: list[int]) -> tuple[list[dict], str, tuple, bool]:
    """Feed `text` split at `cuts`: (every delta item, the rest, the calls, cut short)."""
    split, items, prev = ForcedCallStream(), [], 0
    for c in sorted(set(cuts)) + [len(text)]:
        assert split.feed(text[prev:c]) == ""  # nothing of a forced answer streams as content
        items += split.deltas()
        prev = c
    rest, calls = split.finish()
    return items + split.deltas(), rest, calls, split.cut_short


@pytest.mark.parametrize("text", [HERMES, BARE])
def test_a_whole_forced_answer_is_its_calls_with_the_arguments_as_written(text):
    answer = read_forced(text)
    assert answer.content == "" and not answer.cut_short
    assert [c.name for c in answer.calls] == ["get_weather", "lookup"]
    assert [json.loads(c.arguments) for c in answer.calls][1] in ({}, {"ids": [3]})
    assert answer.calls[0].arguments in text  # the model's own text, not re-serialised


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([HERMES, BARE]), st.data())
def test_streamed_pieces_join_into_the_whole_answers_arguments_at_any_split_and_any_cut(text, data):
    end = data.draw(st.integers(0, len(text)))  # where the answer was cut short (len: not cut)
    cuts = data.draw(st.lists(st.integers(0, end), max_size=12))
    items, rest, calls, cut_short = stream(text[:end], cuts)
    whole = read_forced(text[:end])
    assert [(c.name, c.arguments) for c in calls] == [(c.name, c.arguments) for c in whole.calls]
    assert rest == whole.content and cut_short == whole.cut_short
    heads = [it for it in items if "id" in it]
    assert [(h["index"], h["function"]["name"], h["function"]["arguments"]) for h in heads] == \
        [(i, c.name, "") for i, c in enumerate(calls)]
    assert [h["id"] for h in heads] == [c.id for c in calls]  # the ids sent are the calls' ids
    for i, call in enumerate(calls):
        assert "".join(it["function"]["arguments"] for it in items if it["index"] == i) == call.arguments
    # every header comes before its call's arguments
    for i in range(len(calls)):
        assert min(k for k, it in enumerate(items) if it["index"] == i) == items.index(heads[i])


def test_each_token_sends_only_what_it_added():
    split = ForcedCallStream()
    split.feed('<tool_call>\n{"name": "get_wea')
    assert split.deltas() == []  # the name is not complete yet
    split.feed('ther"')
    (head,) = split.deltas()
    assert head["function"] == {"name": "get_weather", "arguments": ""} and head["id"].startswith("call_")
    split.feed(', "arguments": ')
    assert split.deltas() == []
    for piece in ('{"city": ', '"Paris"', "}"):
        split.feed(piece)
        assert split.deltas() == [{"index": 0, "function": {"arguments": piece}}]
    split.feed("}\n</tool_call>")
    assert split.deltas() == []
    assert split.finish()[1][0].arguments == '{"city": "Paris"}' and not split.cut_short


def test_a_call_cut_short_keeps_what_was_written():
    answer = read_forced('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa')
    assert answer.cut_short and [(c.name, c.arguments) for c in answer.calls] == [("get_weather", '{"city": "Pa')]
    early = read_forced('<tool_call>\n{"na')  # no name yet: the text as it is
    assert early.calls == () and early.content == '<tool_call>\n{"na'


def test_json_end_knows_strings_and_nesting():
    assert json_end('{"a": "}", "b": [1, {"c": "]"}]} tail', 0) == 32
    assert json_end('{"a": "\\"}"', 0) is None
    assert scan('  {"name": "f", "arguments": {}}')[0].done
