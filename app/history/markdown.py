"""A stored message as Markdown for the history's own export (`History.to_markdown`, with the
app's chrome: who wrote it, why it stopped, its speed), and the rules every export shares:
why an answer ended early, a code fence an answer left open closed, the tool calls an answer
made, and the sources a Library answer cites listed under it as its references."""

from __future__ import annotations

import json
import re
from typing import Any

from .pictures import image_refs

Message = Any  # store.Message (store.py imports this module, not the other way round)


def stop_reason(m: Message) -> str | None:
    """Why an answer ended early, in the words its badge and its export use (None: it ended
    by itself). Stopping wins over the token limit: the user's act is what they remember."""
    if m.role != "assistant":
        return None
    if m.status in ("stopped", "cancelled"):
        return "stopped: the app was closed" if (m.stats or {}).get("stopped_by") == "close" else "stopped by you"
    if m.status == "failed":
        return "failed"
    if m.status == "generating":
        return "interrupted"
    if (m.stats or {}).get("finish_reason") == "length":
        return "stopped: max tokens"
    return None


def close_open_fence(text: str) -> str:
    """`text` with a code fence left open (an answer cut mid-block) closed, so that what
    follows it in an export is not swallowed into the code block (CommonMark fences:
    ``` or ~~~, three or more, indented at most three spaces; the closer must be at least
    as long as the opener and of the same character)."""
    opener: str | None = None
    for line in text.split("\n"):
        stripped = line.lstrip(" ")
        if len(line) - len(stripped) > 3:
            continue
        run = len(stripped) - len(stripped.lstrip(stripped[:1])) if stripped[:1] in ("`", "~") else 0
        if run < 3:
            continue
        fence = stripped[:run]
        if opener is None:
            if fence[0] == "`" and "`" in stripped[run:]:
                continue  # not a fence: a backtick fence's info string has no backtick
            opener = fence
        elif fence[0] == opener[0] and run >= len(opener) and not stripped[run:].strip():
            opener = None
    if opener is None:
        return text
    return text + ("" if text.endswith("\n") else "\n") + opener


def answer_sources(m: Message) -> list[dict]:
    """The Library sources an answer was given, numbered as it cites them ([] for any other
    message): kept in its stats under "sources" (app/views/chat/library_ask.py)."""
    if m.role != "assistant" or not isinstance(m.stats, dict):
        return []
    sources = m.stats.get("sources")
    return [s for s in sources if isinstance(s, dict) and "file" in s] if isinstance(sources, list) else []


def source_place(s: dict) -> str:
    """Where a source is: "briefs/aurora.docx, page 2" or "notes.md, section Budget"."""
    where = f"page {s['page']}" if "page" in s else str(s.get("section", ""))
    return f"{s['file']}, {where}" if where else str(s["file"])


def references_markdown(m: Message) -> list[str]:
    """An answer's references as Markdown lines ("**Sources**", then "[1] file, page 2"); none
    when it had no Library sources."""
    sources = answer_sources(m)
    if not sources:
        return []
    return ["", "**Sources**", ""] + [f"- [{s.get('n', i + 1)}] {source_place(s)}" for i, s in enumerate(sources)]


def call_state(call: dict[str, Any]) -> str:
    """"denied" (not run), "error" (it failed or timed out) or "" (it answered)."""
    return "denied" if not call.get("allowed", True) else "error" if call.get("error") else ""


def calls_markdown(calls: list[dict[str, Any]]) -> list[str]:
    """Each tool call as Markdown lines: server, tool, time and state, the arguments as JSON,
    the result in a fence longer than any backtick run it holds."""
    out: list[str] = []
    for c in calls:
        state = call_state(c)
        head = f"**Tool call:** {c.get('server') or '?'} › `{c.get('tool', '?')}`"
        head += f" · {float(c.get('seconds') or 0):.2f} s" if state != "denied" else ""
        head += f" · **{'denied, not run' if state == 'denied' else 'error'}**" if state else ""
        args = json.dumps(c.get("arguments"), ensure_ascii=False)
        result = str(c.get("result", ""))
        fence = "`" * max(3, 1 + max((len(r) for r in re.findall(r"`+", result)), default=0))
        out += [head, "", f"Arguments: `{args}`" if "`" not in args else f"Arguments: {args}", "",
                f"{fence}text", result, fence, ""]
    return out


def pictures_markdown(m: Message) -> list[str]:
    """A line per picture a question was sent with, naming it and its sha256 (the digest that
    finds its bytes in a JSON export); not the picture itself as a data: URI, which would put
    megabytes of base64 into a report meant to be read, pasted and printed."""
    if m.role != "user":
        return []
    return [f"*Picture: {name} (sha256 {sha})*" for sha, name in image_refs(m.spans)]


def message_markdown(m: Message) -> str:
    who = {"user": "You", "assistant": "Assistant", "system": "System"}.get(m.role, m.role)
    pictures = pictures_markdown(m)
    lines = [f"## {who}", "", *([*pictures, ""] if pictures else []), *calls_markdown(m.tool_calls),
             close_open_fence(m.content), *references_markdown(m)]
    reason = stop_reason(m) or (m.status if m.status != "complete" else None)
    if reason:
        lines += ["", f"*({reason})*"]
    if m.role == "assistant" and m.stats and "generated_tokens" in m.stats:  # not only tool calls
        s = m.stats
        parts = [f"{s.get('generated_tokens', 0)} tokens", f"{s.get('decode_tokens_per_s', 0):.1f} tok/s",
                 f"first token {s.get('time_to_first_token_s', 0):.2f} s"]
        if s.get("drafted"):  # an acceptance rate of nothing drafted is no figure
            parts += [f"acceptance {s.get('acceptance_rate', 0):.0%}", f"{s.get('mean_tokens_per_step', 0):.2f} tokens/step"]
        lines += ["", f"<sub>{' · '.join(parts)}</sub>"]
    return "\n".join(lines)
