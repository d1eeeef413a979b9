"""An answer's Markdown rendered into a QTextDocument: GitHub dialect, code blocks in a
monospace font on a tinted background under a "language · Copy" line, their long lines
wrapped by default (a line that widened the document scrolled the whole transcript
sideways, prose and actions with it; `set_code_wrap(False)` keeps them whole, for those
who rather scroll), and the token provenance of the *source* Markdown laid
over the *rendered* characters as a tint.

Why a tint over the rendering: the coloured and the plain view are then the same text, so
turning colours on never brings the raw fences back. The stored spans count characters of
the source; the rendered plain text is (nearly) a subsequence of it, with markup such as
``**``, fences and list markers dropped, so each rendered character is matched to the next
equal source character (whitespace matches any whitespace) and takes that one's provenance.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtGui import (
    QColor, QFont, QFontDatabase, QTextBlock, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextDocument,
    QTextDocumentFragment, QTextFormat, QTextListFormat,
)

from .code_highlight import highlight

# GitHub's dialect without raw HTML: an answer that mentions <div> shows "<div>" (with HTML
# on, Qt would take it as markup and drop the rest of the answer), and nothing is fetched.
MARKDOWN = QTextDocument.MarkdownFeature.MarkdownDialectGitHub | QTextDocument.MarkdownFeature.MarkdownNoHTML
CODE_BG = QColor(128, 128, 128, 36)  # reads on light and dark palettes alike
LABEL_FG = QColor(128, 128, 128)
COPY_SCHEME = "copy"
LABEL_PROPERTY = QTextFormat.Property.UserProperty.value + 1  # marks a "language · Copy" line
LOOKAHEAD = 400  # how far ahead in the source a rendered character is looked for


@dataclass
class Rendered:
    """A rendered answer and the code of its blocks, in order (index = N of `copy:N`)."""

    document: QTextDocument
    code_blocks: list[str] = field(default_factory=list)


def source_provenance(text: str, spans: list[tuple[int, str]]) -> list[str]:
    """One provenance per source character (characters past the spans are "plain")."""
    out: list[str] = []
    for n, prov in spans:
        out.extend([prov] * n)
    if len(out) < len(text):
        out.extend(["plain"] * (len(text) - len(out)))
    return out[: len(text)]


def align(rendered: str, source: str) -> list[int | None]:
    """For each rendered character, the index of the source character it shows (or None).

    Greedy and linear: the next equal character within LOOKAHEAD of the last match;
    whitespace (including the block separator) matches any whitespace."""
    out: list[int | None] = []
    j = 0
    n = len(source)
    for ch in rendered:
        space = ch.isspace() or ch == "\u2029"
        k = j
        end = min(n, j + LOOKAHEAD)
        while k < end:
            s = source[k]
            if s == ch or (space and s.isspace()):
                break
            k += 1
        if k < end:
            out.append(k)
            j = k + 1
        else:
            out.append(None)
    return out


def rendered_runs(rendered: str, source: str, spans: list[tuple[int, str]]) -> list[tuple[int, int, str]]:
    """(start, length, provenance) runs over the rendered text; an unmatched character takes
    its predecessor's provenance."""
    prov = source_provenance(source, spans)
    runs: list[tuple[int, int, str]] = []
    last = "plain"
    for i, k in enumerate(align(rendered, source)):
        p = prov[k] if k is not None and k < len(prov) else last
        last = p
        if runs and runs[-1][2] == p and runs[-1][0] + runs[-1][1] == i:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1, p)
        else:
            runs.append((i, 1, p))
    return runs


_WRAP = [True]  # the view's choice, app-wide: long code lines wrap (set_code_wrap)


def set_code_wrap(on: bool) -> None:
    """Wrap long code lines (True) or keep them whole and scroll sideways, in what is
    rendered from now on."""
    _WRAP[0] = bool(on)


def code_wraps() -> bool:
    return _WRAP[0]


def mono_font() -> QFont:
    return QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)


_mono = mono_font


