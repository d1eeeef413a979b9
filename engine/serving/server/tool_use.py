"""Tool calling on the chat endpoint: what the model is offered, what it must do, and what
its answer holds.

`tool_choice` 'none' offers nothing and parses nothing; 'auto' (the default with tools)
offers the tools and reads calls out of the answer; 'required' and a named function also
constrain the answer with a grammar (`tool_grammar`), which the decoder applies to the
target's verification, so drafts that break it are rejected and output stays exact. A
forced call is well-formed by construction, so it streams as it is written (its header
once the name is known, then its arguments piece by piece: `forced_calls`). Under 'auto',
a lazy grammar (`tool_grammar.auto_call_grammar`) makes a call the model begins in the
common forms well-formed from its start on, so it streams as it is written too
(`auto_calls`); a call in another form goes out once it is complete and checked: its name
offered, its arguments valid for the function's schema. A request that has its own
constraint (response_format, grammar) keeps it, and its calls are read that second way.
"""

from __future__ import annotations

from typing import Any, Sequence

from ...toolcalls.auto_calls import AutoCallStream, read_auto
from ...toolcalls.forced_calls import ForcedCallStream, read_forced
from ...decoding.request import GenerationRequest
from ...toolcalls.tool_calls import ParsedAnswer, ToolCallStream, parse
from ...toolcalls.reading import CallReading
from ...errors import TandemError
from .errors import ApiError
from .schemas import ChatCompletionRequest


class ToolUse:
    """One chat request's tools: offered (or None), the grammar forcing a call (or None)."""

    def __init__(self, req: ChatCompletionRequest, template: str | None, vocab: Any = None):
        """`vocab`: the target's vocabulary (a llama.cpp Model), which the auto grammar reads
        tokens with; None: no auto grammar."""
        self.tools = req.offered_tools()
        try:  # the grammar (forced or auto) is built as the tool loop builds it: engine.toolcalls.reading
            reading = CallReading(self.tools or [], req.forced_tool if self.tools else None, template=template,
                                  vocab=vocab if self.tools else None, parallel=req.parallel_tool_calls is not False)
        except TandemError as e:
            raise ApiError(400, str(e), param="tools", code="invalid_value")
        self.offered, self.grammar, self.auto = reading.offered, reading.grammar, reading.auto

    @property
    def active(self) -> bool:
        return self.tools is not None

    def constrain(self, request: GenerationRequest) -> GenerationRequest:
        """The request with the grammar that forces a call (one constraint per answer)."""
        if self.auto is not None:
            if request.grammar is not None:  # the request's own constraint: calls read when complete
                self.auto = None
                return request
            return request.with_(grammar=self.auto.grammar, grammar_triggers=self.auto.triggers)
        if self.grammar is None:
            return request
        if request.grammar is not None:
            raise TandemError("a forced tool call (tool_choice 'required' or a named function) cannot be combined "
                              "with response_format, grammar or json_schema: give one")
        return request.with_(grammar=self.grammar)

    @property
    def forced(self) -> bool:
        return self.grammar is not None

    def answer(self, text: str, tokens: Sequence[int] = ()) -> ParsedAnswer:
        """What a whole answer holds; `tokens`: the answer's, which say where an auto grammar took over."""
        if self.forced:
            return read_forced(text)
        if self.auto is not None:
            return read_auto(text, self.auto.start(tokens), self.offered)
        return parse(text, self.offered) if self.active else ParsedAnswer(text)

    def stream(self) -> ToolCallStream | ForcedCallStream | AutoCallStream | None:
        if self.forced:
            return ForcedCallStream()
        if self.auto is not None:
            return AutoCallStream(self.offered, self.auto)
        return ToolCallStream(self.offered) if self.active else None


def grammar_vocab(target: Any) -> Any:
    """The llama.cpp model whose vocabulary an auto grammar reads: the target, or the vocabulary
    a split target (`tandem serve --rpc`) loads in this process; None when there is neither."""
    from ...llamacpp.llama import Model

    for m in (target, getattr(target, "_vocab", None)):
        if isinstance(m, Model):
            return m
    return None

