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

from ...errors import PromptError, PromptTooLong
from .content_guard import ContentGuard, Span
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


def _env(input_chars: int = 0, max_output: int | None = None,
         now: datetime.datetime | None = None) -> BoundedEnvironment:
    """The sandbox; its size limit leaves room for twice the conversation itself, so a long
    conversation is refused by the context-size check with the usual message. With
    `max_output` (what the context can hold), values are bounded by that instead of MAX_CHARS.
    `now`: the time `strftime_now` tells (two renderings of one prompt must agree)."""
    base = MAX_CHARS if max_output is None else min(MAX_CHARS, max_output)
    env = BoundedEnvironment(trim_blocks=True, lstrip_blocks=True, max_chars=base + 2 * input_chars)
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: (now or datetime.datetime.now()).strftime(fmt)
    env.filters["tojson"] = lambda x, indent=None, ensure_ascii=False: json.dumps(x, indent=indent, ensure_ascii=ensure_ascii)
    env.guard_filters()
    return env


def _context(messages: Sequence[Message], template: str, tools: Sequence[Mapping[str, Any]] | None,
             add_generation_prompt: bool, bos_token: str, eos_token: str) -> dict[str, Any]:
    """The template's variables; tools (and tool turns) as text when the template ignores them."""
    kwargs: dict[str, Any] = dict(add_generation_prompt=add_generation_prompt, bos_token=bos_token, eos_token=eos_token)
    if takes_tools(template):
        kwargs["messages"] = template_messages(messages, template)
        if tools:
            kwargs["tools"] = [dict(t) for t in tools]
    elif tools or has_tool_turns(messages):
        kwargs["messages"] = as_text_messages(messages, tools)
    else:
        kwargs["messages"] = [dict(m) for m in messages]
    return kwargs


def _render(messages: Sequence[Message], template: str | None, *, tools: Sequence[Mapping[str, Any]] | None,
            bos_token: str, eos_token: str, add_generation_prompt: bool, deadline_s: float,
            max_output: int | None, now: datetime.datetime | None = None) -> tuple[str, str | None]:
    """(the prompt text, None) or, when ChatML stood in for the template, (its text, why)."""
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
            return render_bounded(_env(size, max_output, now), template, kwargs, deadline_s=deadline_s,
                                  max_output=max_output), None
        except Exception as e:  # untrusted input: any failure at all means "use ChatML"
            reason = f"{type(e).__name__}: {e}" if not isinstance(e, TemplateError) else str(e)
            fallback = render_bounded(_env(size, max_output, now), CHATML, chatml, deadline_s=max(deadline_s, 30.0),
                                      max_output=max_output)  # OutputLimitError: the conversation is too long
            return fallback, f": its chat template failed ({reason[:200]}); using ChatML instead"
    return render_bounded(_env(size, max_output, now), CHATML, chatml, deadline_s=max(deadline_s, 30.0),
                          max_output=max_output), " has no chat template; using ChatML"


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
    text, why = _render(messages, template, tools=tools, bos_token=bos_token, eos_token=eos_token,
                        add_generation_prompt=add_generation_prompt, deadline_s=deadline_s, max_output=max_output)
    if why:
        warnings.warn(f"{source}{why}", ChatTemplateWarning, stacklevel=2)
    return text


def _guarded_text(model: Any, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None,
                  **kw: Any) -> tuple[str, list[Span], ContentGuard | None, str | None]:
    """(prompt text, spans of message text holding control-token text, the guard, why ChatML).

    Message text with no control-token text in it renders exactly as without a guard (no
    spans). Otherwise the template renders the marked conversation, and the marks are
    trusted only if removing them gives exactly the unmarked rendering (a template that cut
    or changed the text around them would leave that text unprotected): else ChatML,
    whose text is the conversation's as given, renders it."""
    texts = model.control_texts() if hasattr(model, "control_texts") else ()
    lstrip, rstrip = model.control_strips() if hasattr(model, "control_strips") else ((), ())
    guard = ContentGuard(texts, lstrip=lstrip, rstrip=rstrip)
    marked_messages, marked_tools = guard.wrap(list(messages)), guard.wrap(tools) if tools else tools
    now = datetime.datetime.now()
    plain, why = _render(messages, model.chat_template, tools=tools, now=now, **kw)
    if not guard.used:
        return plain, [], None, why
    if kw.get("max_output"):  # room for the marks, were the whole prompt marked text
        kw = {**kw, "max_output": kw["max_output"] * guard.growth}
    text, why_marked = _render(marked_messages, model.chat_template, tools=marked_tools, now=now, **kw)
    clean, spans = guard.unwrap(text)
    if clean == plain and why_marked == why:
        return clean, spans, guard, why
    text, _ = _render(marked_messages, CHATML, tools=marked_tools, now=now, **kw)
    clean, spans = guard.unwrap(text)
    return clean, spans, guard, (": its chat template changes message text in a way that cannot be kept apart "
                                 "from its markup; using ChatML for this conversation")


