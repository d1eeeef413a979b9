"""Code completion inside real files: latency to the full fill-in-the-middle answer, speculation
against target alone.

Cases are cut from this repository's own Python files with a fixed seed: a function body is
removed, the code before it is the prefix, the code after it the suffix, and the rest of the
file's directory (other files, as an editor's ring buffer of chunks would hold) the extra
context. Tuning cases come from engine/, held-out cases from app/. Each case's prompt is built
exactly as the server's /infill builds it, then generated greedily by target alone and by each
drafting mode. Greedy speculation writes target alone's tokens except where a near-tie of
the target's top two logits flips between llama.cpp's batched and single-token passes (their
rounding differs); each such run is named with the token where it parted and counted in the
summary's `identical` column with the target's top-two margin where it parted (a parting that
is not a near-tie is counted apart: that would be a bug), and its time still counts. The comparison is the wall-clock time to the full answer.

    python -m tools.fim_bench --target T.gguf [--draft D.gguf] [--modes lookup,model]
        [--set tuning|heldout|all] [--cases 20] [--reps 3] [--max-tokens 128] [--ctx 4096] [--out RESULTS.jsonl]

The target must have FIM tokens (Qwen2.5-Coder does; SmolLM2 does not). Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from engine.decoding.prompting.fim_layout import ExtraChunk, infill_tokens
from engine.serving.server.fim import NO_FIM

ROOT = Path(__file__).resolve().parent.parent
SETS = {"tuning": "engine", "heldout": "app"}
SEED = 36
EXTRA_CHARS = 6000  # other files' text per case (llama.vscode keeps up to 16 chunks of 64 lines)


@dataclass
class Case:
    """One completion: the file, the cut-out body (the reference), and the text around it."""

    file: str
    function: str
    prefix: str
    suffix: str
    middle: str
    extra: list[ExtraChunk]


def function_bodies(source: str) -> list[tuple[str, int, int]]:
    """(name, first body line, last line) of every function whose body has two lines or more
    (lines 1-based; the docstring stays in the prefix: an editor user has written it)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            body = node.body
            if isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
                body = body[1:]
            if body and node.end_lineno and node.end_lineno - body[0].lineno >= 1:
                out.append((node.name, body[0].lineno, node.end_lineno))
    return out


def cases(which: str, n: int, seed: int = SEED) -> list[Case]:
    """`n` cases from the set's files: a random function body per case, fixed by `seed`."""
    files = sorted(p for p in (ROOT / SETS[which]).rglob("*.py") if p.stat().st_size > 500)
    rng = random.Random(seed)
    picked: list[Case] = []
    for path in rng.sample(files, len(files)):
        source = path.read_text(encoding="utf-8")
        bodies = function_bodies(source)
        if not bodies:
            continue
        name, first, last = rng.choice(bodies)
        lines = source.splitlines(keepends=True)
        neighbours = [p for p in sorted(path.parent.glob("*.py")) if p != path][:4]
        extra, budget = [], EXTRA_CHARS
        for other in neighbours:
            text = other.read_text(encoding="utf-8")[: max(0, budget)]
            budget -= len(text)
            if text:
                extra.append(ExtraChunk(text, str(other.relative_to(ROOT))))
        picked.append(Case(str(path.relative_to(ROOT)), name, "".join(lines[: first - 1]), "".join(lines[last:]),
                           "".join(lines[first - 1: last]), extra))
        if len(picked) == n:
            break
    return picked


def _ratios(base: list[float], other: list[float]) -> str:
    """Per-case speedups (target's time / this mode's): median and range."""
    r = sorted(b / o for b, o in zip(base, other) if o > 0)
    return f"x{statistics.median(r):.2f} ({r[0]:.2f}-{r[-1]:.2f})" if r else "-"


def parted_at(ref: list[int], tokens: list[int]) -> int | None:
    """The first token where `tokens` differs from target alone's `ref` (None: identical)."""
    if ref == tokens:
        return None
    return next((i for i, (a, b) in enumerate(zip(ref, tokens)) if a != b), min(len(ref), len(tokens)))


