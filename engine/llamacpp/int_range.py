"""GBNF for the integers in a range: llama.cpp's `build_min_max_int` (common/json-schema-to-grammar.cpp),
ported, so a JSON schema's `minimum`/`maximum` on an integer is enforced by the grammar
(llama-cpp-python's Python converter ignores them). Bounds are inclusive; None: unbounded.
"""

from __future__ import annotations

MAX_DIGITS = 15  # digits after the first of an unbounded side (16 in all, as llama.cpp's integer rule)


def int_range_rule(low: int | None, high: int | None) -> str:
    """A GBNF expression matching exactly the JSON integers in [low, high] (no leading zeros)."""
    if low is None and high is None:
        raise ValueError("at least one of low and high must be set")
    out: list[str] = []
    _build(low, high, out)
    return "".join(out)


def _digit_range(a: str, b: str, out: list[str]) -> None:
    out.append(f"[{a}]" if a == b else f"[{a}-{b}]")


def _more_digits(low: int, high: int | None, out: list[str]) -> None:
    out.append("[0-9]")
    if low == high == 1:
        return
    out.append("{" + str(low) + ("" if high == low else "," + ("" if high is None else str(high))) + "}")


def _uniform_range(frm: str, to: str, out: list[str]) -> None:
    """Digit strings of one length from `frm` to `to`."""
    i = 0
    while i < len(frm) and i < len(to) and frm[i] == to[i]:
        i += 1
    if i > 0:
        out.append(f'"{frm[:i]}"')
    if i < len(frm) and i < len(to):
        if i > 0:
            out.append(" ")
        sub_len = len(frm) - i - 1
        if sub_len > 0:
            from_sub, to_sub = frm[i + 1:], to[i + 1:]
            zeros, nines = "0" * sub_len, "9" * sub_len
            to_reached = False
            out.append("(")
            if from_sub == zeros:
                _digit_range(frm[i], chr(ord(to[i]) - 1), out)
                out.append(" ")
                _more_digits(sub_len, sub_len, out)
            else:
                out.append(f"[{frm[i]}] (")
                _uniform_range(from_sub, nines, out)
                out.append(")")
                if ord(frm[i]) < ord(to[i]) - 1:
                    out.append(" | ")
                    if to_sub == nines:
                        _digit_range(chr(ord(frm[i]) + 1), to[i], out)
                        to_reached = True
                    else:
                        _digit_range(chr(ord(frm[i]) + 1), chr(ord(to[i]) - 1), out)
                    out.append(" ")
                    _more_digits(sub_len, sub_len, out)
            if not to_reached:
                out.append(" | ")
                _digit_range(to[i], to[i], out)
                out.append(" ")
                _uniform_range(zeros, to_sub, out)
            out.append(")")
        else:
            out.append(f"[{frm[i]}-{to[i]}]")


def _build(low: int | None, high: int | None, out: list[str]) -> None:
    """Both bounds: each digit count's uniform range (llama.cpp's way); one bound: the same
    digit count from the bound on, then every longer number (up to MAX_DIGITS + 1 digits,
    the converter's own limit). llama.cpp recurses on the bound's tail as a number instead,
    which loses its leading zeros: its rule for minimum 101 also matches 11."""
    if low is not None and high is not None:
        if low < 0 and high < 0:
            out.append('"-" (')
            _build(-high, -low, out)
            out.append(")")
            return
        if low < 0:
            out.append('"-" (')
            _build(1, -low, out)
            out.append(") | ")
            low = 0
        min_s, max_s = str(low), str(high)
        for digits in range(len(min_s), len(max_s)):
            _uniform_range(min_s, "9" * digits, out)
            min_s = "1" + "0" * digits
            out.append(" | ")
        _uniform_range(min_s, max_s, out)
        return
    if low is not None and low < 0:  # -|low|..-1, then 0 and every positive number
        out.append('"-" (')
        _build(1, -low, out)
        out.append(") | ")
        _at_least(0, out)
    elif low is not None:
        _at_least(low, out)
    elif high is not None and high >= 0:  # every negative number, then 0..high
        out.append('"-" [1-9] ')
        _more_digits(0, MAX_DIGITS, out)
        out.append(" | ")
        _build(0, high, out)
    elif high is not None:
        out.append('"-" (')
        _at_least(-high, out)
        out.append(")")


def _at_least(low: int, out: list[str]) -> None:
    """The integers >= low >= 0."""
    if low == 0:
        out.append("[0] | [1-9] ")
        _more_digits(0, MAX_DIGITS, out)
        return
    s = str(low)
    _uniform_range(s, "9" * len(s), out)
    if len(s) <= MAX_DIGITS:
        out.append(" | [1-9] ")
        _more_digits(len(s), MAX_DIGITS, out)