def _is_code(block: QTextBlock) -> bool:
    f = block.blockFormat()
    return f.hasProperty(QTextFormat.Property.BlockCodeFence) or f.hasProperty(QTextFormat.Property.BlockCodeLanguage)


def _code_groups(doc: QTextDocument) -> list[list[QTextBlock]]:
    """Consecutive fenced-code blocks, one list per code block of the source."""
    groups: list[list[QTextBlock]] = []
    prev_code = False
    b = doc.begin()
    while b.isValid():
        code = _is_code(b)
        if code:
            if not prev_code:
                groups.append([])
            groups[-1].append(b)
        prev_code = code
        b = b.next()
    return groups


def render_markdown(source: str, spans: list[tuple[int, str]] | None = None,
                    colours: dict[str, QColor] | None = None, first_copy: int = 0) -> Rendered:
    """Render `source` (GitHub Markdown); tint by `spans` when `colours` are given.

    Copy links are numbered from `first_copy` so a whole transcript can number them once."""
    doc = QTextDocument()
    doc.setMarkdown(source, MARKDOWN)
    if f"{COPY_SCHEME}:" in source or "msg:" in source:
        _disarm_links(doc)
    if spans and colours:
        _tint(doc, source, spans, colours)
    return Rendered(doc, _style_code(doc, first_copy))


def append_rendered(cursor: QTextCursor, doc: QTextDocument) -> None:
    """Insert the rendered `doc` as blocks of their own after the cursor's block (the cursor
    at the end of its document).

    QTextCursor.insertFragment merges a fragment's first block into the cursor's block and
    keeps that block's format: an answer's heading would lose its level, a code label its
    tint. So the fragment gets an empty first block to be merged instead. Into an empty
    document it goes as it is (Qt then keeps the first block's format)."""
    if cursor.document().isEmpty():
        cursor.insertFragment(QTextDocumentFragment(doc))
        return
    first = doc.begin()
    QTextCursor(doc).insertBlock(first.blockFormat(), first.charFormat())  # the content moves to a second block
    cursor.insertFragment(QTextDocumentFragment(doc))


def _disarm_links(doc: QTextDocument) -> None:
    """An answer's own links that use the transcript's schemes (copy:, msg:) become plain
    text: a model must not be able to write a link that deletes or rewrites messages."""
    cursor = QTextCursor(doc)
    b = doc.begin()
    while b.isValid():
        it = b.begin()
        while not it.atEnd():
            frag = it.fragment()
            href = frag.charFormat().anchorHref()
            if href.split(":", 1)[0].lower() in (COPY_SCHEME, "msg"):
                cursor.setPosition(frag.position())
                cursor.setPosition(frag.position() + frag.length(), QTextCursor.MoveMode.KeepAnchor)
                f = QTextCharFormat()
                f.setAnchor(False)
                f.setAnchorHref("")
                cursor.mergeCharFormat(f)
            it += 1
        b = b.next()


def _indentation(text: str) -> list[bool]:
    """For each character: whether it is part of a line's leading whitespace."""
    out, leading = [], True
    for ch in text:
        if ch in "\n\u2029":
            leading = True
            out.append(False)
            continue
        leading = leading and ch in " \t"
        out.append(leading)
    return out


def _glyph_runs(start: int, length: int, indent: list[bool]) -> list[tuple[int, int]]:
    """[start, start + length) without the indentation in it: the tint goes on the text, not
    on the blocks of spaces in front of code lines."""
    runs, i, end = [], start, start + length
    while i < end:
        while i < end and indent[i]:
            i += 1
        j = i
        while j < end and not indent[j]:
            j += 1
        if j > i:
            runs.append((i, j))
        i = j
    return runs


def _tint(doc: QTextDocument, source: str, spans: list[tuple[int, str]], colours: dict[str, QColor]) -> None:
    cursor = QTextCursor(doc)
    text = doc.toPlainText()
    indent = _indentation(text)
    for start, length, prov in rendered_runs(text, source, spans):
        colour = colours.get(prov)
        if colour is None or not colour.alpha():
            continue
        f = QTextCharFormat()
        f.setBackground(colour)
        for a, b in _glyph_runs(start, min(length, len(text) - start), indent):
            cursor.setPosition(a)
            cursor.setPosition(b, QTextCursor.MoveMode.KeepAnchor)
            cursor.mergeCharFormat(f)


