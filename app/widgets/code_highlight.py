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


def _colour(token: Any) -> QColor | None:
    from pygments.token import string_to_tokentype

    for family, colour in PALETTE:
        if token in string_to_tokentype(family):
            return colour
    return None


def token_colours(code: str, lang: str) -> list[tuple[int, int, QColor]]:
    """(start, length, colour) of the coloured tokens of `code` (positions in `code`)."""
    lexer = _lexer(lang) if lang else None
    if lexer is None:
        return []
    out = []
    for start, token, text in lexer.get_tokens_unprocessed(code):
        colour = _colour(token)
        if colour is not None and text.strip():
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
