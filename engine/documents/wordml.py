"""A DOCX's text read as a stream of XML events (expat), never as a tree: python-docx built an
object per element and walked them per paragraph (16 MB of XML took over five minutes and
gigabytes), where this holds one paragraph or table at a time and stops as soon as the text
passes MAX_TEXT_CHARS or the markup passes MAX_DOCX_TAGS.

It reads what python-docx's reader read, in the same words: the paragraphs and tables that
are children of the body (not those wrapped in content controls or tracked changes), a
paragraph's text from its runs and hyperlinks' runs (w:t, w:tab and w:ptab as a tab, a line
break or w:cr as a newline, a page or column break as nothing, w:noBreakHyphen as '-'), a
table's cells by layout column (a merged cell repeated over the columns it spans and the rows
it continues into), a cell's text as its paragraphs joined by newlines, and a paragraph's style
by its name in word/styles.xml (the default paragraph style when it names none)."""

from __future__ import annotations

import posixpath
import zipfile
from typing import Callable
from xml.parsers import expat

from . import model
from .model import Refused, join_blocks, markdown_table

# '<' in one part: parsing costs ~2.3 µs of CPU per element on a slow machine, so the worst
# case (empty elements) is ~5 s; Word writes ~0.1-0.3 tags per character of text, so a document
# at MAX_TEXT_CHARS has well under this (docs/benchmarks.md, "Document limits").
MAX_DOCX_TAGS = 2_000_000

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main "
_RELS = "http://schemas.openxmlformats.org/package/2006/relationships "
_DOC_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"
_STYLES_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles"
MAX_SPAN = 64  # columns a table cell may span (Word allows 63): each is a cell of the Markdown table
_CHUNK = 64 * 1024
_UI_NAMES = {"caption": "Caption", "footer": "Footer", "header": "Header",
             **{f"heading {n}": f"Heading {n}" for n in range(1, 10)}}  # python-docx's BabelFish

# States of the element stack: what an element is, by its parent's state and its own tag.
(OTHER, DOC, BODY, P, PPR, PSTYLE, LINK, RUN, TEXT, TAB, BREAK, CR, HYPHEN,
 TBL, TR, TRPR, BEFORE, TC, TCPR, SPAN, VMERGE) = range(21)
_STATES = {
    (None, "document"): DOC, (DOC, "body"): BODY, (BODY, "p"): P, (BODY, "tbl"): TBL, (TBL, "tr"): TR,
    (TR, "trPr"): TRPR, (TRPR, "gridBefore"): BEFORE, (TR, "tc"): TC, (TC, "tcPr"): TCPR,
    (TCPR, "gridSpan"): SPAN, (TCPR, "vMerge"): VMERGE, (TC, "p"): P, (P, "pPr"): PPR, (PPR, "pStyle"): PSTYLE,
    (P, "hyperlink"): LINK, (P, "r"): RUN, (LINK, "r"): RUN, (RUN, "t"): TEXT, (RUN, "tab"): TAB,
    (RUN, "ptab"): TAB, (RUN, "br"): BREAK, (RUN, "cr"): CR, (RUN, "noBreakHyphen"): HYPHEN,
}
_NEXT = {(parent, _W + tag): state for (parent, tag), state in _STATES.items()}
_VAL = _W + "val"


def docx_blocks(path: str) -> str:
    """The document's text as Markdown blocks joined (headings, items, tables, paragraphs)."""
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        document = _target(z, names, "_rels/.rels", "", _DOC_REL) or "word/document.xml"
        styles_part = _target(z, names, _rels_of(document), posixpath.dirname(document), _STYLES_REL)
        styles = _Styles()
        if styles_part:
            _parse(z, styles_part, styles.start, styles.end, None)
        body = _Body(styles.names())
        _parse(z, document, body.start, body.end, body.data, body.check)
        return join_blocks(body.blocks)


def _rels_of(part: str) -> str:
    return posixpath.join(posixpath.dirname(part), "_rels", posixpath.basename(part) + ".rels")


