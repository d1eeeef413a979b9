"""JSON schema -> GBNF where every keyword is enforced or refused, so a constrained answer
always matches its schema.

llama-cpp-python's converter (`llama_cpp.llama_grammar.SchemaConverter`) silently skips
what it cannot express (`{"type": "integer", "minimum": 5, "maximum": 1}` gave
-1234567891111111). `CheckedConverter` visits the schema as that converter does and, at
each node, refuses (`SchemaUnsupported`, naming the keyword) every validation keyword the
branch taken would skip, and contradictions (minimum above maximum, minLength above
maxLength, a required property that is not among the properties). It adds what
llama.cpp's C++ converter expresses and the Python one lacks: integer ranges
(`minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`). Keywords that cannot narrow
the value written are let through: annotations, unknown keywords, and keywords of other
types (`maxLength` on an integer). A `$ref` to the whole schema (`#`) or at the root is
rewritten so the converter can follow it; recursion that never ends (no finite value) is
refused with a message that says so.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from llama_cpp.llama_grammar import PRIMITIVE_RULES, RESERVED_NAMES, STRING_FORMAT_RULES, SchemaConverter

from ..errors import TandemError
from .gbnf_check import finishing_rules
from .int_range import MAX_DIGITS, int_range_rule

STRING_KW = {"minLength", "maxLength", "pattern", "format", "contentEncoding", "contentMediaType", "contentSchema"}
NUMBER_KW = {"multipleOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
ARRAY_KW = {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains",
            "minContains", "maxContains", "unevaluatedItems"}
OBJECT_KW = {"properties", "required", "additionalProperties", "patternProperties", "propertyNames", "minProperties",
             "maxProperties", "dependentRequired", "dependentSchemas", "dependencies", "unevaluatedProperties"}
GENERAL_KW = {"type", "enum", "const", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "$dynamicRef",
              "$recursiveRef"}
VALIDATION = STRING_KW | NUMBER_KW | ARRAY_KW | OBJECT_KW | GENERAL_KW
OWN_KW = {"string": STRING_KW, "number": NUMBER_KW, "integer": NUMBER_KW, "array": ARRAY_KW, "object": OBJECT_KW}
INT_BOUNDS = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
ROOT_DEF = "tandem-root"


class SchemaUnsupported(TandemError):
    """A schema keyword the grammar cannot enforce, or a schema no value can match."""


def _show(schema: Any) -> str:
    text = json.dumps(schema, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."


def _refuse(keyword: str, schema: Any, why: str = "the grammar cannot enforce it; remove it or "
                                                 "express it another way (enum, pattern)") -> SchemaUnsupported:
    return SchemaUnsupported(f"'{keyword}' in {_show(schema)}: {why}")


def _count(schema: dict, key: str) -> int | None:
    v = schema.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise _refuse(key, schema, "must be a non-negative integer")
    return v


def _order(schema: dict, low_key: str, high_key: str) -> None:
    low, high = _count(schema, low_key), _count(schema, high_key)
    if low is not None and high is not None and low > high:
        raise _refuse(low_key, schema, f"{low_key} {low} is above {high_key} {high}: no value matches")


def int_bounds(schema: dict) -> tuple[int | None, int | None]:
    """The integer range a schema's bounds allow (fractions rounded inwards, the tighter of
    an inclusive and an exclusive bound; draft-04 boolean exclusives read too)."""
    low = high = None
    for key in INT_BOUNDS:
        if key not in schema:
            continue
        v = schema[key]
        if isinstance(v, bool) and key.startswith("exclusive"):
            continue  # draft 04: a flag on minimum/maximum, read below
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise _refuse(key, schema, "must be a finite number")
        if abs(v) >= 10 ** (MAX_DIGITS + 1):
            raise _refuse(key, schema, f"bounds of more than {MAX_DIGITS + 1} digits are not supported")
        old_exclusive = schema.get("exclusive" + key[0].upper() + key[1:]) is True
        if key in ("minimum", "exclusiveMinimum"):
            b = math.floor(v) + 1 if key == "exclusiveMinimum" or old_exclusive else math.ceil(v)
            low = b if low is None else max(low, b)
        else:
            b = math.ceil(v) - 1 if key == "exclusiveMaximum" or old_exclusive else math.floor(v)
            high = b if high is None else min(high, b)
    if low is not None and high is not None and low > high:
        raise _refuse("minimum", schema, f"no integer is between the minimum and the maximum ({low} > {high})")
    return low, high


def _branch(schema: dict) -> tuple[set[str], str | None]:
    """(the keywords the converter reads at this node, the JSON type it writes or None), by
    the same tests in the same order as `SchemaConverter.visit`."""
    t = schema.get("type")
    if "$ref" in schema:
        return {"$ref"}, None
    if "oneOf" in schema or "anyOf" in schema:
        return {"oneOf" if schema.get("oneOf") else "anyOf"}, None
    if "const" in schema:
        return {"const", "type"}, None
    if "enum" in schema:
        return {"enum", "type"}, None
    if t in (None, "object") and ("properties" in schema or schema.get("additionalProperties", True) is not True):
        return {"type", "properties", "required", "additionalProperties"}, "object"
    if t in (None, "object") and "allOf" in schema:
        return {"type", "allOf"}, "object"
    if t in (None, "array") and ("items" in schema or "prefixItems" in schema):
        items = schema.get("items") or schema.get("prefixItems")
        if isinstance(items, list):
            return {"type", "items" if schema.get("items") else "prefixItems", "minItems", "maxItems"} | \
                ({"items"} if schema.get("items") is False else set()), "array"
        return {"type", "items", "minItems", "maxItems"}, "array"
    fmt = schema.get("format")
    if t in (None, "string") and "pattern" in schema:
        return {"type", "pattern"}, "string"
    if t in (None, "string") and isinstance(fmt, str) and (re.match(r"^uuid[1-5]?$", fmt) or f"{fmt}-string" in STRING_FORMAT_RULES):
        return {"type", "format"}, "string"
    if t == "string" and ("minLength" in schema or "maxLength" in schema):
        return {"type", "minLength", "maxLength"}, "string"
    if t == "integer":
        return {"type", *INT_BOUNDS}, "integer"
    return {"type"}, t if isinstance(t, str) else None


def check_node(schema: dict) -> None:
    """Refuse a keyword this node's branch would skip, or a contradiction, naming it."""
    read, kind = _branch(schema)
    ignorable = _foreign(kind) if kind else set()
    if kind is not None and kind != "string":
        ignorable |= {"format"}  # "int32", "double": a hint on numbers, nothing to enforce
    if schema.get("uniqueItems") is False:
        ignorable.add("uniqueItems")
    for key in schema:
        if key in VALIDATION and key not in read and key not in ignorable:
            if key == "format":
                raise _refuse("format", schema, f"the format {schema[key]!r} cannot be enforced by the grammar "
                                                "(date, time, date-time and uuid can); remove it or give a pattern")
            raise _refuse(key, schema)
    _order(schema, "minLength", "maxLength")
    _order(schema, "minItems", "maxItems")
    if kind == "integer":
        int_bounds(schema)
    if "enum" in read and (not isinstance(schema["enum"], list) or not schema["enum"]):
        raise _refuse("enum", schema, "must be a non-empty list: no value matches an empty one")
    if kind == "object" and "properties" in read:
        missing = [r for r in schema.get("required", ()) if r not in (schema.get("properties") or {})]
        if missing:
            raise _refuse("required", schema, f"{missing[0]!r} is required but not among the properties")
    if kind == "array" and "minItems" in read:
        items = schema.get("items") or schema.get("prefixItems")
        if isinstance(items, list):
            n, low, high = len(items), _count(schema, "minItems"), _count(schema, "maxItems")
            if (low is not None and n < low) or (high is not None and n > high):
                raise _refuse("minItems" if low is not None and n < low else "maxItems", schema,
                              f"a tuple of {n} items cannot have that many")
        elif schema.get("items") is not None and schema.get("prefixItems") is not None:
            raise _refuse("prefixItems", schema, "with 'items' as well, the grammar would follow 'items' alone")


