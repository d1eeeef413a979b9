"""The chat's sampling settings as the user types them, and their defaults (each default means
"off"). Qt-free, so the settings panel, presets and the tests read them the same way.

Two fields are text: the seed (empty = a random one) and the stop strings (one per line, with
escapes for a new line or a tab). Their parsers say what is wrong in one line; the panel keeps
the text as typed until it is right, so nothing typed is lost.
"""

from __future__ import annotations

import math
from typing import Any

from engine.decoding.sampling.params import SEED_MAX

# What a preset sets and Reset restores (drafting and the system prompt are not sampling).
DEFAULTS: dict[str, Any] = {
    "temperature": 0.0,  # 0 = greedy
    "top_k": 0,  # 0 = off
    "top_p": 1.0,  # 1 = off
    "min_p": 0.0,  # 0 = off
    "repeat_penalty": 1.0,  # 1 = off
    "stop": [],
    "seed": None,  # None = a random seed each answer
    "max_tokens": 512,
}
GREEDY_UNUSED = ("top_k", "top_p", "min_p", "seed")  # what temperature 0 ignores: it takes the argmax

MAX_STOPS = 16  # every stop string is checked at every token
MAX_STOP_CHARS = 200  # the answer is held back while its end might still become a stop string
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\"}


class FieldError(ValueError):
    """A typed seed or stop-string list that cannot be used; the message is the one line shown."""


def parse_seed(text: str) -> int | None:
    """The seed typed: None when empty (a random one), else a whole number 0..SEED_MAX."""
    t = text.strip()
    if not t:
        return None
    if t == "-1":
        raise FieldError("Seed -1: leave the seed empty for a random one")
    if not t.isdigit() or not t.isascii():
        raise FieldError(f"Seed “{t[:20]}” is not a whole number: use 0 to {SEED_MAX}, "
                         "or leave it empty for a random one")
    value = int(t)
    if value > SEED_MAX:
        shown = t if len(t) <= 24 else t[:24] + "…"
        raise FieldError(f"Seed {shown} is too large: the largest is {SEED_MAX}")
    return value


def parse_stop(text: str) -> list[str]:
    """The stop strings typed, one per line (empty lines skipped); `\\n` is a new line, `\\t` a
    tab and `\\\\` a backslash."""
    stops: list[str] = []
    for n, line in enumerate(text.split("\n"), 1):
        if not line:
            continue
        if not line.strip():
            raise FieldError(f"Stop strings, line {n}: only spaces would end every answer at its first space")
        stop = _unescape(line, n)
        if len(stop) > MAX_STOP_CHARS:
            raise FieldError(f"Stop strings, line {n}: {len(stop)} characters; at most {MAX_STOP_CHARS}")
        stops.append(stop)
    if len(stops) > MAX_STOPS:
        raise FieldError(f"Stop strings: {len(stops)} given; at most {MAX_STOPS}, one per line")
    return stops


def _unescape(line: str, n: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            nxt = line[i + 1:i + 2]
            if nxt not in _ESCAPES:
                shown = "\\" + nxt if nxt else "a \\ at the end"
                raise FieldError(f"Stop strings, line {n}: {shown} is not an escape "
                                 "(\\n new line, \\t tab, \\\\ backslash)")
            out.append(_ESCAPES[nxt])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def stop_text(stops: list[str]) -> str:
    """The stop strings as the box shows them: `parse_stop(stop_text(s)) == s`."""
    return "\n".join(s.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t") for s in stops)


def number(s: dict[str, Any], key: str, kind: type = float) -> Any:
    """`s[key]` as `kind`, or its default when it is missing or not a number (a hand-edited or
    imported settings dict must not stop a chat from opening)."""
    value = s.get(key, DEFAULTS[key])
    try:
        if isinstance(value, bool):
            raise TypeError
        out = kind(value)
        if isinstance(out, float) and not math.isfinite(out):
            raise ValueError
        return out
    except (TypeError, ValueError, OverflowError):
        return DEFAULTS[key]
