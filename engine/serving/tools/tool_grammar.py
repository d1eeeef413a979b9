"""The GBNF grammar that makes a model call a tool (`tool_choice` "required" or a named function).

Each offered function becomes one alternative `{"name": "<fn>", "arguments": <its
parameters schema>}`, compiled by llama.cpp's own JSON-schema converter with every keyword
enforced or refused (`schema_grammar.CheckedConverter`), so the arguments always satisfy the schema.
The calls are wrapped in the form the model writes them (`tool_prompt.call_format`), so
`tool_calls.parse` reads the constrained answer exactly as it reads a free one.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from ...errors import TandemError


def _function(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    fn = tool.get("function") if isinstance(tool, Mapping) else None
    if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
        raise TandemError("each tool needs a function with a name")
    return fn


def _call_schema(fn: Mapping[str, Any]) -> dict[str, Any]:
    params = fn.get("parameters") or {"type": "object", "properties": {}}
    return {"type": "object", "properties": {"name": {"const": fn["name"]}, "arguments": params},
            "required": ["name", "arguments"], "additionalProperties": False}


def tool_call_grammar(tools: Sequence[Mapping[str, Any]], *, name: str | None = None, call_format: str = "hermes",
                      parallel: bool = True) -> str:
    """GBNF (root rule `root`) for one tool call (or several, `parallel`) of the offered
    functions, or only of `name`. `call_format`: 'hermes' wraps each call in
    `<tool_call>` tags; 'json' writes bare call objects (one per line)."""
    from ...llamacpp.schema_grammar import CheckedConverter, SchemaUnsupported, check_finishes  # loads libllama

    fns = [_function(t) for t in tools]
    if name is not None:
        fns = [f for f in fns if f["name"] == name]
        if not fns:
            raise TandemError(f"tool_choice names {name!r}, which is not among the tools")
        parallel = False
    if not fns:
        raise TandemError("no tools to call")
    schemas = [_call_schema(f) for f in fns]
    schema: dict[str, Any] = schemas[0] if len(schemas) == 1 else {"oneOf": schemas}
    conv = CheckedConverter(prop_order={"name": 0, "arguments": 1}, allow_fetch=False, dotall=False, raw_pattern=False)
    try:
        schema = conv.resolve_refs(json.loads(json.dumps(schema)), "tools")
        call = conv.visit(schema, "call")
        one = f'"<tool_call>\\n" {call} "\\n</tool_call>"' if call_format == "hermes" else call
        conv._add_rule("root", f'{one} ("\\n" {one})*' if parallel else one)
        check_finishes(conv)
    except SchemaUnsupported as e:
        raise TandemError(f"a tool's parameters schema: {e}") from None
    except Exception as e:  # a schema the converter cannot express: the client's to fix
        raise TandemError(f"a tool's parameters schema cannot be turned into a grammar: {type(e).__name__}: {e}") from None
    return conv.format_grammar()
