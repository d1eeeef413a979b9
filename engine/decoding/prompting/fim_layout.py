"""Fill-in-the-middle prompts, laid out token for token as llama-server's `format_prompt_infill`.

The repo-level pattern (Qwen2.5-Coder's; arXiv 2409.12186), with the parts a model lacks left out:

    [FIM_REP]myproject\\n [FIM_SEP]filename0\\n extra chunk 0 ... [FIM_SEP]filename\\n
    [FIM_PRE]prefix [FIM_SUF]suffix [FIM_MID]prompt

The budgets are llama-server's: the prefix keeps its last 3/4 of a batch, the suffix its first
1/4 (less the typed prompt), and the extra chunks fill what the context holds beyond a batch
and twice the answer, keeping their end (the chunks nearest the cursor). Tandem's batch here
is llama-server's default 2048, at most half the context, so the answer always has room.
Every text is tokenised without BOS and with special-token text read as text.

Here, below the server, so that the server's `/infill` and the benchmark's FIM suites build
the same tokens from the same parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, Union

from ...llamacpp.llama import FimTokens
from .prompt_text import clean

LLAMA_SERVER_BATCH = 2048  # llama-server's default --batch-size: its FIM budgets are fractions of it
# llama-server's separator between extra chunks for models without FIM_SEP ("\n\n--- snippet ---\n\n")
SNIPPET_SEPARATOR = "\n\n--- snippet ---\n\n"
Mixed = Union[str, Sequence[Union[str, int]]]  # text, or llama.cpp's mix of texts and token ids


class Vocabulary(Protocol):
    add_bos: bool
    bos: int

    def tokenize(self, text: str, *, add_special: bool = True, parse_special: bool = False) -> list[int]: ...

    def fim_tokens(self) -> FimTokens | None: ...


@dataclass(frozen=True)
class ExtraChunk:
    """Context from another file (llama.vscode's ring buffer of chunks the user looked at)."""

    text: str
    filename: str = "tmp"


def fim_budget_batch(n_ctx: int) -> int:
    """The batch the prefix/suffix/extra budgets are measured in (see the module doc)."""
    return max(4, min(LLAMA_SERVER_BATCH, n_ctx // 2))


def _text(vocab: Vocabulary, text: str) -> list[int]:
    """Text as llama-server tokenises FIM parts (lone surrogates, which JSON can carry, as U+FFFD)."""
    return vocab.tokenize(clean(text)[0], add_special=False, parse_special=False) if text else []


def _mixed(vocab: Vocabulary, value: Mixed) -> list[int]:
    """llama.cpp's `tokenize_mixed` without BOS: a text, or texts and token ids in order."""
    if isinstance(value, str):
        return _text(vocab, value)
    out: list[int] = []
    for part in value:
        out.extend(_text(vocab, part) if isinstance(part, str) else [int(part)])
    return out


def infill_tokens(vocab: Vocabulary, fim: FimTokens, prefix: Mixed, suffix: Mixed, extra: Sequence[ExtraChunk] = (),
                  prompt: Sequence[int] = (), *, n_ctx: int, n_predict: int = 0) -> list[int]:
    """The prompt tokens for filling in between `prefix` and `suffix`; `prompt` (tokens): text
    already typed after the prefix, which the answer continues. `n_predict`: the answer's
    length limit (0: none given), which the extra context leaves room for twice."""
    n_batch = fim_budget_batch(n_ctx)
    extra_tokens: list[int] = []
    if fim.rep is not None:
        extra_tokens += [fim.rep] + _text(vocab, "myproject\n")
    for chunk in extra:
        if fim.sep is not None:
            extra_tokens += [fim.sep] + _text(vocab, chunk.filename + "\n")
        else:
            extra_tokens += _text(vocab, SNIPPET_SEPARATOR)
        extra_tokens += _text(vocab, chunk.text)
    if fim.sep is not None:
        extra_tokens += [fim.sep] + _text(vocab, "filename\n")

    pre, suf = _mixed(vocab, prefix), _mixed(vocab, suffix)
    n_prefix_take = min(len(pre), 3 * (n_batch // 4))
    n_suffix_take = min(len(suf), max(0, n_batch // 4 - (2 + len(prompt))))
    n_extra_take = min(max(0, n_ctx - n_batch - 2 * max(0, n_predict)), len(extra_tokens))

    head = [fim.pre] + pre[len(pre) - n_prefix_take:] + list(prompt)
    tail = [fim.suf] + suf[:n_suffix_take]
    bos = [vocab.bos] if vocab.add_bos else []
    return extra_tokens[len(extra_tokens) - n_extra_take:] + bos + head + tail + [fim.mid]

