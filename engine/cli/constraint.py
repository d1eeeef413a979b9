"""`--grammar-file` and `--json-schema` of `tandem generate` / `race`: the answer constrained as
the server constrains `response_format` (a JSON schema compiled by the same checked converter,
engine/llamacpp/schema_grammar.py, or a GBNF grammar checked the same way). Read and compiled
before any model loads, so a bad grammar costs one line and no load."""

from __future__ import annotations

import argparse
import json

from .common import UsageError, read_option_file

MAX_CONSTRAINT_BYTES = 1024 * 1024  # a grammar or schema this large is a wrong file, not a constraint


def add_constraint_options(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--grammar-file", metavar="FILE", help="constrain the answer to a GBNF grammar (root rule 'root')")
    g.add_argument("--json-schema", metavar="SCHEMA",
                   help="constrain the answer to JSON matching a schema: the schema's JSON text, or @FILE")


def _read(path: str, option: str) -> str:
    data = read_option_file(path, option, MAX_CONSTRAINT_BYTES,
                            lambda size: f"{size:,} bytes; a grammar or schema is at most {MAX_CONSTRAINT_BYTES:,}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{option} {path}: not UTF-8 text") from None


def constraint_grammar(args: argparse.Namespace) -> str | None:
    """The GBNF grammar the options ask for (checked), or None for free text."""
    from ..decoding.sampling.grammar import GrammarError, check_grammar, json_schema_grammar  # lazily: llama.cpp

    grammar_file = getattr(args, "grammar_file", None)
    schema_arg = getattr(args, "json_schema", None)
    try:
        if grammar_file is not None:
            return check_grammar(_read(grammar_file, "--grammar-file"), "--grammar-file")
        if schema_arg is not None:
            text = _read(schema_arg[1:], "--json-schema") if schema_arg.startswith("@") else schema_arg
            try:
                schema = json.loads(text)
            except json.JSONDecodeError as e:
                raise UsageError(f"--json-schema: not JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
            if not isinstance(schema, dict):
                raise UsageError(f"--json-schema: a schema is a JSON object, got {type(schema).__name__}")
            return json_schema_grammar(schema)
    except GrammarError as e:  # "json_schema: ..." as the server says it; here the option's name
        msg = str(e)
        raise UsageError("--" + msg.replace("_", "-", 1) if msg.startswith("json_schema") else msg) from None
    return None
