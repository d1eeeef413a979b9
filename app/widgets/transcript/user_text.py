"""A user message as typed, with its code shown as code. The text stays verbatim (no Markdown
is interpreted: an asterisk stays an asterisk), but a fenced block (``` or ~~~) is set in
the monospace font on the code tint, its fence lines kept so the message reads as it was
written, and an inline `span` is monospace too: pasted code no longer reads as prose."""

from __future__ import annotations

import re

from PySide6.QtGui import QTextBlockFormat, QTextCharFormat, QTextCursor

from .markdown_render import CODE_BG, code_wraps, mono_font

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_INLINE = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)")


def code_lines(text: str) -> list[bool]:
    """For each line of `text`, whether it is inside a fenced block (fence lines included);
    an unclosed fence runs to the end, as Markdown reads it."""
    flags, fence = [], ""
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if fence:
            flags.append(True)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip()[len(m.group(1)):]:
                fence = ""
        elif m and not (m.group(1)[0] == "`" and "`" in line.strip()[len(m.group(1)):]):
            fence = m.group(1)
            flags.append(True)
        else:
            flags.append(False)
    return flags


def insert_user_text(cursor: QTextCursor, text: str) -> None:
    """Insert `text` at `cursor` (which starts an empty block): its lines verbatim, fenced
    blocks as code on the tint, inline code spans in monospace."""
    plain, mono = QTextCharFormat(), QTextCharFormat()
    mono.setFont(mono_font(), QTextCharFormat.FontPropertiesInheritanceBehavior.FontPropertiesSpecifiedOnly)
    mono.setFontFixedPitch(True)
    code_block = QTextBlockFormat()
    code_block.setBackground(CODE_BG)
    code_block.setLeftMargin(6)
    code_block.setNonBreakableLines(not code_wraps())
    for i, (line, code) in enumerate(zip(text.split("\n"), code_lines(text))):
        if i:
            cursor.insertBlock(code_block if code else QTextBlockFormat(), plain)
        elif code:
            cursor.setBlockFormat(code_block)
        if code:
            cursor.insertText(line, mono)
            continue
        pos = 0
        for m in _INLINE.finditer(line):
            cursor.insertText(line[pos:m.start()], plain)
            cursor.insertText(m.group(0), mono)
            pos = m.end()
        cursor.insertText(line[pos:], plain)
