"""An open code fence streamed a line at a time: its finished lines rendered once, only the
lines after the last safe cut rendered again each frame.

The open last block of a code answer is a code fence that grows for most of the answer.
Rendering all of it again at every delivery (Markdown, Pygments, the provenance alignment)
costs in proportion to its length, i.e. quadratic over the answer. Here the fence is cut
into chunks at line starts: the first chunk is rendered with its fence line as ordinary
Markdown (the "language · Copy" line comes from it); each later chunk is rendered as a fence
of its own (same fence line, so the same indentation is stripped and the same language
highlighted), its label line dropped, and appended to the code block's lines.

Highlighting is per chunk: a construct that spans chunks (a docstring that began in an
earlier chunk) may be coloured as code while the fence is open. That is accepted, because
the fence is rendered whole, once, as soon as it closes (it is then a finished block in
markdown_stream.py), so the document a reader keeps is exactly the whole answer's rendering.

A chunk must start with a non-empty line: Qt drops a fence's leading empty lines, so empty
lines stay with the chunk before them (Qt keeps a fence's trailing empty lines).
"""

from __future__ import annotations

import re

from PySide6.QtGui import QColor, QTextCursor

from .markdown_render import Rendered, render_markdown

# A line rendered before a chunk's lines and then removed: a code block's first line gets
# formats of its own in Qt (no font in its block character format), every later line the same.
LEAD = "x"
FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


def fence_closes(line: str, marker: str) -> bool:
    """`line` closes a fence opened by `marker` (the same character, at least as many)."""
    s = line.strip()
    return len(line) - len(line.lstrip(" ")) <= 3 and len(s) >= len(marker) and set(s) == {marker[0]}


def opener(tail: str) -> str | None:
    """The fence line when `tail` (the open block's source) is a code fence not yet closed."""
    nl = tail.find("\n")
    if nl < 0:
        return None
    first = tail[:nl]
    m = FENCE.match(first)
    if m is None or (m.group(1)[0] == "`" and "`" in first[m.end():]):
        return None
    return first if not closes_in(tail, nl + 1, m.group(1)) else None


def closes_in(source: str, pos: int, marker: str, end: int | None = None) -> bool:
    """Some complete line of `source[:end]` from `pos` on closes the fence opened with `marker`."""
    while True:
        nl = source.find("\n", pos, len(source) if end is None else end)
        if nl < 0:
            return False
        if fence_closes(source[pos:nl], marker):
            return True
        pos = nl + 1


def marker_of(fence_line: str) -> str:
    m = FENCE.match(fence_line)
    assert m is not None
    return m.group(1)


def last_cut(source: str, lo: int, end: int) -> int:
    """The last line start in (lo, end] of `source` whose line has begun with a character
    other than a newline (a chunk may start there), or `lo` when there is none."""
    pos = source.rfind("\n", lo, end)
    while pos >= lo:
        start = pos + 1
        if start < end and source[start] != "\n":
            return start
        pos = source.rfind("\n", lo, pos)
    return lo


def render_chunk(fence_line: str, code: str, spans: list[tuple[int, str]] | None,
                 colours: dict[str, QColor] | None, newline_provenance: str = "plain") -> Rendered:
    """Lines `code` of an open fence (after a newline of `newline_provenance`), rendered as
    the whole fence would render them: code lines only (no label), highlighted, tinted.

    Rendered after the fence line and a LEAD line, both then removed, so that each line is
    formatted as a later line of its code block is (the tint of the newline before it included)."""
    head = f"{fence_line}\n{LEAD}\n"
    full = [(len(head), newline_provenance)] + spans if spans else None
    r = render_markdown(head + code, full, colours)
    doc = r.document
    first_code = doc.begin().next().next()
    if first_code.isValid():  # the label and the lead line go; the code's first line keeps its formats
        fmt, char = first_code.blockFormat(), first_code.charFormat()
        c = QTextCursor(doc)
        c.setPosition(first_code.position(), QTextCursor.MoveMode.KeepAnchor)
        c.removeSelectedText()
        c.setBlockFormat(fmt)
        c.setBlockCharFormat(char)
    r.code_blocks = [block.split("\n", 1)[1] for block in r.code_blocks]
    return r
