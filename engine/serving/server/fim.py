"""Fill-in-the-middle for the server: the target's FIM tokens, or the one-line 400 for a model
without them. The prompt's layout (llama-server's `format_prompt_infill`) lives below, in
`engine/decoding/prompting/fim_layout.py`, which the benchmark's FIM suites share."""

from __future__ import annotations

from typing import Any

from ...llamacpp.llama import FimTokens
from .errors import ApiError

NO_FIM = "this model has no fill-in-the-middle tokens (GGUF tokenizer.ggml.fim_pre/suf/mid): use a FIM model " \
         "such as Qwen2.5-Coder"


def fim_tokens_of(target: Any) -> FimTokens | None:
    """The target's FIM tokens (None: it has none)."""
    return target.fim_tokens() if hasattr(target, "fim_tokens") else None


def fim_tokens_or_400(target: Any, param: str | None = None) -> Any:
    """The target's FIM tokens, or the one-line 400 for a model without them."""
    fim = fim_tokens_of(target)
    if fim is None:
        raise ApiError(400, NO_FIM, param=param, code="fim_not_supported")
    return fim
