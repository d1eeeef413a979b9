"""The forms small models write their tool calls in, as llama.cpp's parsers read them.

The answers are the ones llama.cpp's own tests feed its Hermes 2 Pro (Qwen 2.5), Llama 3.x,
Functionary and Mistral parsers (tests/test-chat.cpp of the vendored llama.cpp, with its
`special_function` / `python` tools), plus the fenced block the default pair's 1.5B model
writes with `tool_choice: auto`. Each must give the same call; calls of functions not
offered, or with arguments the schema refuses, stay text; and a stream split anywhere
sends exactly the whole answer's content and calls, holding only what may still be a call.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from engine.toolcalls.tool_args import offered_tools
from engine.toolcalls.tool_calls import ToolCallStream, parse

TOOLS = [
    {"type": "function", "function": {"name": "special_function", "description": "I'm special", "parameters": {
        "type": "object", "properties": {"arg1": {"type": "integer", "description": "The arg."}}, "required": ["arg1"]}}},
    {"type": "function", "function": {"name": "python", "parameters": {
        "type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}},
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"location": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["location"]}}},
]
OFFERED = offered_tools(TOOLS)
CALL = '{"name": "special_function", "arguments": {"arg1": 1}}'
SPECIAL = [("special_function", {"arg1": 1})]

# (answer, calls, content): llama.cpp's test-chat.cpp answers for the Hermes 2 Pro parser (Qwen 2.5's)
HERMES = [
    (f"<tool_call>\n{CALL}\n</tool_call>", SPECIAL, ""),
    (f"Hello, world!\nWhat's up?<tool_call>\n{CALL}\n</tool_call>", SPECIAL, "Hello, world!\nWhat's up?"),
    ('<function=special_function>{"arg1": 1}</function>', SPECIAL, ""),
    ('<function name="special_function">\n{"arg1": 1}\n</function>', SPECIAL, ""),
    (f"<tool>\n  {CALL}\n</tool>", SPECIAL, ""),
    (f"<tools>\n  {CALL}\n</tools>", SPECIAL, ""),
    (f"<response>\n  {CALL}\n</response>", SPECIAL, ""),
    (f"```xml\n<response>\n    {CALL}\n</response>\n```", SPECIAL, ""),
    (f"```xml\n  {CALL}\n```", SPECIAL, ""),
    (f"```\n  {CALL}\n```", SPECIAL, ""),
    (f"```\n{CALL}\n```", SPECIAL, ""),
    (f"```json\n  {CALL}\n```", SPECIAL, ""),
    (f"```json\n\n                    <function_call> {CALL} \n                    </function_call> \n``` ", SPECIAL, " "),
    (f"<json>\n  {CALL}\n</json>", SPECIAL, ""),
    ('<xml>\n  {\n    "name": "special_function", "arguments": {"arg1": 1}\n  }\n</xml>', SPECIAL, ""),
    (f"<JSON>\n  {CALL}\n</JSON>", SPECIAL, ""),
    (CALL, SPECIAL, ""),
    ('{\n  "name": "special_function", "arguments": {"arg1": 1}}', SPECIAL, ""),
    (f"<tool_call>\n{CALL}\n</tool_call>\n<tool_call>\n"
     '{"name": "python", "arguments": {"code":"print(\'hello\')"}}\n</tool_call>',
     SPECIAL + [("python", {"code": "print('hello')"})], "\n"),
    ('<function=special_function>{"arg1": 1}</function>\n<function=python>{"code":"print(\'hello\')"}</function>',
     SPECIAL + [("python", {"code": "print('hello')"})], "\n"),
    (f"This is not a tool call:\n{CALL}", SPECIAL, "This is not a tool call:\n"),
]
# Llama 3.x, Functionary v3.1, Mistral Nemo / Small 3.2, and the default pair's fenced block
OTHERS = [
    ('{"name": "special_function", "parameters": {"arg1": 1}}', SPECIAL, ""),
    ('<|python_tag|>{"name": "special_function", "parameters": {"arg1": 1}}', SPECIAL, ""),
    ('{"type": "function", "name": "special_function", "parameters": {"arg1": 1}}', SPECIAL, ""),
    ('{"type": "function", "function": {"name": "special_function", "arguments": "{\\"arg1\\": 1}"}}', SPECIAL, ""),
    ('{"name": "special_function", "parameters": {"arg1": 1}}; {"name": "python", "parameters": {"code": "1"}}',
     SPECIAL + [("python", {"code": "1"})], ""),
    ('[{"name": "special_function", "arguments": {"arg1": 1}}, {"name": "python", "arguments": {"code": "1"}}]',
     SPECIAL + [("python", {"code": "1"})], ""),
    ('[TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}, "id": "123456789"}]', SPECIAL, ""),
    ('[TOOL_CALLS]special_function[ARGS]{"arg1":1}', SPECIAL, ""),
    ('[TOOL_CALLS]special_function[CALL_ID]123456789[ARGS]{"arg1": 1}', SPECIAL, ""),
    ('Hello, world!\nWhat\'s up?[TOOL_CALLS]special_function[ARGS]{"arg1": 1}', SPECIAL, "Hello, world!\nWhat's up?"),
    ('[TOOL_CALLS]special_function[ARGS]{"arg1": 1}[TOOL_CALLS]python[ARGS]{"code": "1"}',
     SPECIAL + [("python", {"code": "1"})], ""),
    ('```json\n{"name": "get_weather", "arguments": {"location": "Paris, France", "unit": "celsius"}}\n```',
     [("get_weather", {"location": "Paris, France", "unit": "celsius"})], ""),
    ('To get the weather, I will call the function.\n\n```json\n{\n  "name": "get_weather",\n  "arguments": {\n'
     '    "location": "Paris"\n  }\n}\n```', [("get_weather", {"location": "Paris"})],
     "To get the weather, I will call the function.\n\n"),
    ('```json\n[{"name": "get_weather", "parameters": {"location": "Oslo"}}]\n```', [("get_weather", {"location": "Oslo"})], ""),
]


@pytest.mark.parametrize("text, calls, content", HERMES + OTHERS)
def test_each_form_gives_the_call(text, calls, content):
    answer = parse(text, OFFERED)
    assert [(c.name, json.loads(c.arguments)) for c in answer.calls] == calls
    assert answer.content == content


TEXT = [
    "Hello, world!\nWhat's up?",
    "Hello, world!\nWhat's up?\n```json\n{}```",  # llama.cpp: text
    "```python\nprint('hi')\n```",
    '```json\n{"name": "Bob", "age": 3}\n```',  # JSON, but no offered function
    '```json\n{"name": "special_function", "arguments": {"arg1": "one"}}\n```',  # the schema says integer
    '{"name": "special_function", "arguments": {}}',  # a required argument missing
    '<function=rm_rf>{"path": "/"}</function>',  # not offered
    '<function=special_function>{"arg1": 1} and more</function>',  # not closed as it must be
    f"```json\n{CALL}\nand then prose\n```",  # the fence not closed after the call: all text
    '[TOOL_CALLS]rm_rf[ARGS]{"x": 1}',
    "<|python_tag|>python.call(code=\"print('hey')\")",  # Llama's built-in tools are not functions offered
    "a < b and c > d; see [the docs](https://x) and {braces} and `code`",
    "<tool_call>nah uhg</tool_call>",
    "[1, 2, 3]", '{"answer": 42}', "", "  \n",
    # Qwen2.5-Coder 1.5B after a tool result: the call echoed with its result, in its template's
    # own double braces. A report of a call already made, not a new one.
    '{{"name": "get_weather", "arguments": {"location": "Paris"}, "response": {"temperature_c": 18}}}',
    '{"name": "get_weather", "arguments": {"location": "Paris"}, "result": "18 C"}',
]


@pytest.mark.parametrize("text", TEXT)
def test_anything_else_stays_text(text):
    answer = parse(text, OFFERED)
    assert answer.calls == () and answer.content == text


def test_names_only_accept_any_arguments_object():
    """Without schemas (names only) the arguments are not checked; an unknown name still is text."""
    text = '```json\n{"name": "special_function", "arguments": {"arg1": "one"}}\n```'
    assert [c.name for c in parse(text, ["special_function"]).calls] == ["special_function"]
    assert parse(text, ["python"]).calls == ()


def test_a_schema_jsonschema_cannot_read_checks_nothing():
    odd = offered_tools([{"type": "function", "function": {"name": "f", "parameters": {"type": 12}}}])
    assert [c.name for c in parse('{"name": "f", "arguments": {"x": 1}}', odd).calls] == ["f"]


# -- streaming -------------------------------------------------------------------------------------
STREAMED = [t for t, _, _ in HERMES + OTHERS] + TEXT + [
    "Sure, let me check.\n```json\n" + CALL + "\n```\nDone.",
    "Code:\n```python\nx = {'a': 1}\n```\nand a call " + CALL,
    "<tool_c is not a tag, <toolbox> neither, and [TOOL isn't Mistral's",
]


def _stream(text: str, cuts: list[int]) -> tuple[list[str], str, tuple, list]:
    split = ToolCallStream(OFFERED)
    pieces, items, last = [], [], 0
    for cut in sorted(set(cuts)) + [len(text)]:
        pieces.append(split.feed(text[last:cut]))
        items += split.deltas()
        last = cut
    rest, calls = split.finish()
    items += split.deltas()
    return pieces, "".join(pieces) + rest, calls, items


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(STREAMED), st.lists(st.integers(0, 400), max_size=14))
def test_a_stream_split_anywhere_agrees_with_the_whole_answer(text, cuts):
    whole = parse(text, OFFERED)
    _, content, calls, items = _stream(text, [c for c in cuts if c <= len(text)])
    assert content == whole.content
    assert [(c.name, c.arguments) for c in calls] == [(c.name, c.arguments) for c in whole.calls]
    heads = [it for it in items if "id" in it]
    assert [h["function"]["name"] for h in heads] == [c.name for c in whole.calls]
    for i, c in enumerate(calls):
        assert "".join(it["function"]["arguments"] for it in items if it["index"] == i) == c.arguments


@pytest.mark.parametrize("text", STREAMED)
def test_every_character_split(text):
    _, content, calls, _ = _stream(text, list(range(len(text))))
    whole = parse(text, OFFERED)
    assert content == whole.content and [c.name for c in calls] == [c.name for c in whole.calls]


def test_text_streams_until_a_call_starts_then_the_call_goes_out_once_complete():
    split = ToolCallStream(OFFERED)
    assert split.feed("Sure, let me check.\n") == "Sure, let me check.\n"
    assert split.feed("```") == ""  # may open a fenced call: held
    assert split.feed("json\n{\"name\": \"get_weather\", ") == ""
    assert split.deltas() == []
    assert split.feed('"arguments": {"location": "Paris"}}\n') == ""
    assert split.feed("```") == ""  # the call is closed, but more calls could follow? no: a fence holds one
    items = split.deltas()
    assert [it["function"].get("name") for it in items if "id" in it] == ["get_weather"]
    assert split.feed("\nDone.") == "\nDone."
    rest, calls = split.finish()
    assert rest == "" and [c.name for c in calls] == ["get_weather"]


def test_held_text_is_released_as_soon_as_it_cannot_be_a_call():
    split = ToolCallStream(OFFERED)
    assert split.feed("Here:\n```") == "Here:\n"
    assert split.feed("py") == "```py"  # no fence language of a call starts with 'py'
    assert split.feed("thon\nx = {") == "thon\nx = "
    assert split.feed("1}") == "{1}"  # not an object with a name
    assert split.feed(' {"name": "Bo') == " "
    assert split.feed('b"') == '{"name": "Bob"'  # no offered function is called Bob
    assert split.feed("<") == ""
    assert split.feed("b>") == "<b>"
    assert split.finish() == ("", ())
