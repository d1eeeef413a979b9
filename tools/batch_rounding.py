"""Which target passes round as one-token steps do, on this machine: for each weight layout
(llama.cpp's repacking on and off, `TANDEM_REPACK`) and flash-attention setting
(`TANDEM_FLASH_ATTN`), the logits of every row of a pass over k tokens against the same tokens
decoded one at a time, bit for bit.

    flock /tmp/cpu.lock python -m tools.batch_rounding --model FILE.gguf [--widths 2,3,4,5,6,7,8,16] --out DIR

Greedy speculation is exact only where a verify pass (k drafts + 1) and the parallel slots'
shared pass (a row per slot) give each row the logits a one-token step would: where they do not,
an answer can part from target alone's at a near-tie. llama.cpp's CPU kernels change with the
number of rows (the repacked Q4 weights switch kernels at 4 rows; docs/benchmarks.md §22), so
the widest exact pass is a property of the machine, the build and the settings; this says which.
A row's difference is the largest absolute logit difference; 0 is bit-identical.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

PROMPT = ("def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n"
          "        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\n") * 3
FOLLOW = "class Cache:\n    def __init__(self, size: int) -> None:\n        self.size = size\n        self.items = {}\n"


@contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


def largest_differences(one: Sequence[np.ndarray], rows: np.ndarray) -> list[float]:
    """Per row of a pass, the largest absolute difference from the one-token step's logits."""
    return [float(np.max(np.abs(np.asarray(rows[i], dtype=np.float32) - np.asarray(one[i], dtype=np.float32))))
            for i in range(len(rows))]


def check(model: Any, widths: Sequence[int], threads: int) -> list[dict[str, Any]]:
    """Each width's rows against one-token steps, in a context made as the process's settings say."""
    from engine.llamacpp.context import Context
    from engine.llamacpp.runtime import RuntimeParams

    prompt = model.tokenize(PROMPT)
    follow = model.tokenize(FOLLOW, add_special=False)
    need = max(widths)
    while len(follow) < need:
        follow += follow
    follow = follow[:need]
    ctx = Context(model, RuntimeParams(n_ctx=len(prompt) + need + 64, n_batch=512, n_threads=threads))
    try:
        ctx.decode(prompt, logits="none")
        base = len(prompt)
        one = [np.array(ctx.decode([t], logits="last")).reshape(-1).copy() for t in follow]
        out = []
        for k in widths:
            ctx.truncate(base)
            diffs = largest_differences(one, np.array(ctx.decode(follow[:k], logits="all")).reshape(k, -1))
            out.append({"tokens": k, "largest_difference": max(diffs), "exact": max(diffs) == 0.0})
        return out
    finally:
        ctx.close()


def widest_exact(rows: Sequence[dict[str, Any]]) -> int:
    """The widest pass such that it and every narrower one measured were exact (1: none)."""
    best = 1
    for r in sorted(rows, key=lambda r: r["tokens"]):
        if not r["exact"]:
            break
        best = r["tokens"]
    return best


def measure(path: str, widths: Sequence[int], repacks: Sequence[str], attentions: Sequence[str],
            threads: int) -> list[dict[str, Any]]:
    from engine.llamacpp.llama import Model

    results = []
    for repack in repacks:
        model = Model(path, repack=repack == "on")
        try:
            for fa in attentions:
                with _env("TANDEM_FLASH_ATTN", fa):
                    rows = check(model, widths, threads)
                results.append({"repack": repack, "flash_attn": fa, "repacked_tensors": model.repacked,
                                "widest_exact": widest_exact(rows), "rows": rows})
        finally:
            model.close()
    return results


def table(results: Sequence[dict[str, Any]]) -> str:
    widths = [r["tokens"] for r in results[0]["rows"]] if results else []
    head = "| repacking | flash attention | tensors repacked | " + " | ".join(f"{k} tokens" for k in widths) + " | widest exact pass |"
    lines = [head, "|" + "---|" * (4 + len(widths))]
    for res in results:
        cells = ["exact" if r["exact"] else f"{r['largest_difference']:.2g}" for r in res["rows"]]
        lines.append(f"| {res['repack']} | {res['flash_attn']} | {res['repacked_tensors']} | " + " | ".join(cells)
                     + f" | {res['widest_exact']} |")
    return "\n".join(lines)


def _ints(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}") from None
    if not values or min(values) < 2:
        raise argparse.ArgumentTypeError(f"widths are passes of 2 tokens or more, got {text!r}")
    return values


def _choices(allowed: Sequence[str]) -> Any:
    def parse(text: str) -> list[str]:
        values = [x.strip() for x in text.split(",") if x.strip()]
        bad = [v for v in values if v not in allowed]
        if not values or bad:
            raise argparse.ArgumentTypeError(f"expected some of {', '.join(allowed)}, got {text!r}")
        return values
    return parse


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a GGUF file (the target)")
    ap.add_argument("--widths", type=_ints, default=[2, 3, 4, 5, 6, 7, 8, 16])
    ap.add_argument("--repack", type=_choices(("on", "off")), default=["on", "off"])
    ap.add_argument("--flash-attn", type=_choices(("auto", "on", "off")), default=["auto", "off"])
    ap.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2)))
    ap.add_argument("--out", type=Path, help="a folder for rows.json and table.md")
    a = ap.parse_args(argv)
    if not Path(a.model).is_file():
        ap.error(f"--model {a.model}: no such file")
    results = measure(a.model, a.widths, a.repack, a.flash_attn, a.threads)
    text = table(results)
    print(text)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "rows.json").write_text(json.dumps({"model": Path(a.model).name, "results": results}, indent=1))
        (a.out / "table.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
