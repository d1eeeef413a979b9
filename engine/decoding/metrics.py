"""The metrics log: one JSON line per generation (CLI, API, GUI); `tandem stats` sums it up.

Speedups here compare averages of runs with and without a draft for the same target and
task; they are only as fair as the runs that were logged (the benchmark is the fair one).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from .. import paths
from .events import json_safe


def append_metrics(path: str | os.PathLike[str], record: dict[str, Any]) -> None:
    """Append one JSON line to a metrics log (creating folders); never raises on disk errors.

    The line is strict JSON (no NaN/Infinity, valid UTF-8) so every reader can parse it."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        rec = json_safe({"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **record})
        line = json.dumps(rec, ensure_ascii=False, allow_nan=False)
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


@dataclass
class Log:
    records: list[dict]
    skipped: int  # lines that were not a JSON object with stats: torn, undecodable, NaN, foreign


def read_log(path: str | Path | None = None) -> Log:
    """Every readable record, and how many lines were skipped.

    The log is appended by several processes and may be cut off by a crash or edited by
    hand: a line that is not valid UTF-8 or not strict JSON (NaN/Infinity included) is
    skipped and counted, never fatal."""
    p = Path(path) if path else paths.metrics_log()
    try:
        raw = p.read_bytes()
    except OSError:
        return Log([], 0)
    out: list[dict] = []
    skipped = 0
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line.decode("utf-8"), parse_constant=_reject_constant)
        except (UnicodeDecodeError, ValueError, RecursionError):
            skipped += 1
            continue
        if isinstance(rec, dict) and isinstance(rec.get("stats"), dict):
            out.append(json_safe(rec))  # "\\ud800" escapes are valid JSON but cannot be printed
        else:
            skipped += 1
    return Log(out, skipped)


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def read(path: str | Path | None = None) -> list[dict]:
    return read_log(path).records


def _num(stats: dict, key: str) -> float:
    """A statistic as a finite number; anything else (hand-edited, foreign) counts as 0."""
    v = stats.get(key, 0)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return 0.0
    return float(v)


def summarize(records: Iterable[dict]) -> list[Group]:
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in records:
        key = (str(r.get("target")), str(r.get("draft") or "none"), str(r.get("task") or "-"))
        groups.setdefault(key, []).append(r)
    base_tps: dict[tuple[str, str], float] = {}
    result: list[Group] = []
    for (t, d, task), rs in groups.items():
        drafted = sum(_num(x["stats"], "drafted") for x in rs)
        accepted = sum(_num(x["stats"], "accepted") for x in rs)
        tps = [_num(x["stats"], "decode_tokens_per_s") for x in rs if _num(x["stats"], "generated_tokens") > 0]
        g = Group(t, d, task, len(rs), int(sum(_num(x["stats"], "generated_tokens") for x in rs)),
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
