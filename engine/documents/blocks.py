"""How an attached file goes into a prompt: one block per file, the same for the app and the
CLI, so a conversation started in one reads the same in the other."""

from __future__ import annotations

import re


def fence_for(text: str) -> str:
    """A code fence longer than any run of backticks in `text`, so the file cannot close it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def attachment_block(name: str, text: str) -> str:
    """The block of one attached file: its name, then its text inside a fence."""
    fence = fence_for(text)
    return f"Attached file `{name}`:\n\n{fence}\n{text}\n{fence}"


def with_attachments(prompt: str, blocks: list[str]) -> str:
    """The typed prompt, then each file's block, joined by blank lines (as the app composes)."""
    return "\n\n".join(([prompt] if prompt else []) + blocks)
