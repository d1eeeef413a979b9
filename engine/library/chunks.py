"""A document cut into passages small enough to rank and to quote, each with the anchor a
citation names: the page of a PDF, the sheet, slide, chapter or heading of the others, the
line range of a plain text file."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..documents import Document

PASSAGE_CHARS = 1200  # about 300 tokens: several fit a 4k context beside the answer
_LINES = re.compile(r"^Lines (\d+)-(\d+)$")


@dataclass(frozen=True)
class Passage:
    """One indexed piece of a file. `unit` is "page", "sheet", "slide", "chapter", "section"
    or "lines"; `anchor` what a citation shows ("3", "Budget", "Slide 2", "12-40")."""

    unit: str
    anchor: str
    text: str


def passages(doc: Document, size: int = PASSAGE_CHARS) -> list[Passage]:
    """The document's passages in reading order; a long section is cut at paragraph (or line)
    breaks, each piece keeping its section's anchor (lines: its own line range)."""
    out: list[Passage] = []
    for section in doc.sections:
        if not section.text.strip():
            continue
        lines = _LINES.match(section.title)
        if lines:
            out += _line_pieces(section.text, int(lines.group(1)), size)
            continue
        unit, anchor = _anchor(doc.unit, section.title)
        out += [Passage(unit, anchor, piece) for piece in _pieces(section.text, size)]
    return out


def _anchor(unit: str, title: str) -> tuple[str, str]:
    """("page", "3") for "Page 3"; ("sheet", "Budget") for "Sheet Budget"; a heading as is."""
    for word in ("Page", "Sheet", "Slide"):
        if title.startswith(word + " "):
            return word.lower(), title[len(word) + 1:]
    return (unit if unit in ("chapter", "section") else "section"), title


def _pieces(text: str, size: int) -> list[str]:
    """`text` in pieces of at most about `size` characters, cut between paragraphs (a single
    paragraph longer than that is cut between lines, then words)."""
    if len(text) <= size:
        return [text.strip()]
    out: list[str] = []
    current = ""
    for para in _split(text, size):
        if current and len(current) + 2 + len(para) > size:
            out.append(current)
            current = ""
        current = f"{current}\n\n{para}" if current else para
    if current.strip():
        out.append(current)
    return [p.strip() for p in out if p.strip()]


def _split(text: str, size: int) -> list[str]:
    parts: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        while len(para) > size:
            cut = max(para.rfind("\n", 0, size), para.rfind(" ", 0, size))
            cut = cut if cut > size // 4 else size
            parts.append(para[:cut])
            para = para[cut:].lstrip()
        if para.strip():
            parts.append(para)
    return parts


def _line_pieces(text: str, first: int, size: int) -> list[Passage]:
    """A plain text part in pieces of whole lines, each anchored by its own line range."""
    out: list[Passage] = []
    lines = text.split("\n")
    start, chars = 0, 0
    for i, line in enumerate(lines):
        if i > start and chars + len(line) + 1 > size:
            out.append(_lines(lines, start, i, first))
            start, chars = i, 0
        chars += len(line) + 1
    if start < len(lines):
        out.append(_lines(lines, start, len(lines), first))
    # a line longer than a passage (a minified file) is cut too, each piece keeping its range
    return [Passage(p.unit, p.anchor, piece) for p in out if p.text.strip() for piece in _pieces(p.text, size)]


def _lines(lines: list[str], a: int, b: int, first: int) -> Passage:
    while b > a + 1 and not lines[b - 1].strip():  # the range names the lines that hold text
        b -= 1
    while a < b - 1 and not lines[a].strip():
        a += 1
    return Passage("lines", f"{first + a}-{first + b - 1}", "\n".join(lines[a:b]).strip("\n"))
