"""The words the chat puts on things: the stats line under an answer (worded as the CLI
prints it) and a new chat's title.

A new chat is titled from its question at once, not by the model: the question's first line of
words is instant and says what was asked in the asker's own words, where a model-written title
would cost a generation on the one queue the answer is waiting in (on a small machine, seconds
before the first token) and could say something the question did not. Rename changes it.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from ...widgets.controls.live_label import SEPARATOR  # the label keeps the pieces between these whole
from ...widgets.transcript.export import whole_words

TITLE_CHARS = 120  # a new chat's title at most: elided in the list, whole in an export's name
_MARKUP = re.compile(r"^\s*(?:#{1,6}\s+|>\s*|[-*+]\s+|\d+[.)]\s+)+")  # a heading's, quote's or list's marks
_FENCE = re.compile(r"^\s*(```|~~~)")


def chat_title(text: str, first_file: str = "") -> str:
    """A new chat's title: the question's first line of words outside code blocks (else its
    first line of code, else its first line), Markdown marks and runs of space dropped, cut
    between words at TITLE_CHARS; the first attached file's name when nothing was typed."""
    prose: list[str] = []
    code: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        words = " ".join(_MARKUP.sub("", line).split()) if not fenced else " ".join(line.split())
        if words:
            (code if fenced else prose).append(words)
    wordy = [w for w in prose if re.search(r"\w", w)]
    title = next(iter(wordy or code or prose), "") or first_file
    return whole_words(title, TITLE_CHARS) or "New chat"


def stats_text(s: dict[str, Any]) -> str:
    """The engine's one stats wording (engine/measure/report.py), as the CLI prints it."""
    from engine.measure.report import stats_line

    return stats_line(s, SEPARATOR, finish=False)


def last_answer_stats(messages: Sequence[Any]) -> str:
    """The stats line of the conversation's last answer, the version shown ("" when that one has
    none: failed, or no answer yet), never an earlier answer's or another version's figures."""
    last = next((m for m in reversed(messages) if m.role == "assistant"), None)
    # a failed answer's stats may hold only its tool calls: no figures to show
    return stats_text(last.stats) if last is not None and last.stats and "generated_tokens" in last.stats else ""
