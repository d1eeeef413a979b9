"""The prompt cache as a user meets it in the chat, with tools/screenshots.py (`--views cache`),
the default pair as the app loads it (Auto, greedy), at 1024x700, light and dark:

1. a new chat, a report attached and asked about: read whole (its first token timed);
2. a second new chat, the same report, another question: its first token timed against the
   first, and its answer's stats line, which names the prompt tokens that came from the cache
   (cache-answer-THEME.png);
3. a third new chat, the same report and another document: the reading under way says how much
   came from the cache (cache-reading-THEME.png, taken while it reads).

The documents are the long documents suite's (the first for every chat; another for each theme's
third chat). The times printed are the answers' own first-token times, as their stats lines say.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

SIZE = (1024, 700)
ASKS = ["Which incidents does the report list? Quote them.", "Summarise the report in three sentences.",
        "What does the report say about staffing?"]


def _documents(tmp: Path) -> list[Path]:
    """The suite's documents as files, as a user attaches them."""
    from tools.attach_wall import questions

    out: dict[str, Path] = {}
    for a in questions("long_documents"):
        if a.name not in out:
            out[a.name] = tmp / a.name
            out[a.name].write_text(a.text, encoding="utf-8")
    return list(out.values())


def _first_token_s(chat: Any) -> float:
    m = re.search(r"first token ([0-9.]+) s", chat.stats_label.text())
    if m is None:
        raise SystemExit(f"no first token in the stats line: {chat.stats_label.text()!r}")
    return float(m.group(1))


def _ask(shots: Any, chat: Any, files: list[Path], question: str) -> None:
    chat.new_conversation()
    chat.apply_settings({**chat.settings(), "lookahead": "auto", "temperature": 0.0, "max_tokens": 60})
    chat.attach_files([str(f) for f in files])
    shots.wait(lambda: not chat.reading)
    chat.prompt.setPlainText(question)
    chat.send()


def cache_shots(shots: Any, win: Any, tmp: Path, themes: list[str]) -> dict[str, Any]:
    """Each theme's three chats (module docstring); the first-token times, by theme."""
    docs = _documents(tmp)
    chat = win.chat
    win.nav.setCurrentRow(0)
    ratio = win.devicePixelRatioF()
    win.resize(round(SIZE[0] / ratio), round(SIZE[1] / ratio))
    times: dict[str, Any] = {}
    for n, theme in enumerate(themes):
        win.set_theme(theme)
        mine: dict[str, Any] = {}
        if n == 0:  # the report read whole: only the first theme's first chat
            _ask(shots, chat, docs[:1], ASKS[0])
            shots.wait(lambda: chat.worker is None, timeout=600)
            mine["first chat"] = _first_token_s(chat)
        _ask(shots, chat, docs[:1], ASKS[1 + n % 2])
        shots.wait(lambda: chat.worker is None, timeout=600)
        mine["second chat, same report"] = _first_token_s(chat)
        mine["second chat's stats"] = chat.stats_label.text()
        chat.transcript.jump_to_latest()
        shots.shot(f"cache-answer-{theme}", from_screen=True)
        _ask(shots, chat, [docs[0], docs[1 + n]], ASKS[0])
        shots.wait(lambda: "from cache" in chat.prefill_label.text() and chat.prefill_label.isVisible(), timeout=120)
        shots.pump(4.5)  # the first batch read: a rate, so the share read and the time left
        mine["reading"] = chat.prefill_label.text()
        shots.shot(f"cache-reading-{theme}", from_screen=True)
        chat.stop()
        shots.wait(lambda: chat.worker is None, timeout=600)
        times[theme] = mine
        print(f"{theme}: {mine}")
    return times
