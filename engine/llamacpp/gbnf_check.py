"""Which rules of a GBNF grammar can finish: a grammar whose root cannot derive any finite
text (a JSON schema that recurses without end: every Node must hold another Node) would
let a constrained answer run to its token limit and never match, so it is refused instead.

Understands the GBNF the JSON-schema converter writes: string literals, character
classes, rule names, groups, alternatives and the ?, *, + and {m,n} quantifiers.
"""

from __future__ import annotations

import re
from typing import Mapping, Union

# a parsed body: ("alt", [seq...]) | ("seq", [item...]) | ("ref", name) | ("term",) | ("rep", min, node)
Node = tuple
_TOKEN = re.compile(r'\s*(?:("(?:[^"\\]|\\.)*")|(\[(?:[^\]\\]|\\.)*\])|([A-Za-z0-9_-]+)|(\{\s*\d+\s*(?:,\s*\d*\s*)?\})'
                    r'|([()|?*+.]))')


def _tokens(body: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    body = body.rstrip()
    while pos < len(body):
        m = _TOKEN.match(body, pos)
        if m is None:
            raise ValueError(f"cannot read the grammar at {body[pos:pos + 20]!r}")
        kind = ("lit", "cls", "name", "count", "op")[next(i for i in range(5) if m.group(i + 1) is not None)]
        out.append((kind, m.group(m.lastindex or 0)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, body: str):
        self.toks, self.i = _tokens(body), 0

    def peek(self) -> Union[tuple[str, str], None]:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def alternatives(self) -> Node:
        alts = [self.sequence()]
        while self.peek() == ("op", "|"):
            self.i += 1
            alts.append(self.sequence())
        return ("alt", alts)

    def sequence(self) -> Node:
        items = []
        while (t := self.peek()) is not None and t not in (("op", "|"), ("op", ")")):
            items.append(self.quantified(self.atom()))
        return ("seq", items)

    def atom(self) -> Node:
        kind, text = self.toks[self.i]
        self.i += 1
        if kind == "name":
            return ("ref", text)
        if (kind, text) == ("op", "("):
            inner = self.alternatives()
            if self.peek() != ("op", ")"):
                raise ValueError("unbalanced parentheses")
            self.i += 1
            return inner
        if kind in ("lit", "cls") or (kind, text) == ("op", "."):
            return ("term",)
        raise ValueError(f"unexpected {text!r}")

    def quantified(self, node: Node) -> Node:
        while (t := self.peek()) is not None and (t[0] == "count" or t[1] in ("?", "*", "+")):
            self.i += 1
            low = 1 if t[1] == "+" else 0 if t[1] in ("?", "*") else int(t[1].strip("{}").split(",")[0])
            node = ("rep", low, node)
        return node


def _finishes(node: Node, done: set[str]) -> bool:
    kind = node[0]
    if kind == "term":
        return True
    if kind == "ref":
        return node[1] in done
    if kind == "rep":
        return node[1] == 0 or _finishes(node[2], done)
    if kind == "alt":
        return any(_finishes(n, done) for n in node[1])
    return all(_finishes(n, done) for n in node[1])  # seq


def finishing_rules(rules: Mapping[str, str]) -> set[str]:
    """The names of the rules that can derive some finite text (a fixed point over the rules)."""
    parsed = {name: _Parser(body).alternatives() for name, body in rules.items()}
    done: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, node in parsed.items():
            if name not in done and _finishes(node, done):
                done.add(name)
                changed = True
    return done
