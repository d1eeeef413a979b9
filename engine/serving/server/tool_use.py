"""Tool calling on the chat endpoint: what the model is offered, what it must do, and what
its answer holds.

`tool_choice` 'none' offers nothing and parses nothing; 'auto' (the default with tools)
offers the tools and reads calls out of the answer; 'required' and a named function also
constrain the answer with a grammar (`tool_grammar`), which the decoder applies to the
target's verification, so drafts that break it are rejected and output stays exact. A
forced call is well-formed by construction, so it streams as it is written (its header
once the name is known, then its arguments piece by piece: `forced_calls`); a free call
(in any of the forms `tool_calls` reads) goes out once it is complete and checked: its
name offered, its arguments valid for the function's schema.
"""

from __future__ import annotations

from ..tools.forced_calls import ForcedCallStream, read_forced
from ...decoding.settings import GenerationRequest
from ..tools.tool_calls import ParsedAnswer, ToolCallStream, parse
from ..tools.tool_grammar import tool_call_grammar
from ...decoding.prompting.tool_prompt import call_format
from ...errors import TandemError
from .errors import ApiError
from .schemas import ChatCompletionRequest
from ..tools.tool_args import offered_tools


class ToolUse:
    """One chat request's tools: offered (or None), the grammar forcing a call (or None)."""

    def __init__(self, req: ChatCompletionRequest, template: str | None):
        self.tools = req.offered_tools()
        self.offered = offered_tools(self.tools or [])
        self.grammar: str | None = None
        forced = req.forced_tool if self.tools else None
        if forced is None:
            return
        try:
            self.grammar = tool_call_grammar(self.tools, name=forced or None, call_format=call_format(template),
                                             parallel=req.parallel_tool_calls is not False)
        except TandemError as e:
            raise ApiError(400, str(e), param="tools", code="invalid_value")

    @property
    def active(self) -> bool:
        return self.tools is not None

    def constrain(self, request: GenerationRequest) -> GenerationRequest:
        """The request with the grammar that forces a call (one constraint per answer)."""
        if self.grammar is None:
            return request
        if request.grammar is not None:
            raise TandemError("a forced tool call (tool_choice 'required' or a named function) cannot be combined "
                              "with response_format, grammar or json_schema: give one")
        return request.with_(grammar=self.grammar)

    @property
    def forced(self) -> bool:
        return self.grammar is not None

    def answer(self, text: str) -> ParsedAnswer:
        if self.forced:
            return read_forced(text)
        return parse(text, self.offered) if self.active else ParsedAnswer(text)

    def stream(self) -> ToolCallStream | ForcedCallStream | None:
        if self.forced:
            return ForcedCallStream()
        return ToolCallStream(self.offered) if self.active else None

