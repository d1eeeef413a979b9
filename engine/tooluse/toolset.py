"""The tools one loop offers the model, under the names it calls them by, and which may run.

Each MCP tool is offered under its own name; when two servers list the same name, both are
offered as `SERVER__TOOL`. A name a chat template cannot carry (anything but letters, digits,
`_`, `-` and `.`, or over 64 characters) is left out with a note. Nothing runs unless allowed:
`Allowance.parse("all")` or a comma list of offered names; the default allows none.
"""

from __future__ import annotations

import re
from collections import Counter as Tally
from dataclasses import dataclass
from typing import Any, Sequence

from ..errors import TandemError
from .hub import McpTool
from .results import Bounds, Counter, tool_definition, within_budget

_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}\Z")


@dataclass(frozen=True)
class Allowance:
    """Which offered tools may run: all, or these names (none by default)."""

    every: bool = False
    names: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, value: str | None) -> "Allowance":
        if value is None:
            return cls()
        value = value.strip()
        if value == "all":
            return cls(every=True)
        names = frozenset(n.strip() for n in value.split(",") if n.strip())
        if not names:
            raise TandemError("--allow-tools needs 'all' or a comma list of tool names")
        return cls(names=names)

    def allows(self, name: str) -> bool:
        return self.every or name in self.names


class ToolSet:
    """The hub's tools as the model is offered them (bounded to the context), by offered name."""

    def __init__(self, tools: Sequence[McpTool], bounds: Bounds, count: Counter):
        self.notes: list[str] = []
        twice = {n for n, k in Tally(t.name for t in tools).items() if k > 1}
        named: dict[str, McpTool] = {}
        for t in tools:
            name = f"{t.server}__{t.name}" if t.name in twice else t.name
            if not _NAME.match(name):
                self.notes.append(f"tool {name!r} of server {t.server!r} left out: a tool's name must be 1 to 64 "
                                  "letters, digits, '_', '-' or '.'")
                continue
            named[name] = t
        defs = [tool_definition(n, t.description, t.input_schema) for n, t in named.items()]
        self.definitions, left_out = within_budget(defs, bounds.definitions, count)
        for n in left_out:
            self.notes.append(f"tool {n!r} left out: the tools' definitions would take more than "
                              f"{bounds.definitions:,} tokens of the context")
        self.by_name = {n: named[n] for n in (d["function"]["name"] for d in self.definitions)}

    def check(self, allowance: Allowance) -> None:
        """Refuse an allowance naming a tool that is not offered (a typo would allow nothing)."""
        unknown = sorted(allowance.names - set(self.by_name))
        if unknown:
            offered = ", ".join(sorted(self.by_name)) or "none"
            raise TandemError(f"--allow-tools names {unknown[0]!r}, which no configured server offers "
                              f"(offered: {offered})")

    def tool(self, name: str) -> McpTool | None:
        return self.by_name.get(name)

    def listing(self) -> list[dict[str, Any]]:
        """Each offered tool: its name, server and description (for `tandem tools` and the app)."""
        return [{"name": n, "server": t.server, "tool": t.name, "description": t.description,
                 "parameters": dict(t.input_schema)} for n, t in self.by_name.items()]
