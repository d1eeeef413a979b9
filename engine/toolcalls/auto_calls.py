"""Free tool calls (`tool_choice` "auto") that stream as they are written.

Under "auto" the request carries the lazy grammar of `tool_grammar.auto_call_grammar`: the
answer is free until a call of an offered function begins (a `<tool_call>` tag, a fenced JSON
block, or a JSON object at a line's start, naming the function), and from there the grammar
makes the call well-formed. The engine decides where the grammar took over from the accepted
tokens alone (lazy_grammar.py); the reading here follows the same tokens with the same state,
so it knows the same place, without guessing from the text:

* before it, the answer is read as any free answer (`ToolCallStream` / `parse`): text goes out
  as content as soon as it is decided, a call in another form once it is complete;
* from it, the text is a call by construction, so it is read as a forced call is
  (`ForcedCallStream` / `read_forced`): its header once the name is written, then each new
  piece of its arguments. An answer cut short in the call keeps it, its arguments unfinished.

The stream and the whole answer read the same text the same way, so they agree; and the
place is a function of the tokens, which speculation does not change (greedy output is the
target's): the same final call with a draft, with prompt lookup or with none.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..decoding.sampling.lazy_grammar import LazyGrammarState
from .forced_calls import ForcedCallStream, read_forced
from .tool_calls import OfferedTools, ParsedAnswer, ToolCall, ToolCallStream, parse


class LazyGrammar:
    """The auto grammar (its GBNF and triggers) and the vocabulary it reads tokens with."""

    def __init__(self, model: Any, grammar: str, triggers: Sequence[str]):
        self.model, self.grammar, self.triggers = model, grammar, tuple(triggers)

    def start(self, tokens: Sequence[int]) -> int | None:
        """Where (in characters of the answer) the grammar took over in an answer of these
        tokens, or None: it never did."""
        follower = Follower(self)
        try:
            for t in tokens:
                if follower.accept(t) is not None:
                    break
            return follower.at
        finally:
            follower.close()


class Follower:
    """The engine's lazy grammar state, advanced by the answer's tokens as they arrive."""

    def __init__(self, lazy: LazyGrammar):
        self.state: LazyGrammarState | None = LazyGrammarState(lazy.model, lazy.grammar, lazy.triggers)
        self.at: int | None = None

    def accept(self, token: int) -> int | None:
        if self.state is not None and self.at is None:
            self.state.accept(int(token))
            if self.state.active:  # the bytes before it are whole characters: it starts at an ASCII mark
                self.at = len(self.state.answer.decode("utf-8", errors="replace"))
                self.close()
        return self.at

    def close(self) -> None:
        if self.state is not None:
            self.state.close()
            self.state = None


def read_auto(text: str, at: int | None, offered: OfferedTools) -> ParsedAnswer:
    """A whole auto answer: free before `at`, a grammar-made call from it (see the module doc)."""
    if at is None or at > len(text):
        return parse(text, offered)
    before, calls = parse(text[:at], offered), read_forced(text[at:])
    return ParsedAnswer(before.content + calls.content, before.calls + calls.calls, cut_short=calls.cut_short)


class AutoCallStream:
    """Splits an auto answer as it streams: `feed(piece, tokens)` returns the content that can go
    out, `deltas()` the `delta.tool_calls` items (a call's header, then its argument pieces, as
    they are written once the grammar holds it); `finish()` returns what the whole answer holds."""

    def __init__(self, offered: OfferedTools, lazy: LazyGrammar):
        self.offered = offered
        self.free: ToolCallStream | None = ToolCallStream(offered)
        self.follower = Follower(lazy)
        self.text = ""
        self.calls: list[ToolCall] = []  # complete calls read before the grammar took over
        self.held: ForcedCallStream | None = None
        self._ready: list[dict[str, Any]] = []
        self.cut_short = False

    def feed(self, piece: str, tokens: Sequence[int] = ()) -> str:
        self.text += piece
        at = self.follower.at
        for t in tokens:
            if at is None:
                at = self.follower.accept(t)
        if self.held is not None:
            return self.held.feed(piece)
        assert self.free is not None
        if at is None or len(self.text) < at:  # all of this is before any call the grammar holds
            return self._free_out(self.free.feed(piece))
        # The grammar took over at `at` (known once the call's name is written, so the free
        # reading may hold text past it, undecided: a call's opening is never decided as text
        # before the call is complete). What it holds before `at` is decided as a complete
        # answer's start would be; the rest is the call.
        fed = len(self.free.text)
        out = self._free_out(self.free.feed(self.text[fed:at]) if at > fed else "")
        rest = parse(self.text[self.free.pos:at], self.offered)
        out += rest.content
        for call in rest.calls:
            self._ready += call.stream_items(len(self.calls))
            self.calls.append(call)
        self.free = None
        self.held = ForcedCallStream(first_index=len(self.calls))
        out += self.held.feed(self.text[at:])
        return out

    def _free_out(self, content: str) -> str:
        assert self.free is not None
        for item in self.free.deltas():
            self._ready.append(item)
        self.calls = list(self.free.calls)
        return content

    def deltas(self) -> list[dict[str, Any]]:
        out, self._ready = self._ready + (self.held.deltas() if self.held is not None else []), []
        return out

    def finish(self) -> tuple[str, tuple[ToolCall, ...]]:
        self.follower.close()
        if self.held is None:
            assert self.free is not None
            rest, calls = self.free.finish()
            self._free_out("")
            return rest, calls
        rest, held_calls = self.held.finish()
        self.cut_short = self.held.cut_short
        return rest, tuple(self.calls) + held_calls
