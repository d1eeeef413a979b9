"""Markdown rendered while it streams, at the cost of the last open block only.

An answer arrives a few tokens at a time. Rendering the whole of it again every frame would
lay out the whole answer (and Pygments would lex all of its code) many times a second, work
taken from llama.cpp's compute threads. So the source is cut at block boundaries that no
later text can change: the blocks before a cut are rendered once and stay in the document;
only the open tail (the last paragraph, list or code fence so far) is rendered again, each
frame, in place of its previous rendering.

A cut goes where a new top-level block begins after a complete one: a line that starts at
column 0 after a blank line, or any line after a closing code fence or an ATX heading, and
never inside a fence, before an indented line (it may continue a list item or be indented
code), or before a list item (two halves of one list would number from 1 twice). The
provenance of the source characters travels with each piece (markdown_render's tint).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from PySide6.QtGui import QColor, QTextCursor, QTextDocument

from .markdown_render import append_rendered, render_markdown
from .open_fence import FENCE, closes_in, fence_closes, last_cut, marker_of, opener, render_chunk
HEADING = re.compile(r"#{1,6}(\s|$)")
LIST_ITEM = re.compile(r"([-+*]|\d{1,9}[.)])(\s|$)")
# An unfinished last line that may still become a fence ("``", "```py"): shown once it is
# whole, so a half-typed fence never shows as raw backticks for a frame.
FENCE_SO_FAR = re.compile(r" {0,3}(`+|~+)[\w+#.-]*")


def commit_point(source: str, start: int) -> int:
    """The last position >= `start` before which `source` is a run of finished blocks."""
    cut = start
    fence: str | None = None
    prev_blank = False
    prev_closed = False  # the previous line closed a fence or was a heading: a block just ended
    pos = start
    while True:
        nl = source.find("\n", pos)
        if nl < 0:
            break  # the last line is unfinished: it belongs to the tail
        line = source[pos:nl]
        if fence is None:
            blank = not line.strip()
            top = bool(line) and not line[0].isspace() and not LIST_ITEM.match(line)
            if pos > start and top and (prev_blank or prev_closed):
                cut = pos
            m = FENCE.match(line)
            if m is not None and not (m.group(1)[0] == "`" and "`" in line[m.end():]):
                fence = m.group(1)
                prev_closed = False
            else:
                prev_closed = bool(HEADING.match(line))
            prev_blank = blank
        elif fence_closes(line, fence):
            fence = None
            prev_closed, prev_blank = True, False
        pos = nl + 1
    return cut  # a block that seems finished at the very end waits for the next line: "- a\n\n" may go on with "- b"


def visible_end(source: str) -> int:
    """How much of `source` to show: all but an unfinished line that may become a fence."""
    last = source.rfind("\n") + 1
    if last < len(source) and FENCE_SO_FAR.fullmatch(source[last:]):
        return last
    return len(source)


def slice_spans(spans: list[tuple[int, str]], start: int, end: int) -> list[tuple[int, str]]:
    """The (length, provenance) spans of source[start:end]."""
    out: list[tuple[int, str]] = []
    pos = 0
    for n, prov in spans:
        a, b = max(pos, start), min(pos + n, end)
        if b > a:
            out.append((b - a, prov))
        pos += n
        if pos >= end:
            break
    return out


@dataclass
class _OpenFence:
    """The open code fence at the tail: its lines before `done` are rendered for good, and
    their rendering ends at document position `pos` (where the rest is rendered each frame)."""

    line: str  # the fence line ("```python")
    done: int
    pos: int
    codes: list[str] = field(default_factory=list)
    scanned: int = 0  # complete lines before this source position are known not to close it


class MarkdownStream:
    """A streaming answer rendered into `doc` after position `start` (the end of the block
    before it, or 0 in an empty document) to the document's end.

    `add` takes [provenance, text] runs (cheap, any time); `render` shows them (at most once
    a frame). `code_blocks` is the code of every block shown, for the Copy links numbered
    from `first_copy`."""

    def __init__(self, doc: QTextDocument, start: int, colours: dict[str, QColor] | None, first_copy: int = 0):
        self.doc = doc
        self.colours = colours
        self.first_copy = first_copy
        self.start = start
        self.source = ""
        self.spans: list[tuple[int, str]] = []
        self.committed = 0  # source characters rendered for good
        self._tail_pos = start  # where the tail's rendering begins in `doc`
        self._rendered = 0  # source characters shown by the last render
        self._done_codes: list[str] = []
        self._tail_codes: list[str] = []
        self._fence: _OpenFence | None = None  # the tail, when it is an open code fence
        self.renders = 0  # pieces rendered (finished blocks and tails), for tests and the benchmark

    @property
    def code_blocks(self) -> list[str]:
        return self._done_codes + self._tail_codes

    def add(self, runs: list[list[str]]) -> None:
        for prov, text in runs:
            self.source += text
            if self.spans and self.spans[-1][1] == prov:
                self.spans[-1] = (self.spans[-1][0] + len(text), prov)
            else:
                self.spans.append((len(text), prov))

    def render(self) -> bool:
        """Show the source as it is now; False when there was nothing new to show."""
        end = visible_end(self.source)
        if end == self._rendered:
            return False
        cut = commit_point(self.source[:end], self.committed)
        cursor = QTextCursor(self.doc)
        cursor.beginEditBlock()
        if cut > self.committed:
            self._clear_from(cursor, self._tail_pos)
            self._done_codes += self._insert(cursor, self.committed, cut)
            self.committed = cut
            self._tail_pos = cursor.position()
        if not self._render_open_fence(cursor, end):
            self._clear_from(cursor, self._tail_pos)
            self._tail_codes = self._insert(cursor, self.committed, end) if end > self.committed else []
        cursor.endEditBlock()
        self._rendered = end
        return True

    def finish(self) -> None:
        """Show the rest, and render an open fence shown line by line once more whole: its
        highlighting then reads multi-line strings as the whole answer's rendering does
        (for an answer that ends inside a fence; a closed fence is rendered whole anyway)."""
        self.render()
        if self._fence is None:
            return
        cursor = QTextCursor(self.doc)
        cursor.beginEditBlock()
        self._clear_from(cursor, self._tail_pos)
        self._tail_codes = self._insert(cursor, self.committed, self._rendered)
        cursor.endEditBlock()

    def _clear_from(self, cursor: QTextCursor, pos: int) -> None:
        """Remove the document from `pos` to its end (a rendering about to be replaced)."""
        if pos == self._tail_pos:
            self._fence = None
        cursor.setPosition(pos)
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()

    def _render_open_fence(self, cursor: QTextCursor, end: int) -> bool:
        """Render the tail when it is an open code fence: new whole lines appended once, the
        lines after the last cut again (open_fence.py). False when the tail is not one (or
        has no line of code yet): it is then rendered whole."""
        f = self._fence
        if f is None:
            line = opener(self.source[self.committed:end])
            if line is None:
                return False
            body = self.committed + len(line) + 1
            cut = last_cut(self.source, body, end)
            if not self.source[body:cut].strip("\n"):
                return False  # no line of code before the cut: the label would come alone
            self._clear_from(cursor, self._tail_pos)
            codes = self._insert(cursor, self.committed, cut)
            f = self._fence = _OpenFence(line, cut, cursor.position(), codes, scanned=self.source.rfind("\n", 0, end) + 1)
        else:
            if closes_in(self.source, f.scanned, marker_of(f.line), end):
                return False
            f.scanned = max(f.scanned, self.source.rfind("\n", 0, end) + 1)
            cut = last_cut(self.source, f.done, end)
            self._clear_from(cursor, f.pos)
            if cut > f.done:
                f.codes += self._insert_chunk(cursor, f.line, f.done, cut)
                f.done, f.pos = cut, cursor.position()
        rest = self._insert_chunk(cursor, f.line, f.done, end) if end > f.done else []
        self._tail_codes = ["\n".join(f.codes + rest)]
        return True

    def _insert(self, cursor: QTextCursor, a: int, b: int) -> list[str]:
        """Render source[a:b] at the cursor (the document's end) as blocks of their own."""
        spans = slice_spans(self.spans, a, b) if self.colours else None
        r = render_markdown(self.source[a:b], spans, self.colours, first_copy=self.first_copy + len(self._done_codes))
        self.renders += 1
        append_rendered(cursor, r.document)
        return r.code_blocks

    def _insert_chunk(self, cursor: QTextCursor, fence_line: str, a: int, b: int) -> list[str]:
        """Render lines source[a:b] of the open fence at the cursor, as more of its code lines."""
        spans = slice_spans(self.spans, a, b) if self.colours else None
        before = slice_spans(self.spans, a - 1, a)  # the newline that ends the line before
        r = render_chunk(fence_line, self.source[a:b], spans, self.colours, before[0][1] if before else "plain")
        self.renders += 1
        append_rendered(cursor, r.document)
        return r.code_blocks

    def text(self) -> str:
        """The streamed answer as rendered so far (what a reader sees, markup gone)."""
        c = QTextCursor(self.doc)
        c.setPosition(self.start)
        c.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        text = c.selectedText().replace("\u2029", "\n")
        return text[1:] if self.start and text.startswith("\n") else text