class CheckedConverter(SchemaConverter):
    """`SchemaConverter` that checks each node before converting it (`check_node`) and writes
    integer ranges; an unconstrained node (no validation keyword) is any JSON value."""

    def visit(self, schema: Any, name: str) -> str:
        if schema is True:
            schema = {}
        if not isinstance(schema, dict):
            raise SchemaUnsupported(f"{_show(schema)} is not a schema (an object, or true)" if schema is not False
                                    else "a 'false' schema matches no value")
        if isinstance(schema.get("type"), list):  # each type with its own keywords, as JSON Schema reads it
            types = schema["type"]
            if not types:
                raise _refuse("type", schema, "an empty list of types matches no value")
            rest = {k: v for k, v in schema.items() if k != "type"}
            alts = [{**{k: v for k, v in rest.items() if k not in VALIDATION or k not in _foreign(t)}, "type": t}
                    for t in types]
            return super().visit({"anyOf": alts}, name)
        if "items" in schema and schema["items"] in ({}, False) and "prefixItems" not in schema:
            # the converter reads {} as "no items given" (a crash); false: no items at all
            schema = {**schema, "items": True} if schema["items"] == {} else {**schema, "items": True, "maxItems": 0}
        if schema.get("type") == "array" and "items" not in schema and "prefixItems" not in schema and \
                ("minItems" in schema or "maxItems" in schema):
            schema = {**schema, "items": True}  # the converter would skip the counts without items
        check_node(schema)
        rule_name = name + "-" if name in RESERVED_NAMES else name or "root"
        if not (set(schema) & VALIDATION):
            return self._add_rule(rule_name, self._add_primitive("value", PRIMITIVE_RULES["value"]))
        if schema.get("type") == "integer" and set(schema) & set(INT_BOUNDS) and "$ref" not in schema:
            low, high = int_bounds(schema)
            if low is not None or high is not None:
                return self._add_rule(rule_name, f"({int_range_rule(low, high)}) space")
        if "allOf" in schema and "properties" not in schema:
            self._check_all_of(schema)
        return super().visit(schema, name)

    def _check_all_of(self, schema: dict) -> None:
        """The converter merges allOf parts' properties (all required) and reads nothing else of them."""
        parts = schema["allOf"]
        if not isinstance(parts, list) or not parts:
            raise _refuse("allOf", schema, "must be a non-empty list of schemas")
        for part in parts:
            target = self._refs.get(part.get("$ref"), part) if isinstance(part, dict) else part
            if not isinstance(target, dict) or set(target) & VALIDATION - {"type", "properties", "required",
                                                                           "additionalProperties"} \
                    or target.get("type", "object") != "object":
                raise _refuse("allOf", schema, "only parts that are objects with properties can be combined")


