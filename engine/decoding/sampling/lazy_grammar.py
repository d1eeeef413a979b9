"""A grammar that waits for its trigger: free text until the answer writes one of the trigger
patterns, then the grammar from there on (llama.cpp's "lazy grammar", used for tool calls
under `tool_choice: auto`: the answer is free until a call starts, then the call is
well-formed by construction).

The trigger is looked for here, in Python, not by llama.cpp's lazy sampler: llama.cpp replays
the text from the trigger into the grammar and aborts the process when that text does not
fit it. Here the replay is checked first, token by token: the grammar is started at the
token holding the trigger's first group (so it must accept that token's bytes before the
group too: the grammar's root allows a short lead), and a trigger whose text does not fit is
passed over (the answer stays free there). Whether and where the grammar starts is a function
of the accepted tokens alone, so the target alone, a draft model and prompt lookup, which all
advance clones of this state by the same accepted tokens, see the same constraint: greedy
output stays the target's, sampling stays exact (the same rules as `GrammarState` once active;
before, every token is allowed and the rows are the unconstrained ones).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ...llamacpp.grammar_sampler import TOKEN_DATA, GrammarSampler
from .grammar import GrammarError, GrammarState, _ids

if TYPE_CHECKING:  # pragma: no cover
    from ...llamacpp.llama import Model

WINDOW = 1024  # bytes searched back for a trigger that ends in the newest token (triggers are shorter)


def check_triggers(triggers: Sequence[str]) -> tuple[str, ...]:
    """The trigger patterns (Python regular expressions over the answer's UTF-8 bytes), checked."""
    out = []
    for t in triggers:
        if not isinstance(t, str) or not t:
            raise GrammarError("grammar_triggers must be non-empty regular expressions (strings)")
        try:
            re.compile(t.encode("utf-8"))
        except re.error as e:
            raise GrammarError(f"grammar trigger {t[:60]!r} is not a regular expression: {e}") from None
        out.append(t)
    return tuple(out)


class LazyGrammarState(GrammarState):
    """A `GrammarState` that allows everything until a trigger (see the module docstring).
    `start`: the byte offset in the answer where the constrained text begins (None: not yet)."""

    def __init__(self, model: "Model", text: str, triggers: Sequence[str]):  # noqa: D107 (no super: no sampler yet)
        self.model, self.text = model, text
        self.triggers = tuple(triggers)
        self._patterns = [re.compile(t.encode("utf-8")) for t in self.triggers]
        self._ids = _ids(model.n_vocab)
        self._smpl: GrammarSampler | None = None  # the grammar, once triggered
        self.answer = b""  # the answer's bytes while waiting
        self.tokens: list[int] = []
        self.ends: list[int] = []  # each token's end offset in `answer`
        self.search_from = 0
        self.start: int | None = None

    @property
    def active(self) -> bool:
        return self._smpl is not None

    def clone(self) -> "LazyGrammarState":
        c = LazyGrammarState.__new__(LazyGrammarState)
        c.__dict__.update(self.__dict__)
        c.tokens, c.ends = list(self.tokens), list(self.ends)
        c._smpl = self._smpl.clone() if self._smpl is not None else None
        return c

    def _apply(self, data: np.ndarray) -> None:
        if self._smpl is not None:
            self._smpl.apply(data)

    def accept(self, token: int) -> None:
        if self._smpl is not None:
            super().accept(token)
            return
        if self.model.is_eog(token):
            return
        self.tokens.append(token)
        self.answer += self.model.piece(token)
        self.ends.append(len(self.answer))
        if len(self.tokens) > WINDOW:  # a trigger starts within the window: older tokens are never replayed
            keep = next(i for i, end in enumerate(self.ends) if end > len(self.answer) - WINDOW)
            self.tokens, self.ends = self.tokens[keep:], self.ends[keep:]
        self._look_for_trigger()

    def _look_for_trigger(self) -> None:
        lo = max(self.search_from, len(self.answer) - WINDOW)
        found = [m for m in (p.search(self.answer, lo) for p in self._patterns) if m is not None]
        if not found:
            return
        starts = [m.start(1) if m.lastindex else m.start() for m in found]
        s = min(starts)
        k = next(i for i, end in enumerate(self.ends) if end > s)  # the token holding the trigger's start
        smpl = GrammarSampler.load(self.model, self.text)
        if smpl is None:  # pragma: no cover - the request checked it parses
            raise GrammarError("grammar: llama.cpp could not load it for this model's vocabulary")
        one = np.zeros(1, dtype=TOKEN_DATA)
        for t in self.tokens[k:]:
            one["id"], one["logit"] = t, 0.0
            smpl.apply(one)
            if not np.isfinite(one["logit"][0]):  # the text so far does not fit: not a trigger here
                smpl.close()
                self.search_from = s + 1
                return
            smpl.accept(t)
        self._smpl, self.start = smpl, s
        self.answer, self.tokens, self.ends = self.answer[:s], [], []  # what is kept: where it began
