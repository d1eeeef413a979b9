"""Chat templates: conversation -> prompt text -> tokens, as the model was trained.

Templates come from the GGUF's `tokenizer.chat_template` (Jinja, rendered in a sandbox
as Hugging Face does). They come from downloaded files, so they are untrusted input:
rendering is bounded in time and size (`template_sandbox`), and any failure at all falls
back to ChatML with a warning naming the file. Without a template we use ChatML too and
warn: most instruction models either use it or tolerate it. Tools offered to the model go
through the template when it renders them, else into a system prompt (`tool_prompt`).
"""

from __future__ import annotations

import datetime
import json
import sys
import warnings
from typing import Any, Mapping, Sequence

from jinja2 import TemplateError

from ..errors import PromptError, PromptTooLong
from .prompt_fit import max_token_bytes, output_budget, tokenize_within
from .tool_prompt import as_text_messages, has_tool_turns, takes_tools, template_messages
from .template_sandbox import DEADLINE_S, MAX_CHARS, BoundedEnvironment, OutputLimitError, render_bounded, weight

Message = Mapping[str, Any]  # role, content; tool_calls / tool_call_id in tool conversations

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class ChatTemplateWarning(UserWarning):
    pass


def _raise(message: str) -> None:
    raise TemplateError(message)


def _env(input_chars: int = 0, max_output: int | None = None) -> BoundedEnvironment:
    """The sandbox; its size limit leaves room for twice the conversation itself, so a long
    conversation is refused by the context-size check with the usual message. With
    `max_output` (what the context can hold), values are bounded by that instead of MAX_CHARS."""
    base = MAX_CHARS if max_output is None else min(MAX_CHARS, max_output)
    env = BoundedEnvironment(trim_blocks=True, lstrip_blocks=True, max_chars=base + 2 * input_chars)
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    env.filters["tojson"] = lambda x, indent=None, ensure_ascii=False: json.dumps(x, indent=indent, ensure_ascii=ensure_ascii)
    env.guard_filters()
    return env


def _context(messages: Sequence[Message], template: str, tools: Sequence[Mapping[str, Any]] | None,
             add_generation_prompt: bool, bos_token: str, eos_token: str) -> dict[str, Any]:
    """The template's variables; tools (and tool turns) as text when the template ignores them."""
    kwargs: dict[str, Any] = dict(add_generation_prompt=add_generation_prompt, bos_token=bos_token, eos_token=eos_token)
    if takes_tools(template):
        kwargs["messages"] = template_messages(messages)
        if tools:
            kwargs["tools"] = [dict(t) for t in tools]
    elif tools or has_tool_turns(messages):
        kwargs["messages"] = as_text_messages(messages, tools)
    else:
        kwargs["messages"] = [dict(m) for m in messages]
    return kwargs


def render(
    messages: Sequence[Message],
    template: str | None,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
    source: str = "the model",
    deadline_s: float = DEADLINE_S,
    max_output: int | None = None,
) -> str:
    """Render `messages` with `template` (ChatML when None or broken, with a warning).

    `source` names where the template came from (the GGUF file) in the warning. Whatever
    the template does (raise anything, loop for ever, build huge strings), this returns
    within about `deadline_s` seconds. `max_output`: the characters a prompt that fits
    the context can have; past it rendering stops, and if ChatML cannot fit the
    conversation either, `OutputLimitError` says it is the conversation that is too long."""
    if not messages:
        raise PromptError("the conversation is empty")
    for m in messages:
        if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
            raise PromptError(f"a chat message needs 'role' and 'content', got {m!r}"[:300])
    chatml = _context(messages, CHATML, tools, add_generation_prompt, bos_token, eos_token)
    size = weight([chatml["messages"], tools or []], budget=sys.maxsize)
    if template:
        try:
            kwargs = _context(messages, template, tools, add_generation_prompt, bos_token, eos_token)
            return render_bounded(_env(size, max_output), template, kwargs, deadline_s=deadline_s, max_output=max_output)
        except Exception as e:  # untrusted input: any failure at all means "use ChatML"
            reason = f"{type(e).__name__}: {e}" if not isinstance(e, TemplateError) else str(e)
            fallback = render_bounded(_env(size, max_output), CHATML, chatml, deadline_s=max(deadline_s, 30.0),
                                      max_output=max_output)  # OutputLimitError: the conversation is too long
            warnings.warn(f"{source}: its chat template failed ({reason[:200]}); using ChatML instead",
                          ChatTemplateWarning, stacklevel=2)
            return fallback
    warnings.warn(f"{source} has no chat template; using ChatML", ChatTemplateWarning, stacklevel=2)
    return render_bounded(_env(size, max_output), CHATML, chatml, deadline_s=max(deadline_s, 30.0), max_output=max_output)


def chat_tokens(model: Any, messages: Sequence[Message], *, add_generation_prompt: bool = True,
                limit: int | None = None, tools: Sequence[Mapping[str, Any]] | None = None) -> list[int]:
    """Tokens for a conversation with `model` (an `engine.decoding.llama.Model`).

    Special tokens in the rendered template are parsed; BOS is added only when the model
    wants one and the template did not already write it. `limit` (the context size):
    rendering and tokenising stop with `PromptTooLong` once the prompt cannot fit.
    `tools`: OpenAI's tool list, offered through the template (see `tool_prompt`).
    """
    bos_text = model.token_text(model.bos) if model.bos >= 0 else ""
    eos_text = model.token_text(model.eos) if model.eos >= 0 else ""
    source = str(getattr(model, "path", "the model"))
    budget = output_budget(model, limit) if limit else None
    try:
        text = render(messages, model.chat_template, bos_token=bos_text, eos_token=eos_text,
                      add_generation_prompt=add_generation_prompt, source=source, max_output=budget, tools=tools)
    except OutputLimitError:
        raise PromptTooLong(-(-(budget or 0) // max_token_bytes(model)), limit or 0) from None
    add_bos = model.add_bos and not (bos_text and text.startswith(bos_text))
    tokens = tokenize_within(model, text, limit, add_special=False, parse_special=True)
    if add_bos:
        tokens = [model.bos] + tokens
    return tokens


def continuation_tokens(model: Any, messages: Sequence[Message]) -> list[int]:
    """Tokens that make `model` go on with the conversation's last, partial answer.

    The conversation before it is rendered with the generation prompt (the assistant's turn
    opened), then the partial answer follows as plain text, without the end-of-turn a
    finished message would get, so the next token continues it. Its text is tokenized
    without parsing special tokens: an answer that wrote "<|im_end|>" as text stays text."""
    if not messages or messages[-1].get("role") != "assistant":
        raise PromptError("only an assistant answer can be continued")
    partial = messages[-1].get("content", "")
    if not partial:
        raise PromptError("the answer to continue is empty")
    head = chat_tokens(model, messages[:-1], add_generation_prompt=True)
    return head + model.tokenize(partial, add_special=False, parse_special=False)
