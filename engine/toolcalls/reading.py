"""One answer's tool calls under a tool choice: the grammar the request needs, and the reading.

`forced` is None for "auto" (calls are free; a lazy grammar, when a vocabulary is given, makes a
call the model begins well-formed from its start: auto_calls.py), "" for "required" (the answer
is a call of one of the functions: tool_grammar.py) or a function's name (a call of that
function). The grammar goes to the verifier like any other, so a draft that breaks it is
rejected and the output stays the target's. The server's `tool_use.ToolUse` and the tool loop
both read answers through it.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..decoding.prompting.tool_prompt import call_format
from ..decoding.request import GenerationRequest
from ..errors import TandemError
from .auto_calls import LazyGrammar, read_auto
from .forced_calls import read_forced
from .tool_args import offered_tools
from .tool_calls import ParsedAnswer, parse
from .tool_grammar import auto_call_grammar, tool_call_grammar


class CallReading:
    """The tools one answer is offered and how its calls are read."""

    def __init__(self, tools: Sequence[Mapping[str, Any]], forced: str | None = None, *, template: str | None = None,
                 vocab: Any = None, parallel: bool = True):
        """`template`: the target's chat template (the form a forced call is written in);
        `vocab`: its vocabulary (a llama.cpp Model) for the auto grammar, or None for none."""
        self.tools = list(tools)
        self.offered = offered_tools(self.tools)
        self.grammar: str | None = None
        self.auto: LazyGrammar | None = None
        if forced is None:
            if self.tools and vocab is not None:
                try:
                    grammar, triggers = auto_call_grammar(self.tools, parallel=parallel)
                    self.auto = LazyGrammar(vocab, grammar, triggers)
                except TandemError:  # a schema no grammar expresses: its calls are read when complete
                    self.auto = None
        else:
            self.grammar = tool_call_grammar(self.tools, name=forced or None,
                                             call_format=call_format(template), parallel=parallel)

    @property
    def forced(self) -> bool:
        return self.grammar is not None

    def constrain(self, request: GenerationRequest) -> GenerationRequest:
        """The request with the grammar this choice needs (a forced call, or the lazy one of auto)."""
        if self.grammar is not None:
            return request.with_(grammar=self.grammar)
        if self.auto is not None:
            return request.with_(grammar=self.auto.grammar, grammar_triggers=self.auto.triggers)
        return request

    def answer(self, text: str, tokens: Sequence[int] = ()) -> ParsedAnswer:
        """What a whole answer holds; `tokens`: the answer's, which say where an auto grammar took over."""
        if self.forced:
            return read_forced(text)
        if self.auto is not None:
            return read_auto(text, self.auto.start(tokens), self.offered)
        return parse(text, self.offered)