def _style_code(doc: QTextDocument, first_copy: int) -> list[str]:
    """Monospace + tinted background for each code block, a "language · Copy" line above it;
    returns each block's code (its lines joined by newlines)."""
    codes: list[str] = []
    mono = QTextCharFormat()
    mono.setFont(_mono(), QTextCharFormat.FontPropertiesInheritanceBehavior.FontPropertiesSpecifiedOnly)
    mono.setFontFixedPitch(True)
    groups = _code_groups(doc)
    cursor = QTextCursor(doc)
    for group in groups:
        codes.append("\n".join(b.text() for b in group))
        lang = str(group[0].blockFormat().property(QTextFormat.Property.BlockCodeLanguage) or "")
        highlight(cursor, group[0].position(), codes[-1], lang)
        for b in group:
            fmt = b.blockFormat()
            fmt.setBackground(CODE_BG)
            fmt.setLeftMargin(6)
            fmt.setNonBreakableLines(not _WRAP[0])  # unwrapped: a long line scrolls sideways, indentation kept
            cursor.setPosition(b.position())
            cursor.setBlockFormat(fmt)
            cursor.setPosition(b.position())
            cursor.setPosition(b.position() + b.length() - 1, QTextCursor.MoveMode.KeepAnchor)
            cursor.mergeCharFormat(mono)
    # The label lines go in last, from the end backwards, so earlier positions stay valid.
    for n in range(len(groups) - 1, -1, -1):
        first = groups[n][0]
        lang = str(first.blockFormat().property(QTextFormat.Property.BlockCodeLanguage) or "")
        _insert_label(cursor, first, lang or "code", f"{COPY_SCHEME}:{first_copy + n}")
    return codes


def _insert_label(cursor: QTextCursor, block: QTextBlock, lang: str, href: str) -> None:
    """A line "lang   Copy" above `block`: the block is split at its start, the label keeps
    the first half (empty) and gets a label format; the code moves on unchanged."""
    code_fmt = block.blockFormat()
    code_char = block.charFormat()
    cursor.setPosition(block.position())
    cursor.insertBlock(code_fmt, code_char)
    cursor.movePosition(QTextCursor.MoveOperation.PreviousBlock)
    label_fmt = QTextBlockFormat()
    label_fmt.setBackground(CODE_BG)
    label_fmt.setLeftMargin(6)
    label_fmt.setTopMargin(6)
    label_fmt.setProperty(LABEL_PROPERTY, True)
    cursor.setBlockFormat(label_fmt)
    plain = QTextCharFormat()
    plain.setForeground(LABEL_FG)
    small = QFont()
    small.setPointSizeF(max(7.0, small.pointSizeF() * 0.85))
    plain.setFont(small, QTextCharFormat.FontPropertiesInheritanceBehavior.FontPropertiesSpecifiedOnly)
    cursor.insertText(f"{lang}   ", plain)
    link = QTextCharFormat(plain)
    link.setAnchor(True)
    link.setAnchorHref(href)
    link.setFontUnderline(True)
    link.setForeground(QColor(56, 132, 244))
    link.setToolTip("Copy this code block to the clipboard")
    cursor.insertText("Copy", link)


def plain_text(doc: QTextDocument) -> str:
    """The rendered text as a user would copy it: list items keep their markers."""
    lines: list[str] = []
    b = doc.begin()
    while b.isValid():
        if b.blockFormat().boolProperty(LABEL_PROPERTY):
            b = b.next()
            continue
        text = b.text()
        lst = b.textList()
        if lst is not None:
            bullet = lst.format().style() in (QTextListFormat.Style.ListDisc, QTextListFormat.Style.ListCircle,
                                              QTextListFormat.Style.ListSquare)
            marker = "-" if bullet else lst.itemText(b)
            text = f"{marker} {text}"
        lines.append(text)
        b = b.next()
    return "\n".join(lines).replace("\u2028", "\n").replace("\u00a0", " ")
