"""What fits in a model's context window: the overflow policy for long chats, the model's
trained length and the memory a context length needs.

Qt-free, so the app and any other front end share one rule: keep the system prompt and
the latest turns, drop the oldest whole turns until the prompt plus the answer's headroom
fits; a single message that cannot fit even alone is refused before anything runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Sequence

from .catalog import FileSpec, ModelSpec
from .gguf_header import GGUFHeader, read_header
from .hardware import model_need

DEFAULT_N_CTX = 4096
Message = dict  # {"role": ..., "content": ...}


@dataclass(frozen=True)
class FittedChat:
    """The messages to send and what was left out to make them fit."""

    messages: list[Message]  # system first (if any), then the kept turns, oldest first
    tokens: int  # prompt tokens of `messages`
    dropped: int  # earlier messages not sent
    n_ctx: int

    @property
    def note(self) -> str:
        """One line for the transcript, empty when everything is sent."""
        if not self.dropped:
            return ""
        what = "message is" if self.dropped == 1 else "messages are"
        return f"{self.dropped} earlier {what} not sent: the context holds {self.n_ctx:,} tokens"


class TooLarge(ValueError):
    """The latest message (with the system prompt) does not fit in the context on its own."""

    def __init__(self, tokens: int, n_ctx: int):
        self.tokens, self.n_ctx = tokens, n_ctx
        super().__init__(f"this message is {tokens:,} tokens but the context holds {n_ctx:,}: "
                         "shorten it, or load the model with a longer context")


def _turn_starts(chat: Sequence[Message]) -> list[int]:
    """Indexes where a turn (a user message and the replies after it) begins."""
    starts = [i for i, m in enumerate(chat) if m.get("role") == "user"]
    return starts if starts and starts[0] == 0 else [0] + starts


def fit_chat(system: Sequence[Message], chat: Sequence[Message], count: Callable[[list[Message]], int],
             n_ctx: int, headroom: int) -> FittedChat:
    """Keep `system` and the latest turns of `chat` so that count(prompt) + headroom <= n_ctx.

    `count` gives the prompt tokens of a message list (the chat template included), so the
    decision is made on the exact prompt. Whole turns are dropped, oldest first; the last
    turn is always kept. When the last turn alone leaves less than `headroom`, it is still
    sent (the answer may then end when the context is full); when it does not fit at all,
    `TooLarge` says by how much. Binary search: `count` runs O(log turns) times.
    """
    system, chat = list(system), list(chat)
    starts = _turn_starts(chat)
    budget = n_ctx - max(1, headroom)  # the decoder needs room for at least one new token

    def tokens_from(turn: int) -> int:
        return count(system + chat[starts[turn]:])

    whole = tokens_from(0)
    if whole <= budget:
        return FittedChat(system + chat, whole, 0, n_ctx)
    last = len(starts) - 1
    alone = tokens_from(last)
    if alone >= n_ctx:
        raise TooLarge(alone, n_ctx)
    if alone > budget:  # no headroom even alone: send it; the answer stops at a full context
        return FittedChat(system + chat[starts[last]:], alone, starts[last], n_ctx)
    lo, hi, best = 1, last, alone  # the smallest first turn whose suffix fits
    first = last
    while lo <= hi:
        mid = (lo + hi) // 2
        n = tokens_from(mid)
        if n <= budget:
            first, best, hi = mid, n, mid - 1
        else:
            lo = mid + 1
    return FittedChat(system + chat[starts[first]:], best, starts[first], n_ctx)


# -- the model's side: trained length and memory ------------------------------------------------
def trained_length(header: GGUFHeader) -> int | None:
    """`<arch>.context_length` from a GGUF header: the longest context the model was trained for."""
    v = header.arch_value("context_length")
    try:
        n = int(v) if v else None
    except (TypeError, ValueError, OverflowError):
        return None
    return n if n is not None and n > 0 else None


def spec_from_header(path: str | os.PathLike[str], header: GGUFHeader | None = None) -> ModelSpec:
    """A catalog-like description of a local GGUF (size and KV-cache shape from its header),
    so `hardware.model_need` sizes imported models the way it sizes catalog ones."""
    header = header or read_header(path, with_tensors=False, arrays=False)

    def count(key: str, default: int = 0) -> int:  # a downloaded header may hold anything: bad values count as unknown
        v = header.arch_value(key, default)
        try:
            return max(0, int(v or default))
        except (TypeError, ValueError, OverflowError):
            return default

    n_layers = count("block_count")
    n_heads = count("attention.head_count")
    n_kv = count("attention.head_count_kv", n_heads) or n_heads
    emb = count("embedding_length")
    head_dim = count("attention.key_length") or (emb // n_heads if n_heads else 0)
    size = os.path.getsize(path)
    name = os.path.basename(os.fspath(path))
    return ModelSpec(
        id=name, title=str(header.get("general.name") or name), repo="", revision="", quant="", license="",
        context_length=trained_length(header) or 0, tokenizer="", params_b=0.0, n_layers=n_layers,
        n_kv_heads=n_kv, head_dim=head_dim, files=(FileSpec("", name, "", size, None),),
        mtp_layers=header.mtp_layers,
    )


def memory_need(specs: Sequence[ModelSpec], n_ctx: int) -> int:
    """Bytes the models need at `n_ctx` (weights + KV cache + overhead), as Models' fit check counts them."""
    return sum(sum(model_need(m, n_ctx)) for m in specs)


def clamp_n_ctx(wanted: int | None, trained: int | None) -> int:
    """The context to load with: the wanted length (0/None = 4096), at most the trained length."""
    n = int(wanted) if wanted and int(wanted) > 0 else DEFAULT_N_CTX
    if trained:
        n = min(n, int(trained))
    return max(n, 64)
