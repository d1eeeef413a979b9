"""Prompt suites for the benchmark: the tuning suites in assets/suites/ and the held-out
ones in assets/suites/heldout/ (never used to tune anything; reported apart), or a file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import TandemError
from ..resources import suites_dir

SUITES_DIR = suites_dir()


class BenchError(TandemError):
    """A benchmark that cannot run as asked (a bad suite, configuration or setting)."""


@dataclass
class BenchPrompt:
    id: str
    prompt: Any  # str, or a list of chat messages
    chat: bool = True


@dataclass
class Suite:
    name: str
    prompts: list[BenchPrompt]


HELDOUT = "heldout"  # assets/suites/heldout/: never used to tune anything; reported apart


def builtin_suites(which: str = "all") -> list[str]:
    """Tuning suites by name ("chat"), held-out ones as "heldout/chat"; which: tuning|heldout|all."""
    tuning = sorted(p.stem for p in SUITES_DIR.glob("*.jsonl"))
    heldout = sorted(f"{HELDOUT}/{p.stem}" for p in (SUITES_DIR / HELDOUT).glob("*.jsonl"))
    if which == "tuning":
        return tuning
    if which == HELDOUT:
        return heldout
    if which != "all":
        raise BenchError(f"unknown suite set {which!r}: tuning, heldout or all")
    return tuning + heldout


def suite_set(name: str) -> str:
    """'heldout' for a held-out suite, else 'tuning'."""
    return HELDOUT if name.startswith(HELDOUT + "/") else "tuning"


def load_suite(name_or_path: str) -> Suite:
    """A built-in suite by name, or a file: one prompt per line (.txt), or JSON lines with
    {"prompt": ...} or {"messages": [...]} (optional "id", "chat")."""
    p = Path(name_or_path)
    name = p.stem
    builtin = SUITES_DIR / f"{name_or_path}.jsonl"
    if builtin.exists() and not name_or_path.endswith(".jsonl"):
        p = builtin
        name = name_or_path  # "chat" or "heldout/chat"
    elif not p.exists():
        raise BenchError(f"unknown suite {name_or_path!r}: not a file, and not one of {', '.join(builtin_suites())}")
    elif p.parent.name == HELDOUT:
        name = f"{HELDOUT}/{p.stem}"
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BenchError(f"{p}: cannot read suite ({e})") from None
    prompts: list[BenchPrompt] = []
    is_json = p.suffix in (".jsonl", ".json") or text.lstrip().startswith("{")
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        if is_json:
            try:
                obj = json.loads(line)
            except ValueError as e:
                raise BenchError(f"{p}:{i + 1}: not valid JSON ({e})") from None
            if "messages" in obj:
                msgs = obj["messages"]
                if not isinstance(msgs, list) or not all(isinstance(m, dict) and "role" in m and "content" in m for m in msgs):
                    raise BenchError(f"{p}:{i + 1}: 'messages' must be a list of {{role, content}}")
                prompts.append(BenchPrompt(str(obj.get("id", f"p{i + 1}")), msgs, True))
            elif "prompt" in obj:
                prompts.append(BenchPrompt(str(obj.get("id", f"p{i + 1}")), str(obj["prompt"]), bool(obj.get("chat", True))))
            else:
                raise BenchError(f"{p}:{i + 1}: needs 'prompt' or 'messages'")
        else:
            prompts.append(BenchPrompt(f"p{i + 1}", line.strip(), True))
    if not prompts:
        raise BenchError(f"{p}: the suite has no prompts")
    return Suite(name, prompts)


def fitting_prompts(engine: Any, work: list[tuple[Suite, BenchPrompt]]) -> tuple[list[tuple[Suite, BenchPrompt]], list[dict]]:
    """The (suite, prompt) pairs whose prompt fits the engine's context, and the others as
    {suite, prompt, reason}: a model with a short context (or a small vocabulary, which makes
    more tokens of the same text) skips those prompts and measures the rest."""
    from ..errors import PromptTooLong

    keep, skipped = [], []
    for suite, prompt in work:
        try:
            n = len(engine.tokens_for(prompt.prompt, chat=prompt.chat, limit=engine.n_ctx))
            reason = (f"the prompt is {n} tokens but the context holds {engine.n_ctx}"
                      if n >= engine.n_ctx else None)
        except PromptTooLong as e:
            reason = f"the prompt is at least {e.at_least} tokens but the context holds {engine.n_ctx}"
        if reason is None:
            keep.append((suite, prompt))
        else:
            skipped.append({"suite": suite.name, "prompt": prompt.id, "reason": reason})
    if work and not keep:
        raise BenchError(f"no prompt of these suites fits the context of {engine.n_ctx} tokens "
                         f"({skipped[0]['reason']}): raise --ctx")
    return keep, skipped
