"""Keep message text out of the model's control tokens.

A chat template's markup (`<|im_start|>user`, `<|im_end|>`) must become control tokens,
so the rendered prompt is tokenised with special-token parsing on. Message text must not:
a user message, a tool result or an attached file holding `<|im_end|>\\n<|im_start|>system`
would otherwise close its own turn and forge another. Templates are arbitrary Jinja, so
where a message's text lands in the rendered prompt is found by marking it, not assumed:

* `wrap`: every control-token text inside message text (contents, tool call arguments,
  tool definitions) is put between two markers made of private-use characters and a
  random number that the text cannot contain. Text without control-token text is left
  exactly as it is (so ordinary prompts render and tokenise exactly as before);
* `unwrap`: the rendered prompt without its markers, and where the marked texts were;
* `pieces`: the prompt cut at the control tokens that llama.cpp would split at anyway,
  so that the stretches holding marked text are tokenised as plain text and the rest
  as before, with the same tokens the whole prompt would get everywhere else.
"""

from __future__ import annotations

import bisect
import re
import secrets
from typing import Any, Iterable, Mapping, Sequence

Span = tuple[int, int]  # [start, end) in the prompt text
_SPACE = " \t\n\v\f\r"  # what C's isspace() strips, as llama.cpp's tokenizer does


class ContentGuard:
    """Marks one conversation's control-token texts, and finds them again after rendering."""

    def __init__(self, control_texts: Iterable[str], *, lstrip: Iterable[str] = (), rstrip: Iterable[str] = ()):
        """`lstrip`: control texts that eat the whitespace before them, `rstrip`: after them
        (llama.cpp's token attributes, set for some models); a piece cut there drops it too."""
        self.lstrip, self.rstrip = frozenset(lstrip), frozenset(rstrip)
        texts = sorted({t for t in control_texts if t}, key=len, reverse=True)  # longest first, as llama.cpp
        self.finder: re.Pattern[str] | None = re.compile("|".join(map(re.escape, texts))) if texts else None
        nonce = f"{secrets.randbits(64):020d}"
        self.open, self.close = f"\ue000{nonce}\ue001", f"\ue001{nonce}\ue000"
        self._pair = re.compile(re.escape(self.open) + "(.*?)" + re.escape(self.close), re.DOTALL)
        self.used = False  # whether any text was marked
        # how many times longer marked text can be than the text (its shortest control text, marked)
        self.growth = -(-(len(self.open) + len(self.close)) // len(texts[-1])) + 1 if texts else 1

    def wrap(self, value: Any) -> Any:
        """`value` (messages, tools: dicts, lists and strings) with its control-token texts marked."""
        if isinstance(value, str):
            if self.finder is None:
                return value
            marked, n = self.finder.subn(lambda m: self.open + m.group(0) + self.close, value)
            self.used = self.used or n > 0
            return marked
        if isinstance(value, Mapping):
            return {k: self.wrap(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.wrap(v) for v in value]
        return value

    def unwrap(self, text: str) -> tuple[str, list[Span]]:
        """The rendered text without markers, and the spans that were marked (message text)."""
        out: list[str] = []
        spans: list[Span] = []
        at = size = 0
        for m in self._pair.finditer(text):
            out.append(text[at:m.start()])
            size += m.start() - at
            inner = m.group(1)
            out.append(inner)
            spans.append((size, size + len(inner)))
            size += len(inner)
            at = m.end()
        out.append(text[at:])
        return "".join(out), spans

    def pieces(self, text: str, spans: Sequence[Span]) -> list[tuple[str, bool]]:
        """`text` as (piece, parse_special) in order. Cuts fall only where a control token of
        the markup begins or ends, where llama.cpp's tokenizer splits the text anyway; each
        stretch between two markup control tokens that holds a marked span is one piece
        read as plain text, and the rest keeps special-token parsing."""
        if not spans or self.finder is None:
            return [(text, True)]
        ends = [e for _, e in spans]  # spans are in order and apart, so their ends are sorted

        def marked(a: int, b: int) -> bool:  # [a, b) overlaps a marked span
            i = bisect.bisect_right(ends, a)
            return i < len(spans) and spans[i][0] < b

        markup = [m for m in self.finder.finditer(text) if not marked(m.start(), m.end())]
        out: list[tuple[str, bool]] = []
        run = prev_end = 0  # run: where the piece being gathered (special parsing on) starts
        before = ""  # the markup control text before the current stretch
        for start, end, after in [(m.start(), m.end(), m.group(0)) for m in markup] + [(len(text), len(text), "")]:
            if marked(prev_end, start):
                if run < prev_end:
                    out.append((text[run:prev_end], True))
                piece = text[prev_end:start]
                piece = piece.lstrip(_SPACE) if before in self.rstrip else piece
                piece = piece.rstrip(_SPACE) if after in self.lstrip else piece
                if piece:
                    out.append((piece, False))
                run = start
            prev_end, before = end, after
        if run < len(text):
            out.append((text[run:], True))
        return out


__all__ = ["ContentGuard", "Span"]
