"""A document's text as sections (pages, sheets, slides, chapters, headings, parts), and the
Markdown table every tabular reader writes."""

from __future__ import annotations

import re
from dataclasses import dataclass

PART_LINES = 120  # a plain text file without headings is offered in parts of this many lines
MAX_TEXT_CHARS = 4_000_000  # what a document may hold once read (a 1,000-page book)


class Refused(Exception):
    """Why a reader stopped reading a file (a limit it passed), said after the file's name."""


def check_length(chars: int) -> None:
    """Refused once a document's text passes MAX_TEXT_CHARS; readers call it as they go, so
    that a huge file stops early instead of being read whole first."""
    if chars > MAX_TEXT_CHARS:
        raise Refused(f"its text passes {MAX_TEXT_CHARS:,} characters, too much to attach")


@dataclass(frozen=True)
class Section:
    title: str  # "Page 3", "Sheet Budget", "Slide 2", a heading's text, "Lines 1-120"
    text: str


@dataclass(frozen=True)
class Document:
    """The text of one file. `unit` names its sections for the person choosing some of them."""

    name: str
    kind: str  # "PDF", "DOCX", "XLSX", "text", ...
    sections: tuple[Section, ...]
    unit: str = "section"  # "page", "sheet", "slide", "chapter", "section", "part"
    whole: str | None = None  # the file's own text when it was one (kept exactly as it was)

    @property
    def text(self) -> str:
        if self.whole is not None:
            return self.whole
        return "\n\n".join(s.text for s in self.sections if s.text)

    def excerpt(self, chosen: list[int]) -> "Document":
        """The document cut to the sections at `chosen` (indices), named by what it keeps:
        "report.pdf (pages 2-4, 7)". All of them is the document itself."""
        keep = sorted(set(i for i in chosen if 0 <= i < len(self.sections)))
        if len(keep) == len(self.sections):
            return self
        label = _ranges([i + 1 for i in keep])
        plural = self.unit + ("s" if len(keep) > 1 else "")
        return Document(f"{self.name} ({plural} {label})", self.kind,
                        tuple(self.sections[i] for i in keep), self.unit)


def _ranges(numbers: list[int]) -> str:
    """1,2,3,5 -> "1-3, 5"."""
    out: list[str] = []
    for n in numbers:
        if out and "-" not in out[-1] and int(out[-1]) == n - 1:
            out[-1] = f"{out[-1]}-{n}"
        elif out and "-" in out[-1] and int(out[-1].split("-")[1]) == n - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{n}"
        else:
            out.append(str(n))
    return ", ".join(out)


_ITEM = re.compile(r"\s*(-|\d+\.) ")


def join_blocks(blocks: list[str]) -> str:
    """Blocks joined by blank lines, except that items of one list stay together. Joined once
    at the end: adding each block to the text so far took minutes for 200,000 blocks."""
    parts: list[str] = []
    last_line = ""  # the text's last line so far
    for b in blocks:
        if parts:  # some text so far (an empty block before it adds nothing)
            parts.append("\n" if _ITEM.match(b) and _ITEM.match(last_line) else "\n\n")
        if parts or b:
            parts.append(b)
        last_line = b.rsplit("\n", 1)[-1]
    return "".join(parts)


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    return " ".join(text.split()).replace("|", "\\|")


def markdown_table(rows: list[list[object]]) -> str:
    """Rows as a GitHub Markdown table, the first row as its header; empty trailing rows
    and columns dropped, short rows padded ("" when nothing is left)."""
    cells = [[_cell(v) for v in row] for row in rows]
    while cells and not any(cells[-1]):
        cells.pop()
    while cells and not any(cells[0]):
        cells.pop(0)
    width = max((max((i + 1 for i, c in enumerate(r) if c), default=0) for r in cells), default=0)
    if not width:
        return ""
    cells = [(r + [""] * width)[:width] for r in cells]
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * width]
    lines += ["| " + " | ".join(r) + " |" for r in cells[1:]]
    return "\n".join(lines)


_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def markdown_sections(text: str) -> list[Section]:
    """Markdown split before each heading of its top level (outside code fences); a text
    without headings is cut into parts of PART_LINES lines."""
    lines = text.split("\n")
    heads: list[tuple[int, int, str]] = []  # (line, level, title)
    fence = ""
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            mark = stripped[:3]
            fence = "" if fence == mark else (fence or mark)
            continue
        m = None if fence else _HEADING.match(line)
        if m:
            heads.append((i, len(m.group(1)), m.group(2)))
    if heads:
        top = min(level for _, level, _ in heads)
        starts = [(i, title) for i, level, title in heads if level == top]
        if starts[0][0] > 0 and "\n".join(lines[:starts[0][0]]).strip():
            starts.insert(0, (0, "Beginning"))
        else:
            starts[0] = (0, starts[0][1])
        bounds = [s for s, _ in starts] + [len(lines)]
        return [Section(title, "\n".join(lines[bounds[k]:bounds[k + 1]]).strip("\n"))
                for k, (_, title) in enumerate(starts)]
    return line_parts(text)


def line_parts(text: str) -> list[Section]:
    """A text cut into parts of PART_LINES lines (a '#' line in code or a log is no heading)."""
    lines = text.split("\n")
    return [Section(f"Lines {a + 1}-{min(a + PART_LINES, len(lines))}", "\n".join(lines[a:a + PART_LINES]))
            for a in range(0, len(lines), PART_LINES)]
