"""A/B of two llama.cpp builds on the target's verify curve (issue 24 item 4: OpenMP vs
ggml's own threadpool, -DGGML_OPENMP=OFF).

Each build lives in its own Python environment. The builds run in alternating child
processes (order flipped every round, so drift hits both alike); each child loads the
target and times one pass over n tokens with logits for every row (as verification needs)
after 400 tokens of context, `--inner` times per n, and reports its medians. The table is
the median over rounds of those medians, with min-max.

    python -m tools.openmp_ab --target T.gguf --a .venv/bin/python --b /tmp/noomp-venv/bin/python \
        --rounds 5 --out docs/results/openmp-ab/curve.json

A measurement, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = (1, 2, 4, 8, 16)


def child(target: str, inner: int, sizes: tuple[int, ...]) -> None:
    sys.path.insert(0, str(ROOT))
    import llama_cpp

    from tools.lookup_replay import measure_curve

    # which build this is: OpenMP shows in llama.cpp's system info ("OPENMP = 1")
    info = llama_cpp.llama_print_system_info().decode()
    curve = measure_curve(target, sizes=sizes, repeat=inner, context=400)
    print(json.dumps({"system_info": info, "ms": {str(n): t * 1000 for n, t in curve.items()}}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--a", help="python of build A")
    ap.add_argument("--b", help="python of build B")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--inner", type=int, default=5)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    sizes = tuple(int(s) for s in a.sizes.split(","))
    if a.child:
        child(a.target, a.inner, sizes)
        return 0
    if not (a.a and a.b):
        ap.error("--a and --b (the two builds' pythons) are needed")

    runs: dict[str, list[dict]] = {"A": [], "B": []}
    info: dict[str, str] = {}
    env = dict(os.environ, PYTHONPATH=str(ROOT))  # the children import engine and tools from this checkout
    for r in range(a.rounds):
        order = ("A", "B") if r % 2 == 0 else ("B", "A")
        for name in order:
            py = a.a if name == "A" else a.b
            p = subprocess.run([py, "-m", "tools.openmp_ab", "--child", "--target", a.target, "--inner", str(a.inner), "--sizes", a.sizes],
                               capture_output=True, text=True, env=env, cwd=ROOT)
            if p.returncode != 0:
                print(f"build {name} failed: {p.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                return 1
            res = json.loads(p.stdout.strip().splitlines()[-1])
            info[name] = res["system_info"]
            runs[name].append(res["ms"])
            print(f"round {r + 1} {name}: " + " ".join(f"n={n} {res['ms'][str(n)]:.1f}" for n in sizes), flush=True)

    def med(name, n):
        v = [run[str(n)] for run in runs[name]]
        return statistics.median(v), min(v), max(v)

    print("\n| build | " + " | ".join(f"n={n}" for n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for name, label in (("A", a.a), ("B", a.b)):
        cells = []
        for n in sizes:
            m, lo, hi = med(name, n)
            one = med(name, 1)[0]
            cells.append(f"{m:.1f} ms ({lo:.1f}-{hi:.1f})" + ("" if n == 1 else f", {m / one:.2f}x"))
        print(f"| {name} `{label}` | " + " | ".join(cells) + " |")
    print("| B / A | " + " | ".join(f"{med('B', n)[0] / med('A', n)[0]:.3f}" for n in sizes) + " |")
    for name in ("A", "B"):
        print(f"{name} system info: {info[name]}")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({"target": a.target, "a": a.a, "b": a.b, "rounds": a.rounds, "inner": a.inner,
                                     "system_info": info, "runs_ms": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
