"""A conversation with tool calls and results, rendered the way each template expects it.

After a call, the client sends back the assistant message (OpenAI's shape: content null or
text, `tool_calls` with ids like `call_...`, arguments as JSON text) and a `tool` message
with the result. The prompt must be the template's own tool-use text, or the model does not
recognise its call and result and calls again: Qwen 2.5's `<tool_call>` / `<tool_response>`
turns, SmolLM2's (a template without tools: Tandem's Hermes-style fallback, the same form),
and Mistral Nemo's `[TOOL_CALLS]` / `[TOOL_RESULTS]` (whose template refuses any call id
but 9 letters and digits, so OpenAI's ids must be mapped, the same way for call and result).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from engine.decoding.prompting.chat import render
from engine.decoding.prompting.tool_prompt import nine_char_id

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
TEMPLATES = ROOT / "tests" / "templates"
QWEN25 = (TEMPLATES / "qwen2.5-instruct.jinja").read_text(encoding="utf-8")
MISTRAL_NEMO = (TEMPLATES / "mistral-nemo-instruct-2407.jinja").read_text(encoding="utf-8")
# SmolLM2-135M-Instruct's tokenizer.chat_template, as its GGUF carries it
SMOLLM2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
           "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
           "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
           "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
CALL_ID = "call_5f0c1e2d3a4b5c6d7e8f9a0b"
HISTORY = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": CALL_ID, "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": CALL_ID, "content": "22 C and sunny"},
]
HERMES_TURNS = ("<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n"
                '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
                "</tool_call><|im_end|>\n"
                "<|im_start|>user\n<tool_response>\n22 C and sunny\n</tool_response><|im_end|>\n"
                "<|im_start|>assistant\n")


def _render(template: str, tools=TOOLS) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a template that fails (ChatML instead) fails the test
        return render(HISTORY, template, tools=tools, bos_token="<s>", eos_token="</s>")


def test_qwen25_gets_its_own_tool_call_and_tool_response_turns():
    text = _render(QWEN25)
    assert text.startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n"
                           "# Tools\n")
    assert json.dumps(TOOLS[0], ensure_ascii=False) in text
    assert text.endswith("</tool_call><|im_end|>\n" + HERMES_TURNS)


def test_smollm2_gets_the_same_form_through_the_fallback_prompt():
    text = _render(SMOLLM2)
    assert text.startswith("<|im_start|>system\n# Tools\n\nYou may call one or more functions")
    assert "SmolLM" not in text  # the tools' system prompt stands in for the template's default one
    assert text.endswith("</tool_call><|im_end|>\n" + HERMES_TURNS)


def test_mistral_nemo_renders_openai_call_ids_as_its_nine_character_ids():
    text = _render(MISTRAL_NEMO)
    short = nine_char_id(CALL_ID)
    assert len(short) == 9 and short.isalnum() and short == nine_char_id(CALL_ID)
    assert f'[TOOL_CALLS][{{"name": "get_weather", "arguments": {{"city": "Paris"}}, "id": "{short}"}}]</s>' in text
    assert f'[TOOL_RESULTS]{{"content": 22 C and sunny, "call_id": "{short}"}}[/TOOL_RESULTS]' in text
    assert "<|im_start|>" not in text  # not ChatML: the template itself rendered it
    assert nine_char_id("a1B2c3D4e") == "a1B2c3D4e"  # an id of Mistral's own form is kept


def test_other_templates_see_the_ids_as_sent():
    seen = render(HISTORY, "{% for m in messages %}{{ m.tool_call_id or '' }}{% for c in m.tool_calls or [] %}"
                           "{{ c.id }}{% endfor %}|{% endfor %}{{ tools | length }}", tools=TOOLS)
    assert seen == f"|{CALL_ID}|{CALL_ID}|1"
