"""The metrics log: one JSON line per generation (CLI, API, GUI); `tandem stats` sums it up.

Speedups here compare averages of runs with and without a draft for the same target and
task; they are only as fair as the runs that were logged (the benchmark is the fair one).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from . import paths


def append_metrics(path: str | os.PathLike[str], record: dict[str, Any]) -> None:
    """Append one JSON line to a metrics log (creating folders); never raises on disk errors."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **record}, ensure_ascii=False)
        with open(p, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    except OSError:
        pass


@dataclass
class Group:
    target: str
    draft: str
    task: str
    runs: int
    tokens: int
    acceptance: float  # accepted / drafted over all runs
    tok_s: float  # mean decode tok/s
    speedup: float | None  # vs the same target and task without a draft


def read(path: str | Path | None = None) -> list[dict]:
    p = Path(path) if path else paths.metrics_log()
    out = []
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a torn last line after a crash: skip it
        if isinstance(rec, dict) and "stats" in rec:
            out.append(rec)
    return out


def summarize(records: Iterable[dict]) -> list[Group]:
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in records:
        key = (str(r.get("target")), str(r.get("draft") or "none"), str(r.get("task") or "-"))
        groups.setdefault(key, []).append(r)
    base_tps: dict[tuple[str, str], float] = {}
    result: list[Group] = []
    for (t, d, task), rs in groups.items():
        drafted = sum(x["stats"].get("drafted", 0) for x in rs)
        accepted = sum(x["stats"].get("accepted", 0) for x in rs)
        tps = [x["stats"].get("decode_tokens_per_s", 0.0) for x in rs if x["stats"].get("generated_tokens", 0) > 0]
        g = Group(t, d, task, len(rs), sum(x["stats"].get("generated_tokens", 0) for x in rs),
                  accepted / drafted if drafted else 0.0, sum(tps) / len(tps) if tps else 0.0, None)
        if d == "none":
            base_tps[(t, task)] = g.tok_s
        result.append(g)
    for g in result:
        b = base_tps.get((g.target, g.task))
        if g.draft != "none" and b:
            g.speedup = g.tok_s / b
        elif g.draft == "none":
            g.speedup = 1.0
    return sorted(result, key=lambda g: (g.target, g.task, g.draft))


def format_table(groups: list[Group]) -> str:
    if not groups:
        return "The metrics log is empty: generate something first."
    head = ("target", "draft", "task", "runs", "tokens", "acceptance", "tok/s", "speedup")
    rows = [(g.target, g.draft, g.task, str(g.runs), str(g.tokens), f"{g.acceptance:.0%}" if g.draft != "none" else "-",
             f"{g.tok_s:.1f}", f"{g.speedup:.2f}x" if g.speedup is not None else "n/a") for g in groups]
    w = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    out = ["  ".join(h.ljust(x) for h, x in zip(head, w))]
    out += ["  ".join(c.ljust(x) for c, x in zip(r, w)) for r in rows]
    return "\n".join(out)
