"""How an attached file goes into a prompt: one block per file, the same for the app and the
CLI, so a conversation started in one reads the same in the other."""

from __future__ import annotations

import re
import unicodedata

_KEPT = {"\u200c", "\u200d"}  # zero-width (non-)joiners: parts of emoji and of Persian and Indic words
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def visible_name(name: str) -> str:
    """A file name safe to show and to put in a prompt: each control character, line or
    paragraph separator, invisible format character (the bidi overrides and isolates
    U+202A-202E and U+2066-2069 among them) and lone surrogate becomes a visible escape
    (\\n, \\u202e), so that a name can neither start a line of its own nor reorder the text
    after it. Escaping twice changes nothing."""
    if name.isprintable() and not any(unicodedata.category(c) == "Cf" for c in name):
        return name
    return "".join(_escape(c) for c in name)


def _escape(c: str) -> str:
    if c in _KEPT or unicodedata.category(c) not in ("Cc", "Cf", "Cs", "Zl", "Zp"):
        return c
    if c in _SHORT:
        return _SHORT[c]
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def fence_for(text: str) -> str:
    """A code fence longer than any run of backticks in `text`, so the file cannot close it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def attachment_block(name: str, text: str) -> str:
    """The block of one attached file: its name (made visible_name), then its text inside a fence."""
    fence = fence_for(text)
    return f"Attached file `{visible_name(name)}`:\n\n{fence}\n{text}\n{fence}"


def with_attachments(prompt: str, blocks: list[str]) -> str:
    """Each file's block, then the typed prompt, joined by blank lines (as the app composes).
    Files first: two questions about one document then share the document as their prompt's
    start, which the prompt cache reads once (a question first made every new question a new
    prefix, and the whole document was read again)."""
    return "\n\n".join(blocks + ([prompt] if prompt else []))