def _foreign(t: Any) -> set[str]:
    """The keywords of types other than `t` (they say nothing about a value of type t)."""
    return set().union(*(kw for other, kw in OWN_KW.items() if other != t and not {other, t} <= {"number", "integer"}))


def prepare(schema: dict) -> dict:
    """A copy the converter can follow: a `$ref` to `#` (the whole schema) points at a copy of
    the root under $defs, and a root `$ref` beside $defs becomes a one-way anyOf (the
    converter reads no siblings of a root $ref, so refs inside $defs went unresolved)."""
    schema = json.loads(json.dumps(schema))
    if not isinstance(schema, dict):
        return schema

    def refs_to_root(node: Any) -> bool:
        if isinstance(node, dict):
            return node.get("$ref") == "#" or any(refs_to_root(v) for v in node.values())
        return isinstance(node, list) and any(refs_to_root(v) for v in node)

    def repoint(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("$ref") == "#":
                node["$ref"] = f"#/$defs/{ROOT_DEF}"
            for v in node.values():
                repoint(v)
        elif isinstance(node, list):
            for v in node:
                repoint(v)

    if refs_to_root(schema):
        body = {k: v for k, v in schema.items() if k not in ("$defs", "definitions")}
        schema = {**{k: v for k, v in schema.items() if k in ("$defs", "definitions")}}
        schema["$defs"] = {**schema.get("$defs", {}), ROOT_DEF: body}
        repoint(schema)
        schema["anyOf"] = [{"$ref": f"#/$defs/{ROOT_DEF}"}]
    elif "$ref" in schema and len(schema) > 1:
        schema["anyOf"] = [{"$ref": schema.pop("$ref")}]
    return schema


def check_finishes(conv: SchemaConverter, root: str = "root") -> None:
    """Refuse a grammar whose root derives no finite text: recursion without end."""
    rules = dict(conv._rules)
    done = finishing_rules(rules)
    if root in done:
        return
    stuck = sorted(n for n in rules if n not in done and n in {r.split("/")[-1] for r in conv._refs})
    where = f" through {', '.join(repr('#' if s == ROOT_DEF else s) for s in stuck[:3])}" if stuck else ""
    raise SchemaUnsupported(f"the schema's recursion{where} never ends (each value must hold another): no finite "
                            "JSON value matches it; make the recursive property optional, or a list")


def schema_to_gbnf(schema: Any) -> str:
    """GBNF (root rule `root`) whose every text matches `schema`; SchemaUnsupported otherwise."""
    conv = CheckedConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    schema = conv.resolve_refs(prepare(schema), "input")
    conv.visit(schema, "")
    check_finishes(conv)
    return conv.format_grammar()
