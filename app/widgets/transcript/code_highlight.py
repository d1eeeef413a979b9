"""Syntax colours for a rendered code block, from Pygments' lexers (the language named on
the fence; a block without one stays plain). The colours read on the light and the dark
palette alike (each at least 3.5:1 on white and on the dark theme's base), and they go on
the glyphs' foreground, so the provenance tint (a background) stays visible under them."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from PySide6.QtGui import QColor, QTextCharFormat, QTextCursor

# Token families (Pygments' hierarchy) and their colour; the first family that contains a token wins.
PALETTE: list[tuple[str, QColor]] = [
    ("Comment", QColor(128, 128, 128)),
    ("Literal.String", QColor(80, 150, 60)),
    ("Literal.Number", QColor(200, 110, 30)),
    ("Keyword", QColor(175, 82, 222)),
    ("Name.Builtin", QColor(175, 82, 222)),
    ("Name.Function", QColor(40, 130, 220)),
    ("Name.Class", QColor(40, 130, 220)),
    ("Name.Decorator", QColor(200, 110, 30)),
]


@lru_cache(maxsize=64)
def _lexer(lang: str) -> Any:
    try:
        from pygments.lexers import get_lexer_by_name
        from pygments.util import ClassNotFound
    except ImportError:  # the gui extra installs Pygments; without it code stays plain
        return None
    try:
        return get_lexer_by_name(lang.strip().lower(), stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


@lru_cache(maxsize=None)
def _colour(token: Any) -> QColor | None:
    """The colour of a token type (its first family in PALETTE). Cached: a code block has
    thousands of tokens of a few dozen types, and this ran for every one of them, on the
    GUI thread, at every delivery of a streaming answer."""
    from pygments.token import string_to_tokentype

    for family, colour in PALETTE:
        if token in string_to_tokentype(family):
            return colour
    return None


def warm(langs: tuple[str, ...] = ("python",)) -> None:
    """Make the lexers of the languages answers most often show now, while nothing streams.
    Made at the first code block instead, a lexer's regular expressions (~0.2-0.5 s of pure
    Python on the GUI thread, holding the GIL) would stall the engine's own Python in the
    middle of the first answer."""
    for lang in langs:
        _lexer(lang)


def token_colours(code: str, lang: str) -> list[tuple[int, int, QColor]]:
    """(start, length, colour) of the coloured tokens of `code` (positions in `code`)."""
    lexer = _lexer(lang) if lang else None
    if lexer is None:
        return []
    out: list[tuple[int, int, QColor]] = []
    for start, token, text in lexer.get_tokens_unprocessed(code):
        colour = _colour(token)
        if colour is not None and text.strip():
            if out and out[-1][2] is colour and out[-1][0] + out[-1][1] == start:
                out[-1] = (out[-1][0], out[-1][1] + len(text), colour)  # one format change, not two
            else:
                out.append((start, len(text), colour))
    return out


def highlight(cursor: QTextCursor, position: int, code: str, lang: str) -> int:
    """Colour `code`, which starts at `position` of the cursor's document; returns the runs coloured.

    The document's code blocks hold the lines joined by paragraph breaks, one character
    each like the newlines of `code`, so positions map one to one."""
    runs = token_colours(code, lang)
    for start, length, colour in runs:
        f = QTextCharFormat()
        f.setForeground(colour)
        cursor.setPosition(position + start)
        cursor.setPosition(position + start + length, QTextCursor.MoveMode.KeepAnchor)
        cursor.mergeCharFormat(f)
    return len(runs)
