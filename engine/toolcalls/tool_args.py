"""The functions a chat request offers, with a check of a call's arguments against each
function's `parameters` schema: a free call counts only when its arguments are valid."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from .tool_calls import OfferedTools


def offered_tools(tools: Sequence[Mapping[str, Any]]) -> OfferedTools:
    """The offered functions (OpenAI's tool dicts), each with its arguments' check."""
    checks: dict[str, Callable[[Any], bool]] = {}
    for t in tools:
        fn = t.get("function") or {}
        if isinstance(fn.get("name"), str):
            checks[fn["name"]] = schema_check(fn.get("parameters"))
    return OfferedTools(checks)


def schema_check(schema: Any) -> Callable[[Any], bool]:
    """Whether arguments are valid for `schema` (jsonschema, the schema's own draft); a schema
    jsonschema cannot read checks nothing, as none does."""
    if not isinstance(schema, Mapping) or not schema:
        return lambda args: True
    try:
        import jsonschema  # the server extra brings it
    except ImportError:  # without it: the required arguments must be there, nothing more is checked
        required = [k for k in schema.get("required") or () if isinstance(k, str)]
        return lambda args: all(k in args for k in required)
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        validator = cls(schema)
    except Exception:  # the client's schema is not one jsonschema reads
        return lambda args: True
    return lambda args: validator.is_valid(args)
