"""What the model sees of MCP tools: their definitions and their results, as text, bounded.

A server decides how long its tool descriptions, schemas and results are; the context does
not grow with it. So definitions get a share of the context (`Bounds.definitions`, a quarter)
and are left out, last first, past it (a description alone is cut first), and each result gets
`Bounds.result` tokens (an eighth) and is cut beyond with a note that says so, as LM Studio
warns: the model is told the text is incomplete instead of reading a truncated answer as whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

Counter = Callable[[str], int]
DESCRIPTION_CHARS = 1024


@dataclass(frozen=True)
class ToolResult:
    """A tool's answer as text for the model; `is_error`: the tool failed (the text says how)."""

    text: str
    is_error: bool = False
    seconds: float = 0.0

    def for_model(self) -> str:
        return f"error: {self.text}" if self.is_error else self.text


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{kind} ({block.mimeType}): not shown to the model]"
    if kind == "resource":
        res = block.resource
        text = getattr(res, "text", None)
        return str(text) if text is not None else f"[binary resource {res.uri}: not shown to the model]"
    if kind == "resource_link":
        return f"[resource {block.uri}]"
    return f"[{kind or 'unknown'} content: not shown to the model]"


def result_of(raw: Any, seconds: float = 0.0) -> ToolResult:
    """The SDK's CallToolResult as text: its content blocks joined (structured content when
    there is no text), its error flag kept."""
    parts = [_block_text(b) for b in raw.content or ()]
    if not any(p.strip() for p in parts) and raw.structuredContent is not None:
        parts = [json.dumps(raw.structuredContent, ensure_ascii=False)]
    text = "\n".join(parts)
    if raw.isError and not text.strip():
        text = "the tool reported an error without a message"
    return ToolResult(text, is_error=bool(raw.isError), seconds=seconds)


@dataclass(frozen=True)
class Bounds:
    """Token budgets: all the tools' definitions together, and each result."""

    definitions: int
    result: int

    @classmethod
    def for_context(cls, n_ctx: int) -> "Bounds":
        return cls(definitions=max(256, n_ctx // 4), result=max(128, n_ctx // 8))


def cut_text(text: str, limit: int, count: Counter, what: str = "result") -> str:
    """`text` within `limit` tokens: cut at a character with a note saying how much was left out."""
    n = count(text)
    if n <= limit:
        return text
    keep = len(text)
    while keep > 0:
        keep = int(keep * min(0.95, limit / max(n, 1)))
        head = text[:keep]
        note = f"\n[... {what} cut: {len(text) - keep:,} of {len(text):,} characters left out to fit the context]"
        n = count(head + note)
        if n <= limit:
            return head + note
    return f"[{what} left out: {len(text):,} characters do not fit the context]"


def tool_definition(name: str, description: str, input_schema: Mapping[str, Any]) -> dict[str, Any]:
    """An MCP tool as an OpenAI-style function the chat template offers (under `name`)."""
    desc = description
    if len(desc) > DESCRIPTION_CHARS:
        desc = desc[:DESCRIPTION_CHARS] + f" [... description cut: {len(desc) - DESCRIPTION_CHARS:,} characters]"
    params = dict(input_schema) or {"type": "object", "properties": {}}
    return {"type": "function", "function": {"name": name, "description": desc, "parameters": params}}


def within_budget(definitions: Sequence[dict[str, Any]], budget: int, count: Counter
                  ) -> tuple[list[dict[str, Any]], list[str]]:
    """The definitions that fit `budget` tokens together, in order, and the names left out."""
    kept, left_out, used = [], [], 0
    for d in definitions:
        n = count(json.dumps(d, ensure_ascii=False))
        if used + n <= budget:
            kept.append(d)
            used += n
        else:
            left_out.append(d["function"]["name"])
    return kept, left_out
