"""Count a prompt's tokens only as far as the context can hold them.

Tokenising is linear in the text (about 4 MB/s on a 2-core CPU): a request with megabytes
of text would hold a CPU for seconds only to be refused. Two bounds stop early, both
sound because no token covers more bytes than its vocabulary entry's text:

* bytes: a text of B bytes is at least B / L tokens, L being the longest entry in the
  vocabulary (tens to a few hundred bytes), so a text over `limit * L` bytes cannot fit;
* pieces: a long text is tokenised in pieces cut at line or word breaks, where tokenizers
  split anyway, and counting stops once the pieces hold more than `limit` tokens (less
  one token of slack per cut). A text that fits is then tokenised whole, so the tokens
  returned are exactly the tokenizer's.
"""

from __future__ import annotations

from typing import Any, Iterator

from ...documents.images import IMAGE_SLOT, MEDIA_MARKER
from ...errors import PromptTooLong

MIN_PIECE_CHARS = 4096
QUICK_BYTES_PER_TOKEN = 8  # below limit * this, tokenising whole costs little: no piecewise pass


def max_token_bytes(model: Any) -> int:
    """The most bytes one token of `model` can stand for (at least 1)."""
    return max(1, int(getattr(model, "max_token_bytes", 0) or 0))


def output_budget(model: Any, limit: int) -> int:
    """Characters past which a rendered prompt cannot fit `limit` tokens (a character is at least a byte)."""
    return limit * max_token_bytes(model)


def _pieces(text: str, size: int) -> Iterator[str]:
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            cut = max(text.rfind("\n", start, end), text.rfind(" ", start, end))
            if cut > start:
                end = cut
        yield text[start:end]
        start = end


def tokenize_within(model: Any, text: str, limit: int | None, *, add_special: bool, parse_special: bool,
                    n_ctx: int | None = None, media: bool = False) -> list[int]:
    """`model.tokenize(text)`, or `PromptTooLong` as soon as the text clearly cannot fit `limit`
    tokens. Within the bounds the result is the full, exact tokenisation (the caller still
    compares its length with the context). `media`: each MEDIA_MARKER in the text becomes one
    IMAGE_SLOT entry, the text on each side tokenised apart (as libmtmd does), for the
    projector to fill with the picture's tokens."""
    if media and MEDIA_MARKER in text:
        out: list[int] = []
        for i, piece in enumerate(text.split(MEDIA_MARKER)):
            if i:
                out.append(IMAGE_SLOT)
            if piece or (i == 0 and add_special):
                out += tokenize_within(model, piece, limit, add_special=add_special and i == 0,
                                       parse_special=parse_special, n_ctx=n_ctx)
        return out
    if limit is None or limit <= 0:
        return model.tokenize(text, add_special=add_special, parse_special=parse_special)
    shown = n_ctx or limit
    n_bytes = len(text.encode("utf-8", errors="replace"))
    per = max_token_bytes(model)
    if n_bytes > limit * per:
        raise PromptTooLong(-(-n_bytes // per), shown)
    if n_bytes > limit * QUICK_BYTES_PER_TOKEN:
        counted = cuts = 0
        for piece in _pieces(text, max(MIN_PIECE_CHARS, 2 * limit)):  # a few pieces reach past the limit
            counted += len(model.tokenize(piece, add_special=False, parse_special=parse_special))
            if counted - cuts > limit:
                raise PromptTooLong(counted - cuts, shown)
            cuts += 1
    return model.tokenize(text, add_special=add_special, parse_special=parse_special)
