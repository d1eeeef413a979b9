"""HTML (and so EPUB's XHTML chapters) to Markdown with the standard library's parser:
headings, paragraphs, lists, tables and preformatted code kept; scripts, styles and
navigation chrome dropped. RTF through striprtf."""

from __future__ import annotations

import posixpath
import zipfile
from html.parser import HTMLParser
from xml.etree import ElementTree

from .model import Section, check_length, join_blocks, markdown_table

_SKIP = {"script", "style", "head", "noscript", "template", "svg", "nav", "iframe", "object"}
_BLOCK = {"p", "div", "section", "article", "main", "header", "footer", "aside", "blockquote", "figure",
          "figcaption", "dl", "dt", "dd", "address", "form", "fieldset", "hr", "body", "html"}


class _ToMarkdown(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []  # finished blocks
        self.line: list[str] = []  # the block being written
        self.prefix = ""  # "## " for a heading, "- " for an item
        self.skip = 0
        self.pre = 0
        self.lists: list[str] = []  # "ul" / "ol" stack
        self.counters: list[int] = []
        self.table: list[list[str]] | None = None
        self.cell: list[str] | None = None
        self.title = ""
        self._in_title = False

    def flush(self) -> None:
        text = " ".join("".join(self.line).split()) if not self.pre else "".join(self.line)
        if text.strip():
            self.out.append(self.prefix + text)
        self.line, self.prefix = [], ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in _SKIP:
            self.skip += 1
            return
        if self.skip:
            return
        if tag == "br":
            (self.cell if self.cell is not None else self.line).append("\n" if self.pre else " ")
        elif tag == "table":
            self.flush()
            self.table = []
        elif tag == "tr" and self.table is not None:
            self.table.append([])
        elif tag in ("td", "th") and self.table is not None:
            self.cell = []
        elif self.cell is not None:
            return  # inside a cell everything is its text
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self.flush()
            self.prefix = "#" * int(tag[1]) + " "
        elif tag in ("ul", "ol"):
            self.flush()
            self.lists.append(tag)
            self.counters.append(0)
        elif tag == "li":
            self.flush()
            indent = "  " * max(0, len(self.lists) - 1)
            if self.lists and self.lists[-1] == "ol":
                self.counters[-1] += 1
                self.prefix = f"{indent}{self.counters[-1]}. "
            else:
                self.prefix = f"{indent}- "
        elif tag == "pre":
            self.flush()
            self.pre += 1
        elif tag in _BLOCK:
            self.flush()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in _SKIP:
            self.skip = max(0, self.skip - 1)
            return
        if self.skip:
            return
        if tag in ("td", "th") and self.table is not None and self.cell is not None:
            if not self.table:
                self.table.append([])
            self.table[-1].append(" ".join("".join(self.cell).split()))
            self.cell = None
        elif tag == "table" and self.table is not None:
            table = markdown_table(self.table)  # type: ignore[arg-type]
            if table:
                self.out.append(table)
            self.table, self.cell = None, None
        elif self.cell is not None or self.table is not None:
            return
        elif tag == "pre" and self.pre:
            code = "".join(self.line).strip("\n")
            self.line, self.prefix = [], ""
            self.pre -= 1
            if code.strip():
                self.out.append(f"```\n{code}\n```")
        elif tag in ("ul", "ol") and self.lists:
            self.flush()
            self.lists.pop()
            self.counters.pop()
        elif tag in _BLOCK or tag in ("li", "h1", "h2", "h3", "h4", "h5", "h6"):
            self.flush()

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if self.skip:
            return
        (self.cell if self.cell is not None else self.line).append(data)


def html_to_markdown(html: str) -> tuple[str, str]:
    """(title, Markdown) of an HTML page."""
    p = _ToMarkdown()
    p.feed(html)
    p.close()
    p.flush()
    return " ".join(p.title.split()), join_blocks(p.out)


def epub_chapters(path: str) -> list[Section]:
    """An EPUB's chapters in reading order (its spine), each as Markdown. EPUB is a zip of
    XHTML files that its package document (found through META-INF/container.xml) lists."""
    with zipfile.ZipFile(path) as z:
        container = ElementTree.fromstring(z.read("META-INF/container.xml"))
        rootfile = next(e.get("full-path") for e in container.iter() if e.tag.endswith("rootfile"))
        opf = ElementTree.fromstring(z.read(rootfile))
        base = posixpath.dirname(rootfile)
        manifest = {e.get("id"): e.get("href") for e in opf.iter() if e.tag.endswith("}item") or e.tag == "item"}
        spine = [e.get("idref") for e in opf.iter() if e.tag.endswith("itemref")]
        chapters: list[Section] = []
        chars, seen = 0, set[str]()
        for idref in spine:
            href = manifest.get(idref)
            if not href:
                continue
            name = posixpath.normpath(posixpath.join(base, href.split("#")[0]))
            if name in seen:  # a spine naming one file many times would read it as often
                continue
            seen.add(name)
            try:
                raw = z.read(name)
            except KeyError:
                continue
            title, md = html_to_markdown(raw.decode("utf-8", "replace"))
            chars += len(md)
            check_length(chars)
            if md.strip():
                head = next((ln.lstrip("#").strip() for ln in md.split("\n") if ln.startswith("#")), "")
                chapters.append(Section(head or title or f"Chapter {len(chapters) + 1}", md))
        return chapters


def rtf_to_text(data: bytes) -> str:
    from striprtf.striprtf import rtf_to_text as strip

    return strip(data.decode("latin-1"), errors="ignore")
