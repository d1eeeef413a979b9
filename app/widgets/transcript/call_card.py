"""A tool call as a card in the answer: the server and tool, the time it took, its arguments
and its result (cut to a few lines; the export and Copy keep it whole), an error or a denial
marked in red, so the reader sees what the model was told before it answered."""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtGui import QColor, QFont, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextFrameFormat, QTextLength, \
    QTextTableFormat

from ...history import call_state

CARD_BG = QColor(128, 128, 128, 30)
ERROR_BG = QColor(220, 53, 69, 38)
ERROR_FG = QColor(220, 53, 69)
BORDER = QColor(128, 128, 128, 110)
MUTED = QColor(128, 128, 128)
RESULT_LINES = 8  # a longer result shows its first lines and says how much more there is
RESULT_CHARS = 600
ARGS_CHARS = 300


def shown(text: str, lines: int, chars: int) -> str:
    """`text` cut to `lines` lines and `chars` characters, saying how much is left out."""
    head = "\n".join(text.split("\n")[:lines])[:chars]
    left = len(text) - len(head)
    return head if left <= 0 else f"{head.rstrip()}\n… {left:,} more characters"


def card_title(call: dict[str, Any]) -> str:
    """"server › tool · 0.03 s" (a denied call took no time)."""
    title = f"{call.get('server') or '?'} › {call.get('tool', '?')}"
    return title if call_state(call) == "denied" else f"{title} · {float(call.get('seconds') or 0):.2f} s"


def _mono() -> QTextCharFormat:
    fmt = QTextCharFormat()
    font = QFont("monospace")
    font.setStyleHint(QFont.StyleHint.Monospace)
    fmt.setFont(font, QTextCharFormat.FontPropertiesInheritanceBehavior.FontPropertiesSpecifiedOnly)
    fmt.setFontFamilies(["monospace"])
    return fmt


def call_card(cursor: QTextCursor, call: dict[str, Any]) -> None:
    """One card at `cursor` (which ends after it): a one-cell table holding the title line,
    the arguments and the result."""
    state = call_state(call)
    table_fmt = QTextTableFormat()
    table_fmt.setBorder(1)
    table_fmt.setBorderBrush(ERROR_FG if state else BORDER)
    table_fmt.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Solid)
    table_fmt.setCellPadding(6)
    table_fmt.setCellSpacing(0)
    table_fmt.setTopMargin(6)
    table_fmt.setBottomMargin(2)
    table_fmt.setBackground(ERROR_BG if state else CARD_BG)
    table_fmt.setWidth(QTextLength(QTextLength.Type.PercentageLength, 100))
    table = cursor.insertTable(1, 1, table_fmt)
    cell = table.cellAt(0, 0).firstCursorPosition()
    muted = QTextCharFormat()
    muted.setForeground(MUTED)
    bold = QTextCharFormat()
    bold.setFontWeight(QFont.Weight.DemiBold)
    cell.insertText("Tool call  ", muted)
    cell.insertText(card_title(call), bold)
    if state:
        badge = QTextCharFormat(bold)
        badge.setForeground(ERROR_FG)
        cell.insertText("   " + ("denied, not run" if state == "denied" else "error"), badge)
    mono = _mono()
    args = json.dumps(call.get("arguments"), ensure_ascii=False)
    cell.insertBlock(QTextBlockFormat(), muted)
    cell.insertText("arguments  ", muted)
    cell.insertText(shown(args, 1, ARGS_CHARS), mono)
    cell.insertBlock(QTextBlockFormat(), muted)
    cell.insertText("result", muted)
    result_fmt = QTextCharFormat(mono)
    if state:
        result_fmt.setForeground(ERROR_FG)
    for line in shown(str(call.get("result", "")), RESULT_LINES, RESULT_CHARS).split("\n"):
        cell.insertBlock(QTextBlockFormat(), result_fmt)
        cell.insertText(line, result_fmt)
    cursor.setPosition(table.lastPosition() + 1)


def call_cards(cursor: QTextCursor, calls: list[dict[str, Any]]) -> None:
    """Every call of an answer, in order, each a card (nothing when it made none)."""
    for call in calls:
        call_card(cursor, call)
