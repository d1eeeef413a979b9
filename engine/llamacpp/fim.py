"""A model's fill-in-the-middle tokens, as llama.cpp's vocabulary reports them (GGUF
`tokenizer.ggml.fim_*`, or the tokens llama.cpp recognises by their text)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import llama_cpp


@dataclass(frozen=True)
class FimTokens:
    """A model's fill-in-the-middle tokens (GGUF `tokenizer.ggml.fim_*`, or what llama.cpp
    recognises by text): prefix, suffix and middle always; the repo-level ones when present."""

    pre: int
    suf: int
    mid: int
    pad: int | None = None
    rep: int | None = None  # starts the repository name
    sep: int | None = None  # starts each file


def fim_tokens(vocab: Any) -> FimTokens | None:
    """The tokens of a llama.cpp vocabulary, or None when it lacks a prefix, suffix or middle
    token (such a model cannot fill in the middle)."""
    found = {name: int(getattr(llama_cpp, f"llama_vocab_fim_{name}")(vocab)) for name in ("pre", "suf", "mid", "pad", "rep", "sep")}
    ids = {k: (None if v == llama_cpp.LLAMA_TOKEN_NULL else v) for k, v in found.items()}
    if ids["pre"] is None or ids["suf"] is None or ids["mid"] is None:
        return None
    return FimTokens(**ids)  # type: ignore[arg-type]
