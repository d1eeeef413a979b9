"""The GBNF grammars of tool calls: the one that makes a model call a tool (`tool_choice`
"required" or a named function), and the lazy one of "auto" that makes a call the model
begins well-formed.

Each offered function becomes one alternative `{"name": "<fn>", "arguments": <its
parameters schema>}`, compiled by llama.cpp's own JSON-schema converter with every keyword
enforced or refused (`schema_grammar.CheckedConverter`), so the arguments always satisfy the schema.
The calls are wrapped in the form the model writes them (`tool_prompt.call_format`), so
`tool_calls.parse` reads the constrained answer exactly as it reads a free one.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

from ..errors import TandemError


def _function(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    fn = tool.get("function") if isinstance(tool, Mapping) else None
    if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
        raise TandemError("each tool needs a function with a name")
    return fn


def _call_schema(fn: Mapping[str, Any]) -> dict[str, Any]:
    params = fn.get("parameters") or {"type": "object", "properties": {}}
    return {"type": "object", "properties": {"name": {"const": fn["name"]}, "arguments": params},
            "required": ["name", "arguments"], "additionalProperties": False}


def _call_rule(fns: list[Mapping[str, Any]]) -> tuple[Any, str]:
    """The converter holding the rules of one call of `fns`, and the call rule's name."""
    from ..llamacpp.schema_grammar import CheckedConverter

    schemas = [_call_schema(f) for f in fns]
    schema: dict[str, Any] = schemas[0] if len(schemas) == 1 else {"oneOf": schemas}
    conv = CheckedConverter(prop_order={"name": 0, "arguments": 1}, allow_fetch=False, dotall=False, raw_pattern=False)
    schema = conv.resolve_refs(json.loads(json.dumps(schema)), "tools")
    return conv, conv.visit(schema, "call")


def _names_pattern(fns: list[Mapping[str, Any]]) -> str:
    return "(?:" + "|".join(re.escape(f["name"]) for f in fns) + ")"


# Where a free call of an offered function begins, in the forms `tool_calls` reads and the
# auto grammar writes (the first group: where the grammar takes over). The name must be
# written whole: an answer that is JSON of its own is not taken for a call.
_NAMED = r'[ \t\n]*\{[ \t\n]*"name"[ \t\n]*:[ \t\n]*"NAMES"'
AUTO_TRIGGERS = (r"(<tool_call>)" + _NAMED, r"(```(?:json)?[ \t]*\n)" + _NAMED,
                 r"(?:^|\n)[ \t]*(\{)" + _NAMED[len(r"[ \t\n]*\{"):])


def auto_call_grammar(tools: Sequence[Mapping[str, Any]], *, parallel: bool = True) -> tuple[str, tuple[str, ...]]:
    """(GBNF, trigger patterns) for `tool_choice` "auto": free text until a call of an offered
    function starts (a `<tool_call>` tag, a fenced JSON block or a JSON object at a line's
    start, naming the function), then that call well-formed in the form it began (more calls
    after it with `parallel`), then the end of the answer. The root's lead is the text of the
    token that holds the call's start before it (see lazy_grammar.py)."""
    from ..llamacpp.schema_grammar import SchemaUnsupported, check_finishes  # loads libllama

    fns = [_function(t) for t in tools]
    if not fns:
        raise TandemError("no tools to call")
    try:
        conv, call = _call_rule(fns)
        ws = r'[ \t\n]{0,16}'
        forms = (f'"<tool_call>" {ws} {call} {ws} "</tool_call>"', f'"```" "json"? ' + r'[ \t]* "\n" ' + f'{ws} {call} {ws} "```"',
                 call)
        conv._add_rule("tool-call-form", " | ".join(f"({f})" for f in forms))
        more = f' ({ws} tool-call-form)*' if parallel else ""
        conv._add_rule("root", f'[^`<{{]{{0,16}} tool-call-form{more}')
        check_finishes(conv)
    except SchemaUnsupported as e:
        raise TandemError(f"a tool's parameters schema: {e}") from None
    except TandemError:
        raise
    except Exception as e:  # a schema the converter cannot express: the client's to fix
        raise TandemError(f"a tool's parameters schema cannot be turned into a grammar: {type(e).__name__}: {e}") from None
    names = _names_pattern(fns)
    return conv.format_grammar(), tuple(t.replace("NAMES", names) for t in AUTO_TRIGGERS)


def tool_call_grammar(tools: Sequence[Mapping[str, Any]], *, name: str | None = None, call_format: str = "hermes",
                      parallel: bool = True) -> str:
    """GBNF (root rule `root`) for one tool call (or several, `parallel`) of the offered
    functions, or only of `name`. `call_format`: 'hermes' wraps each call in
    `<tool_call>` tags; 'json' writes bare call objects (one per line)."""
    from ..llamacpp.schema_grammar import SchemaUnsupported, check_finishes  # loads libllama

    fns = [_function(t) for t in tools]
    if name is not None:
        fns = [f for f in fns if f["name"] == name]
        if not fns:
            raise TandemError(f"tool_choice names {name!r}, which is not among the tools")
        parallel = False
    if not fns:
        raise TandemError("no tools to call")
    try:
        conv, call = _call_rule(fns)
        one = f'"<tool_call>\\n" {call} "\\n</tool_call>"' if call_format == "hermes" else call
        conv._add_rule("root", f'{one} ("\\n" {one})*' if parallel else one)
        check_finishes(conv)
    except SchemaUnsupported as e:
        raise TandemError(f"a tool's parameters schema: {e}") from None
    except Exception as e:  # a schema the converter cannot express: the client's to fix
        raise TandemError(f"a tool's parameters schema cannot be turned into a grammar: {type(e).__name__}: {e}") from None
    return conv.format_grammar()