def chat_tokens(model: Any, messages: Sequence[Message], *, add_generation_prompt: bool = True,
                limit: int | None = None, tools: Sequence[Mapping[str, Any]] | None = None,
                parse_special: bool = False, media: bool = False) -> list[int]:
    """Tokens for a conversation with `model` (an `engine.llamacpp.llama.Model`).
    `media`: the media markers in it become IMAGE_SLOT entries (`tokenize_within`).

    Special tokens in the template's markup are parsed; in message text (contents, tool
    calls and results, tool definitions) control-token text stays text (`content_guard`),
    unless `parse_special` (the old, unsafe reading: message text can then end its turn
    and forge others). BOS is added only when the model wants one and the template did not
    already write it. `limit` (the context size): rendering and tokenising stop with
    `PromptTooLong` once the prompt cannot fit. `tools`: OpenAI's tool list, offered
    through the template (see `tool_prompt`).
    """
    bos_text = model.token_text(model.bos) if model.bos >= 0 else ""
    eos_text = model.token_text(model.eos) if model.eos >= 0 else ""
    source = str(getattr(model, "path", "the model"))
    budget = output_budget(model, limit) if limit else None
    kw = dict(bos_token=bos_text, eos_token=eos_text, add_generation_prompt=add_generation_prompt,
              deadline_s=DEADLINE_S, max_output=budget)
    try:
        if parse_special:
            text, why = _render(messages, model.chat_template, tools=tools, **kw)
            spans, guard = [], None
        else:
            text, spans, guard, why = _guarded_text(model, messages, tools, **kw)
    except OutputLimitError:
        raise PromptTooLong(-(-(budget or 0) // max_token_bytes(model)), limit or 0) from None
    if why:
        warnings.warn(f"{source}{why}", ChatTemplateWarning, stacklevel=2)
    wrote_bos = bool(bos_text) and text.startswith(bos_text) and not (spans and spans[0][0] == 0)
    add_bos = model.add_bos and not wrote_bos
    pieces = guard.pieces(text, spans) if guard is not None else [(text, True)]
    tokens = _tokenize_pieces(model, pieces, limit, media)
    if add_bos:
        tokens = [model.bos] + tokens
    return tokens


def _tokenize_pieces(model: Any, pieces: Sequence[tuple[str, bool]], limit: int | None,
                     media: bool = False) -> list[int]:
    """The pieces' tokens, one after another; `PromptTooLong` once they clearly exceed `limit`."""
    if len(pieces) == 1:
        return tokenize_within(model, pieces[0][0], limit, add_special=False, parse_special=pieces[0][1], media=media)
    tokens: list[int] = []
    for text, special in pieces:
        left = None if not limit else max(1, limit - len(tokens))
        try:
            tokens += tokenize_within(model, text, left, add_special=False, parse_special=special, n_ctx=limit,
                                      media=media)
        except PromptTooLong as e:
            raise PromptTooLong(len(tokens) + e.at_least, limit or 0) from None
    return tokens


def continuation_tokens(model: Any, messages: Sequence[Message], *, parse_special: bool = False) -> list[int]:
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
    head = chat_tokens(model, messages[:-1], add_generation_prompt=True, parse_special=parse_special)
    return head + model.tokenize(partial, add_special=False, parse_special=False)