def _target(z: zipfile.ZipFile, names: set[str], rels: str, base: str, rel_type: str) -> str | None:
    """The part a relationship of `rel_type` in `rels` points to (None when there is none)."""
    if rels not in names:
        return None
    found: list[str] = []

    def start(tag: str, attrs: dict[str, str]) -> None:
        if tag == _RELS + "Relationship" and attrs.get("Type") == rel_type and attrs.get("TargetMode") != "External":
            found.append(attrs.get("Target", ""))

    _parse(z, rels, start, None, None)
    if not found:
        return None
    target = found[0]
    part = posixpath.normpath(target.lstrip("/") if target.startswith("/") else posixpath.join(base, target))
    return part if part in names else None


def _parse(z: zipfile.ZipFile, part: str, start: Callable, end: Callable | None, data: Callable | None,
           check: Callable[[], None] | None = None) -> None:
    """Feed the part to expat in chunks, refusing it once its tags pass MAX_DOCX_TAGS (the
    parse's time is its number of elements) and calling `check` between chunks. A DTD is
    refused: Word writes none, and its entities are how XML grows without bound."""
    parser = expat.ParserCreate(namespace_separator=" ")
    parser.buffer_text = True
    parser.StartElementHandler = start
    if end is not None:
        parser.EndElementHandler = end
    if data is not None:
        parser.CharacterDataHandler = data

    def no_dtd(*_: object) -> None:
        raise ValueError(f"{part} declares a DTD, which Word documents do not")

    parser.StartDoctypeDeclHandler = no_dtd
    tags = 0
    with z.open(part) as f:
        while chunk := f.read(_CHUNK):
            tags += chunk.count(b"<")
            if tags > MAX_DOCX_TAGS:
                raise Refused(f"its {part} holds more than {MAX_DOCX_TAGS:,} XML tags, more markup than "
                              "Tandem reads: split the document")
            parser.Parse(chunk, False)
            if check is not None:
                check()
        parser.Parse(b"", True)


class _Stack:
    """Each open element's state, by its parent's state and its tag (OTHER for all that is
    not read, and for everything inside it). The time of a parse is these two calls per
    element, so a tag no state names is pushed without building a key."""

    def __init__(self, states: dict[tuple[int | None, str], int]) -> None:
        self.states = states
        self.named = {tag for _, tag in states}
        self.stack: list[int | None] = [None]

    def push(self, tag: str) -> int:
        state = self.states.get((self.stack[-1], tag), OTHER) if tag in self.named else OTHER
        self.stack.append(state)
        return state


STYLES, STYLE, NAME = DOC, P, PSTYLE  # the same numbers serve styles.xml's three levels
_STYLE_STATES = {(None, _W + "styles"): STYLES, (STYLES, _W + "style"): STYLE, (STYLE, _W + "name"): NAME}


class _Styles(_Stack):
    """Paragraph style names by id: the first w:style of an id, as python-docx finds it, and
    the default paragraph style (the last one marked default) for a paragraph naming none."""

    def __init__(self) -> None:
        super().__init__(_STYLE_STATES)
        self.by_id: dict[str, list[str | None]] = {}  # id -> [type, name]
        self.default: list[str | None] | None = None
        self.style: list[str | None] = [None, None]

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        state = self.push(tag)
        if state == STYLE:
            self.style = [attrs.get(_W + "type"), None]
            self.by_id.setdefault(attrs.get(_W + "styleId", ""), self.style)
            if self.style[0] == "paragraph" and attrs.get(_W + "default") in ("1", "true", "on"):
                self.default = self.style
        elif state == NAME and self.style[1] is None:
            self.style[1] = attrs.get(_VAL)

    def end(self, tag: str) -> None:
        self.stack.pop()

    def names(self) -> Callable[[str | None], str]:
        """A paragraph's style name from its style id ("" for none). Without a styles part
        every paragraph is plain, as python-docx read it (its stand-in styles have no headings)."""
        cache: dict[str | None, str] = {}

        def name(style_id: str | None) -> str:
            if style_id not in cache:
                style = self.by_id.get(style_id) if style_id else None
                if style is None or style[0] != "paragraph":
                    style = self.default
                raw = style[1] if style is not None else None
                cache[style_id] = _UI_NAMES.get(raw, raw) if raw else ""
            return cache[style_id]

        return name


