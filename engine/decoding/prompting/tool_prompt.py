"""Offering tools to a model: through its own chat template, or a documented system prompt.

Templates that mention `tools` (Qwen 2.5/3, Hermes, Llama 3.1+, Mistral) get the OpenAI
`tools` list as the `tools` variable and render tool calls and tool results themselves,
as Hugging Face's `apply_chat_template` does; an assistant message's call arguments are
handed to them as objects (they write `arguments | tojson`). Templates that do not
(SmolLM2, Gemma 3, plain ChatML) get the tools in a system message, in the Hermes form
that `tool_calls.parse` reads back:

    # Tools

    You may call one or more functions to assist with the user query.
    You are provided with function signatures within <tools></tools> XML tags:
    <tools>
    {"type": "function", "function": {"name": ..., "description": ..., "parameters": {...}}}
    </tools>

    For each function call, return a json object with function name and arguments within
    <tool_call></tool_call> XML tags:
    <tool_call>
    {"name": <function-name>, "arguments": <args-json-object>}
    </tool_call>

and the history's calls and results become text in that same form (a call as the
assistant's `<tool_call>` block, a result as a user message in `<tool_response>` tags).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping, Sequence

FALLBACK_HEAD = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n"
                 "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
FALLBACK_TAIL = ("</tools>\n\nFor each function call, return a json object with function name and arguments "
                 "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                 "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>")


def takes_tools(template: str | None) -> bool:
    """Whether a chat template renders tools and tool calls itself."""
    return bool(template) and "tools" in template  # type: ignore[operator]


def call_format(template: str | None) -> str:
    """How a model with this template writes calls: 'hermes' (`<tool_call>` blocks, also
    Tandem's fallback prompt) or 'json' (a bare call object: Llama 3.x, Mistral)."""
    if not takes_tools(template) or "<tool_call>" in (template or ""):
        return "hermes"
    return "json"


def fallback_system(tools: Sequence[Mapping[str, Any]]) -> str:
    listed = "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools)
    return f"{FALLBACK_HEAD}{listed}\n{FALLBACK_TAIL}"


def _arguments(raw: Any) -> Any:
    """Call arguments as the object templates expect (the API sends JSON text)."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _calls_for_template(calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for c in calls:
        fn = dict(c.get("function") or {})
        fn["arguments"] = _arguments(fn.get("arguments", {}))
        out.append({**c, "function": fn})
    return out


def _call_text(calls: Sequence[Mapping[str, Any]]) -> str:
    blocks = []
    for c in _calls_for_template(calls):
        fn = c["function"]
        body = json.dumps({"name": fn.get("name", ""), "arguments": fn.get("arguments", {})}, ensure_ascii=False)
        blocks.append(f"<tool_call>\n{body}\n</tool_call>")
    return "\n".join(blocks)


def as_text_messages(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
                     ) -> list[dict[str, Any]]:
    """The conversation for a template that knows nothing of tools: the tools in the system
    message, calls and results as text in the same Hermes form."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role, content = m.get("role"), m.get("content") or ""
        if role == "assistant" and m.get("tool_calls"):
            text = _call_text(m["tool_calls"])
            out.append({"role": "assistant", "content": f"{content}\n{text}" if content else text})
        elif role == "tool":
            out.append({"role": "user", "content": f"<tool_response>\n{content}\n</tool_response>"})
        else:
            out.append({"role": role, "content": content})
    if tools:
        prompt = fallback_system(tools)
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{prompt}" if out[0]["content"] else prompt}
        else:
            out.insert(0, {"role": "system", "content": prompt})
    return out


NINE_CHAR_IDS = "length 9"  # Mistral's templates refuse any call id but 9 alphanumerics ("...with length 9!")


def nine_char_id(call_id: Any) -> str:
    """A call id as Mistral's templates require it: 9 letters and digits, the same for the
    same id (so a call and its result still pair up); an id of that form is kept."""
    text = str(call_id or "")
    if len(text) == 9 and text.isascii() and text.isalnum():
        return text
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:9]


def _with_nine_char_ids(m: dict[str, Any]) -> dict[str, Any]:
    if m.get("tool_calls"):
        m["tool_calls"] = [{**c, "id": nine_char_id(c.get("id"))} for c in m["tool_calls"]]
    if "tool_call_id" in m:
        m["tool_call_id"] = nine_char_id(m["tool_call_id"])
    return m


def template_messages(messages: Sequence[Mapping[str, Any]], template: str | None = None) -> list[dict[str, Any]]:
    """The conversation for a template that renders tools itself (call arguments as objects;
    call ids of 9 letters and digits for templates that refuse others: OpenAI's ids are longer)."""
    out = [{**m, "tool_calls": _calls_for_template(m["tool_calls"])} if m.get("tool_calls") else dict(m)
           for m in messages]
    if template and NINE_CHAR_IDS in template:
        out = [_with_nine_char_ids(m) for m in out]
    return out


def has_tool_turns(messages: Sequence[Mapping[str, Any]]) -> bool:
    return any(m.get("role") == "tool" or m.get("tool_calls") for m in messages)
