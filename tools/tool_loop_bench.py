"""The tool-loop suite: questions that need a tool, run through the MCP tool loop against the
suite's own server (tools/tool_loop_server.py, over stdio), with the accepted draft tokens
counted by source for the steps that write calls and the steps that answer from results.

    python -m tools.tool_loop_bench [--pair qwen2.5-coder-1.5b | --target T --draft D]
        [--set tuning|heldout|all] [--lookahead auto] [--max-tokens 160] [--json OUT]

Per question it checks the first call (the tool and its arguments the suite expects) and that
the answer holds what the result said; per step kind it sums generated tokens, drafted and
accepted tokens, and accepted tokens by source (RunStats.accepted_by). The suite is
tools/tool_loop_suite/{tuning,heldout}.jsonl; the held-out file is for reporting only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

SUITE = Path(__file__).with_name("tool_loop_suite")
SERVER = Path(__file__).with_name("tool_loop_server.py")


def _questions(which: str) -> list[dict[str, Any]]:
    sets = ("tuning", "heldout") if which == "all" else (which,)
    out = []
    for name in sets:
        for line in (SUITE / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                out.append({**json.loads(line), "set": name})
    return out


def _run_one(loop: Any, q: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    from engine.decoding.request import GenerationRequest
    from engine.tooluse.loop import LoopDone

    req = GenerationRequest.from_options(q["question"], draft_model=args.draft_spec, lookahead=args.lookahead,
                                         chat=True, max_tokens=args.max_tokens)
    began = time.perf_counter()
    result = next(ev.result for ev in loop.run(req) if isinstance(ev, LoopDone))
    first = result.calls[0] if result.calls else None
    kinds = ["call" if i < len(result.steps) - 1 else "answer" for i in range(len(result.steps))]
    steps = [{"kind": k, "generated": d.stats.generated_tokens, "drafted": d.stats.drafted,
              "accepted": d.stats.accepted, "seconds": d.stats.wall_s,
              "accepted_by": dict(d.stats.accepted_by) or ({d.stats.mode: d.stats.accepted} if d.stats.accepted else {})}
             for k, d in zip(kinds, result.steps)]
    return {"id": q["id"], "set": q["set"], "seconds": round(time.perf_counter() - began, 2),
            "call_right": bool(first and first.name == q["tool"] and first.arguments == q["arguments"]),
            "answer_right": _holds(result.text, q["answer_has"]),
            "calls": [(c.name, c.arguments) for c in result.calls], "text": result.text, "steps": steps}


def _holds(text: str, wanted: list[str]) -> bool:
    """Whether the answer holds each wanted piece (case aside, a number's thousands separators aside)."""
    plain = re.sub(r"(?<=\d)[,\u202f ](?=\d{3}\b)", "", text).lower()
    return all(w.lower() in plain for w in wanted)


def _table(rows: list[dict[str, Any]]) -> str:
    lines = ["| set | step kind | steps | generated | drafted | accepted | accepted by source |", "|---|---|---|---|---|---|---|"]
    for s in ("tuning", "heldout"):
        for kind in ("call", "answer"):
            steps = [st for r in rows if r["set"] == s for st in r["steps"] if st["kind"] == kind]
            if not steps:
                continue
            by: Counter[str] = Counter()
            for st in steps:
                by.update(st["accepted_by"])
            src = ", ".join(f"{k} {v}" for k, v in by.most_common() if v) or "-"
            lines.append(f"| {s} | {kind} | {len(steps)} | {sum(x['generated'] for x in steps)} | "
                         f"{sum(x['drafted'] for x in steps)} | {sum(x['accepted'] for x in steps)} | {src} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default=None)
    ap.add_argument("--target")
    ap.add_argument("--draft")
    ap.add_argument("--set", choices=("tuning", "heldout", "all"), default="all")
    ap.add_argument("--lookahead", default="auto")
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--json", help="write every row here")
    args = ap.parse_args(argv)
    args.lookahead = int(args.lookahead) if args.lookahead.isdigit() else args.lookahead
    from engine.cli.common import resolve_pair
    from engine.decoding.engine import Engine
    from engine.tooluse.config import parse_config
    from engine.tooluse.hub import McpHub
    from engine.tooluse.loop import ToolLoop
    from engine.tooluse.toolset import Allowance

    args.rpc = None
    target, args.draft_spec = resolve_pair(args)
    eng = Engine(target, n_ctx=args.ctx)
    servers = parse_config({"mcpServers": {"desk": {"command": sys.executable, "args": [str(SERVER)]}}}, "suite")
    rows = []
    with McpHub(servers) as hub:
        loop = ToolLoop(eng, hub, Allowance.parse("all"))
        for q in _questions(args.set):
            row = _run_one(loop, q, args)
            rows.append(row)
            print(f"{row['id']:16s} {row['set']:8s} call {'ok' if row['call_right'] else 'WRONG'}  answer "
                  f"{'ok' if row['answer_right'] else 'WRONG'}  {len(row['steps'])} steps  {row['seconds']:.1f} s  "
                  f"calls={row['calls']}", flush=True)
    eng.close()
    print(_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