class _Body(_Stack):
    """The body's paragraphs and tables as Markdown blocks, one element at a time."""

    def __init__(self, style_name: Callable[[str | None], str]) -> None:
        super().__init__(_NEXT)
        self.style_name = style_name
        self.blocks: list[str] = []
        self.chars = 0  # the blocks' length joined (at least one character between blocks)
        self.pending = 0  # text (and table cells) read into the paragraph or table not yet a block
        self.parts: list[str] = []  # the open paragraph's text
        self.style: str | None = None
        self.rows: list[list[str]] = []  # the open table's cells, by layout column
        self.above: dict[int, tuple[str, int]] = {}  # the row above: grid offset -> (text, span)
        self.tcs: list[tuple[str, int, str | None]] = []  # the open row's cells: (text, span, vMerge)
        self.before = 0
        self.cell: list[str] = []  # the open cell's paragraphs
        self.span, self.vmerge = 1, None

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        if tag not in self.named:  # most of Word's elements (run and paragraph properties)
            self.stack.append(OTHER)
            return
        state = self.states.get((self.stack[-1], tag), OTHER)
        self.stack.append(state)
        if state <= P:
            if state == P:
                self.parts, self.style = [], None
        elif state == TAB:
            self.parts.append("\t")
        elif state == BREAK:
            if attrs.get(_W + "type", "textWrapping") == "textWrapping":  # a page or column break: nothing
                self.parts.append("\n")
        elif state == CR:
            self.parts.append("\n")
        elif state == HYPHEN:
            self.parts.append("-")
        elif state == PSTYLE:
            if self.style is None:
                self.style = attrs.get(_VAL)
        elif state == TC:
            self.cell, self.span, self.vmerge = [], 1, None
        elif state == SPAN:
            self.span = int(attrs.get(_VAL) or 1)
            if self.span > MAX_SPAN:
                raise ValueError(f"a table cell spans {self.span:,} columns (Word allows 63)")
        elif state == VMERGE:
            self.vmerge = attrs.get(_VAL, "continue")
        elif state == TR:
            self.tcs, self.before = [], 0
        elif state == BEFORE:
            self.before = int(attrs.get(_VAL) or 0)
        elif state == TBL:
            self.rows, self.above = [], {}

    def data(self, text: str) -> None:
        if self.stack[-1] == TEXT:
            self.parts.append(text)
            self.pending += len(text)

    def end(self, tag: str) -> None:
        state = self.stack.pop()
        if state == P:
            text = "".join(self.parts)
            if self.stack[-1] == TC:
                self.cell.append(text)
            else:
                self.pending = 0
                self.paragraph(text.strip())
        elif state == TC:
            self.tcs.append(("\n".join(self.cell), self.span, self.vmerge))
        elif state == TR:
            self.row()
        elif state == TBL:
            self.pending = 0
            table = markdown_table(self.rows)  # type: ignore[arg-type]
            if table:
                self.add(table)

    def paragraph(self, text: str) -> None:
        if not text:
            return
        style = self.style_name(self.style)
        if style == "Title":
            self.add(f"# {text}")
        elif style.startswith("Heading") and style[7:].strip().isdigit():
            self.add("#" * min(6, int(style[7:])) + " " + text)
        elif style.startswith("List"):
            self.add(("1. " if "Number" in style else "- ") + text)
        else:
            self.add(text)

    def row(self) -> None:
        """The row's cells by layout column: a cell spanning columns once per column, a cell
        continuing a vertical merge as the cell above it at its offset (python-docx's rule)."""
        cells: list[str] = []
        here: dict[int, tuple[str, int]] = {}
        offset = self.before
        for text, span, vmerge in self.tcs:
            if vmerge == "continue":
                if not self.rows:
                    raise ValueError("no tr above topmost tr in w:tbl")
                if offset not in self.above:
                    raise ValueError(f"no `tc` element at grid_offset={offset}")
                cell = self.above[offset]
            else:
                cell = (text, span)
            cells.extend([cell[0]] * cell[1])
            here[offset] = cell
            offset += span
        self.rows.append(cells)
        self.above = here
        self.pending += len(cells)  # each at least a character of the table's text

    def add(self, block: str) -> None:
        self.chars += len(block) + (1 if self.blocks else 0)
        self.blocks.append(block)

    def check(self) -> None:
        model.check_length(self.chars + self.pending)