def summary(which: str, walls: dict[str, list[float]], decodes: dict[str, list[float]],
            differed: dict[str, int] | None = None, reps: int = 1, beyond: dict[str, int] | None = None) -> str:
    """One line per mode: median wall-clock to the full completion, then the per-case speedup
    against target alone in wall-clock (the headline) and in decode time beside it, and how
    many runs wrote exactly target alone's tokens."""
    lines = []
    for mode, ts in walls.items():
        if not ts:
            continue
        line = f"{which:8s} {mode:7s} {len(ts):3d} cases  median wall {statistics.median(ts) * 1000:8.1f} ms"
        if mode != "target":
            line += (f"  wall {_ratios(walls['target'], ts)} vs target"
                     f"  decode {_ratios(decodes['target'], decodes[mode])}")
            runs = len(ts) * reps
            line += f"  identical {runs - (differed or {}).get(mode, 0)}/{runs}"
            if beyond is not None:
                line += f" (partings not at a near-tie: {beyond.get(mode, 0)})"
        lines.append(line)
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from engine import Engine

    eng = Engine(args.target, n_ctx=args.ctx, metrics_log=False)
    try:
        fim = eng.target.fim_tokens()
        if fim is None:
            print(f"{args.target}: {NO_FIM}", file=sys.stderr)
            return 2
        modes = [m for m in args.modes.split(",") if m]
        if "model" in modes and not args.draft:
            print("--modes model needs --draft", file=sys.stderr)
            return 2
        sets = ["tuning", "heldout"] if args.set == "all" else [args.set]
        warm = infill_tokens(eng.target, fim, "def add(a, b):\n", "\n", [], n_ctx=eng.n_ctx, n_predict=16)
        for mode in ["target"] + modes:  # untimed: loads the draft, measures the verify costs once
            eng.generate(warm, draft_model={"target": None, "lookup": "lookup", "model": args.draft}[mode],
                         lookahead="auto" if mode != "target" else 0, max_tokens=16, temperature=0)
        out = open(args.out, "w", encoding="utf-8") if args.out else None
        for which in sets:
            walls: dict[str, list[float]] = {m: [] for m in ["target"] + modes}
            decodes: dict[str, list[float]] = {m: [] for m in walls}
            differed = {m: 0 for m in walls}
            beyond = {m: 0 for m in walls}  # partings that were not near-ties
            for case in cases(which, args.cases):
                prompt = infill_tokens(eng.target, fim, case.prefix, case.suffix, case.extra, n_ctx=eng.n_ctx,
                                       n_predict=args.max_tokens)
                ref = None
                runs: dict[str, list[tuple[float, float]]] = {m: [] for m in walls}
                for rep in range(args.reps):
                    order = ["target"] + modes
                    order = order[rep % len(order):] + order[:rep % len(order)]  # interleaved, each mode first in turn
                    for mode in order:
                        draft = {"target": None, "lookup": "lookup", "model": args.draft}[mode]
                        eng.forget_prompts()  # every run reads the whole prompt: no cached prefix
                        t0 = time.perf_counter()
                        done = eng.generate(prompt, draft_model=draft, lookahead="auto" if draft else 0,
                                            max_tokens=args.max_tokens, temperature=0, prompt_cache=False)
                        wall = time.perf_counter() - t0
                        if mode == "target" and ref is None:
                            ref = list(done.tokens)
                        parted = None if ref is None else parted_at(ref, list(done.tokens))
                        margin = within = None
                        if parted is not None:
                            div = eng.first_divergence(prompt, ref, list(done.tokens))
                            if div is not None:
                                margin, within = div.margin, div.within_noise
                            print(f"{case.file}:{case.function}: {mode} parted from target alone at token {parted}, "
                                  f"the target's top-two margin there {margin if margin is None else round(margin, 3)}: "
                                  + ("a near-tie that llama.cpp's batched and single-token passes round apart"
                                     if within else "NOT a near-tie: a bug"), file=sys.stderr)
                            differed[mode] += 1
                            beyond[mode] += 0 if within else 1
                        runs[mode].append((wall, done.stats.decode_s))
                        row = {"set": which, "file": case.file, "function": case.function, "mode": mode, "rep": rep,
                               "prompt_tokens": len(prompt), "tokens": done.stats.generated_tokens, "wall_s": wall,
                               "decode_s": done.stats.decode_s, "accepted": done.stats.accepted,
                               "drafted": done.stats.drafted, "parted_at": parted, "margin": margin,
                               "within_noise": within}
                        if out:
                            out.write(json.dumps(row) + "\n")
                for mode, rs in runs.items():
                    walls[mode].append(statistics.median(w for w, _ in rs))
                    decodes[mode].append(statistics.median(d for _, d in rs))
            print(summary(which, walls, decodes, differed, args.reps, beyond))
        if out:
            out.close()
        return 0
    finally:
        eng.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", required=True, help="a FIM model (GGUF with tokenizer.ggml.fim_* tokens)")
    p.add_argument("--draft", help="a draft model for --modes model")
    p.add_argument("--modes", default="lookup", help="drafting modes besides target alone: lookup,model")
    p.add_argument("--set", choices=["tuning", "heldout", "all"], default="all")
    p.add_argument("--cases", type=int, default=20, help="cases per set")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--ctx", type=int, default=4096)
    p.add_argument("--reps", type=int, default=1, help="interleaved repetitions per case (median per case)")
    p.add_argument("--out", help="write one JSON line per case, mode and repetition")
    args = p.parse_args(argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
