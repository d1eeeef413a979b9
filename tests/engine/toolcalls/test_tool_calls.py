"""Tool calls without a server: each family's call format parsed (malformed -> text), the
stream split at every boundary agrees with the whole-answer parse, tools rendered through
a real template (Qwen 2.5's) or the fallback system prompt, and the GBNF that forces a call
is accepted by llama.cpp's own grammar parser and matches what the parser reads back."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from engine.decoding.prompting.chat import CHATML, render
from engine.decoding.prompting.tool_prompt import call_format, takes_tools
from engine.toolcalls.tool_args import offered_tools
from engine.toolcalls.tool_calls import ToolCallStream, parse
from engine.toolcalls.tool_grammar import tool_call_grammar

NAMES = ["get_weather", "lookup"]
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
                                          "required": ["city"]}}},
    {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {
        "ids": {"type": "array", "items": {"type": "integer"}}}}}},
]
WEATHER = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
OFFERED = offered_tools(TOOLS)

# Qwen2.5-Instruct's chat template as its GGUF carries it (tokenizer.chat_template of the default pair)
QWEN25 = (
    "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n    {%- else %}\n"
    "        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n    {%- endif %}\n"
    "    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n"
    "    {%- for tool in tools %}\n        {{- \"\\n\" }}\n        {{- tool | tojson }}\n    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": "
    "<args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n{%- else %}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n    {%- else %}\n"
    "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    "<|im_end|>\\n' }}\n    {%- endif %}\n{%- endif %}\n{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or "
    "(message.role == \"assistant\" and not message.tool_calls) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n        {{- '<|im_start|>' + message.role }}\n"
    "        {%- if message.content %}\n            {{- '\\n' + message.content }}\n        {%- endif %}\n"
    "        {%- for tool_call in message.tool_calls %}\n            {%- if tool_call.function is defined %}\n"
    "                {%- set tool_call = tool_call.function %}\n            {%- endif %}\n"
    "            {{- '\\n<tool_call>\\n{\"name\": \"' }}\n            {{- tool_call.name }}\n"
    "            {{- '\", \"arguments\": ' }}\n            {{- tool_call.arguments | tojson }}\n"
    "            {{- '}\\n</tool_call>' }}\n        {%- endfor %}\n        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == \"tool\" %}\n"
    "        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}\n"
    "            {{- '<|im_start|>user' }}\n        {%- endif %}\n        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- message.content }}\n        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
    "            {{- '<|im_end|>\\n' }}\n        {%- endif %}\n    {%- endif %}\n{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n"
)
HISTORY = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "22 C, sunny"},
]


# -- parsing each family's form ---------------------------------------------------------------------
@pytest.mark.parametrize("text, calls, content", [
    (f"<tool_call>\n{WEATHER}\n</tool_call>", [("get_weather", {"city": "Paris"})], ""),  # Qwen / Hermes
    (f"Let me look.\n<tool_call>{WEATHER}</tool_call>\n<tool_call>{{\"name\": \"lookup\", \"arguments\": "
     '{"ids": [1, 2]}}</tool_call>', [("get_weather", {"city": "Paris"}), ("lookup", {"ids": [1, 2]})],
     "Let me look.\n\n"),  # several calls, text before
    (f"<tool_call>\n{WEATHER}", [("get_weather", {"city": "Paris"})], ""),  # close tag cut by the end of turn
    ('<tool_call>{"name": "lookup", "arguments": "{\\"ids\\": [3]}"}</tool_call>', [("lookup", {"ids": [3]})], ""),
    ('{"name": "get_weather", "parameters": {"city": "Oslo"}}', [("get_weather", {"city": "Oslo"})], ""),  # Llama 3
    ('<|python_tag|>{"name": "lookup", "parameters": {}}; {"name": "get_weather", "parameters": {"city": "X"}}',
     [("lookup", {}), ("get_weather", {"city": "X"})], ""),
    ('[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Rome"}}, {"name": "lookup", "arguments": {}}]',
     [("get_weather", {"city": "Rome"}), ("lookup", {})], ""),  # Mistral
    ('[{"name": "get_weather", "arguments": {"city": "Rome"}}]', [("get_weather", {"city": "Rome"})], ""),  # marker empty
])
def test_each_family_form_is_parsed(text, calls, content):
    answer = parse(text, NAMES)
    assert [(c.name, json.loads(c.arguments)) for c in answer.calls] == calls
    assert answer.content == content
    assert all(c.id.startswith("call_") and len(c.id) > 10 for c in answer.calls)
    assert len({c.id for c in answer.calls}) == len(calls)


@pytest.mark.parametrize("text", [
    "<tool_call>{not json}</tool_call>",
    '<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>',  # not an offered function
    '<tool_call>{"arguments": {}}</tool_call>',  # no name
    '<tool_call>{"name": "lookup", "arguments": [1]}</tool_call>',  # arguments not an object
    f'<tool_call>{WEATHER} trailing</tool_call>',  # not closed as it must be: all text, the inner call too
    '<tool_call>{"name": "get_weather", "arguments": {"city": 7}}</tool_call>',  # arguments against the schema
    '<tool_call>{"name": "get_weather", "arguments": {"unit": "c"}}</tool_call>',  # a required argument missing
    '[TOOL_CALLS]not a list', "<|python_tag|>", "[1, 2, 3]", '{"answer": 42}', "plain text", "", "  \n",
])
def test_malformed_calls_are_plain_text(text):
    answer = parse(text, OFFERED)
    assert answer.calls == () and answer.content == text


@pytest.mark.parametrize("text, content", [
    # as llama.cpp's Hermes parser reads them: a call stands on its own, text around it is content
    (f"<tool_call>{WEATHER}</tool_call><tool_call>{{broken", "<tool_call>{broken"),
    ('{"name": "get_weather", "parameters": {"city": "Oslo"}} and then prose', " and then prose"),
])
def test_text_after_a_call_is_content(text, content):
    answer = parse(text, OFFERED)
    assert [c.name for c in answer.calls] == ["get_weather"] and answer.content == content


# -- streaming -------------------------------------------------------------------------------------
ANSWERS = [
    "Hello there, no tools today.",
    f"Checking.\n<tool_call>\n{WEATHER}\n</tool_call>",
    f"<tool_call>{WEATHER}</tool_call> done <tool_call>{WEATHER}</tool_call>",
    "a < b and <tool is not a call",
    '  {"name": "lookup", "parameters": {"ids": [7]}}',
    "[TOOL_CALLS][{\"name\": \"lookup\", \"arguments\": {}}]",
    "<tool_call>{broken</tool_call> so this is text",
    "text then <|python_tag|>{\"name\": \"lookup\", \"parameters\": {}}",
]


def _stream(text: str, cuts: list[int]) -> tuple[list[str], str, tuple]:
    split = ToolCallStream(NAMES)
    pieces, last = [], 0
    for cut in sorted(set(cuts)) + [len(text)]:
        pieces.append(split.feed(text[last:cut]))
        last = cut
    rest, calls = split.finish()
    return pieces, "".join(pieces) + rest, calls


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(ANSWERS), st.lists(st.integers(0, 200), max_size=12))
def test_streaming_agrees_with_the_whole_answer_at_any_split(text, cuts):
    whole = parse(text, NAMES)
    pieces, content, calls = _stream(text, [c for c in cuts if c <= len(text)])
    assert content == whole.content
    assert [(c.name, c.arguments) for c in calls] == [(c.name, c.arguments) for c in whole.calls]


@pytest.mark.parametrize("text", ANSWERS)
def test_every_single_boundary_and_every_character_split(text):
    for cut in range(len(text) + 1):
        assert _stream(text, [cut])[1] == parse(text, NAMES).content
    _, content, calls = _stream(text, list(range(len(text))))
    assert content == parse(text, NAMES).content and len(calls) == len(parse(text, NAMES).calls)


def test_text_before_a_call_streams_and_only_a_marker_prefix_is_held():
    split = ToolCallStream(NAMES)
    assert split.feed("The answer is ") == "The answer is "
    assert split.feed("near <to") == "near "  # '<to' could open <tool_call>
    assert split.feed("p>") == "<top>"  # it did not
    assert split.feed(" <tool_call>{") == " "
    assert split.feed('"name": "lookup", "arguments": {}}</tool_call>') == ""
    rest, calls = split.finish()
    assert rest == "" and [c.name for c in calls] == ["lookup"]


# -- rendering -------------------------------------------------------------------------------------
def test_qwen_template_renders_the_tools_calls_and_results_itself():
    text = render(HISTORY, QWEN25, tools=TOOLS)
    assert takes_tools(QWEN25) and call_format(QWEN25) == "hermes"
    assert "# Tools" in text and json.dumps(TOOLS[0], ensure_ascii=False) in text
    # the call's arguments reach the template as an object: written once as JSON, not a quoted string
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in text
    assert "<|im_start|>user\n<tool_response>\n22 C, sunny\n</tool_response><|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")
    assert "# Tools" not in render(HISTORY, QWEN25)  # tool_choice none: nothing offered, history still rendered


def test_a_template_without_tools_gets_the_documented_system_prompt():
    text = render(HISTORY, CHATML, tools=TOOLS)
    assert not takes_tools(CHATML) and call_format(CHATML) == "hermes"
    assert text.startswith("<|im_start|>system\n# Tools\n") and '"name": "lookup"' in text
    assert "<|im_start|>assistant\n<tool_call>\n" + WEATHER + "\n</tool_call><|im_end|>" in text
    assert "<|im_start|>user\n<tool_response>\n22 C, sunny\n</tool_response><|im_end|>" in text
    sys_first = render([{"role": "system", "content": "Be brief."}, *HISTORY], CHATML, tools=TOOLS)
    assert sys_first.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n") and sys_first.count("# Tools") == 1


def test_llama_style_templates_are_read_as_bare_json_calls():
    llama = "{% if tools %}{{ tools | tojson }}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}"
    assert call_format(llama) == "json"
    assert render([{"role": "user", "content": "hi"}], llama, tools=TOOLS).startswith('[{"type": "function"')


# -- the grammar that forces a call ----------------------------------------------------------------
@pytest.fixture(scope="module")
def vocab_model(tiny_target):
    from engine.llamacpp.llama import Model

    m = Model(tiny_target, vocab_only=True)
    yield m
    m.close()


def _parses(model, gbnf: str) -> bool:
    import llama_cpp

    sampler = llama_cpp.llama_sampler_init_grammar(model._vocab, gbnf.encode(), b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


@pytest.mark.parametrize("name, fmt, parallel", [
    (None, "hermes", True), (None, "json", False), ("lookup", "hermes", True), ("get_weather", "json", True)])
def test_forcing_grammar_is_valid_gbnf(vocab_model, name, fmt, parallel):
    gbnf = tool_call_grammar(TOOLS, name=name, call_format=fmt, parallel=parallel)
    assert _parses(vocab_model, gbnf), gbnf
    assert not _parses(vocab_model, gbnf + "\nbroken ::= (")  # the check can fail


def test_grammar_accepts_what_the_parser_reads(vocab_model, vocab):
    """Drive the grammar sampler by hand over a call's bytes (the tiny vocabulary's byte
    tokens, one per byte): a conforming call is accepted,
    and the same text with an argument the schema forbids is not."""
    import llama_cpp

    gbnf = tool_call_grammar(TOOLS, name="get_weather", call_format="hermes")
    good = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}\n</tool_call>'
    bad = good.replace('"c"', '"kelvin"')
    assert parse(good, NAMES).calls and "kelvin" not in gbnf

    def accepts(text: str) -> bool:
        sampler = llama_cpp.llama_sampler_init_grammar(vocab_model._vocab, gbnf.encode(), b"root")
        try:
            for tok in (vocab.byte(b) for b in text.encode()):
                if not _allowed(sampler, tok, vocab_model.n_vocab):
                    return False
                llama_cpp.llama_sampler_accept(sampler, tok)
            return True
        finally:
            llama_cpp.llama_sampler_free(sampler)

    assert accepts(good) and not accepts(bad)


def _allowed(sampler, token: int, n_vocab: int) -> bool:
    import ctypes

    import llama_cpp

    data = (llama_cpp.llama_token_data * n_vocab)(*[llama_cpp.llama_token_data(i, 0.0, 0.0) for i in range(n_vocab)])
    arr = llama_cpp.llama_token_data_array(data, n_vocab, -1, False)
    llama_cpp.llama_sampler_apply(sampler, ctypes.byref(arr))
    return data[token].logit != float("-inf")


def test_grammar_refuses_an_unknown_named_function():
    from engine.errors import TandemError

    with pytest.raises(TandemError, match="'nope'"):
        tool_call_grammar(TOOLS, name="nope")
