"""Chat templates: conversation -> prompt text -> tokens, as the model was trained.

Templates come from the GGUF's `tokenizer.chat_template` (Jinja, rendered in a sandbox
as Hugging Face does). Without one we fall back to ChatML and warn: most instruction
models either use it or tolerate it.
"""

from __future__ import annotations

import datetime
import json
import warnings
from typing import Any, Mapping, Sequence

from jinja2 import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .errors import PromptError

Message = Mapping[str, str]

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


def _env() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    env.filters["tojson"] = lambda x, indent=None, ensure_ascii=False: json.dumps(x, indent=indent, ensure_ascii=ensure_ascii)
    return env


def render(
    messages: Sequence[Message],
    template: str | None,
    *,
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
) -> str:
    """Render `messages` with `template` (ChatML when None or broken, with a warning)."""
    if not messages:
        raise PromptError("the conversation is empty")
    for m in messages:
        if "role" not in m or "content" not in m:
            raise PromptError(f"a chat message needs 'role' and 'content', got {dict(m)!r}")
    kwargs: dict[str, Any] = dict(
        messages=[dict(m) for m in messages],
        add_generation_prompt=add_generation_prompt,
        bos_token=bos_token,
        eos_token=eos_token,
    )
    if template:
        try:
            return _env().from_string(template).render(**kwargs)
        except TemplateError as e:
            warnings.warn(f"the model's chat template failed ({e}); using ChatML", ChatTemplateWarning, stacklevel=2)
    else:
        warnings.warn("the model has no chat template; using ChatML", ChatTemplateWarning, stacklevel=2)
    return _env().from_string(CHATML).render(**kwargs)


def chat_tokens(model: Any, messages: Sequence[Message], *, add_generation_prompt: bool = True) -> list[int]:
    """Tokens for a conversation with `model` (an `engine.llama.Model`).

    Special tokens in the rendered template are parsed; BOS is added only when the model
    wants one and the template did not already write it.
    """
    bos_text = model.token_text(model.bos) if model.bos >= 0 else ""
    eos_text = model.token_text(model.eos) if model.eos >= 0 else ""
    text = render(messages, model.chat_template, bos_token=bos_text, eos_token=eos_text, add_generation_prompt=add_generation_prompt)
    add_bos = model.add_bos and not (bos_text and text.startswith(bos_text))
    tokens = model.tokenize(text, add_special=False, parse_special=True)
    if add_bos:
        tokens = [model.bos] + tokens
    return tokens
