"""Prompt reading against llama.cpp's own figure: Tandem's prefill tokens/s beside llama-bench's
pp figure for the same model file, prompt length, batch (= micro-batch, as Tandem sets them)
and threads, interleaved repetitions (issue #47 item 4).

    bash tools/llama_bench_build.sh .venv/bin/python     # once: llama-bench from the same sdist
    python -m tools.prefill_peer --model TARGET.gguf --tokens 512,1536 --batches 128,256,512 \\
        --threads 2 --repeat 3 --reading never,auto --repack 1,0 --out docs/results/prefill-peer

Tandem's side is an `Engine` with no prompt cache reading a real document's tokens (the long
documents suite, cut to the length) for one output token; its figure is the run's own
`prefill_tokens_per_s` (prompt tokens / reading time), once per `--reading` mode (`never`: on the
target's repacked weights; `auto`: through the plain twin where measured faster, after an untimed
read that measures it). llama-bench reads random tokens of the same count (`-p N -n 0`, after its
warm-up run) once per `--repack` setting (llama.cpp's weight repacking on, off). Medians and
ranges per setting; the ratio is Tandem's best mode / llama-bench's best setting. Run it alone
on the machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parent.parent


def llama_bench(binary: str, model: str, tokens: int, batch: int, threads: int, repack: int = 1) -> float:
    """llama-bench's prompt-processing tokens/s for one setting (one repetition)."""
    out = subprocess.run([binary, "-m", model, "-p", str(tokens), "-n", "0", "-b", str(batch), "-ub", str(batch),
                          "-t", str(threads), "--repack", str(repack), "-r", "1", "-o", "json"],
                         capture_output=True, text=True, check=True)
    rows = json.loads(out.stdout)
    return float(rows[0]["avg_ts"])


def document_tokens(eng: Any, tokens: int) -> list[int]:
    """A real document's tokens, repeated if short, cut to `tokens`."""
    from engine.measure.suites import load_suite

    text = "\n\n".join(str(p.prompt if isinstance(p.prompt, str) else p.prompt[-1]["content"])
                       for p in load_suite("long_documents").prompts)
    ids = eng.tokens_for(text)
    while len(ids) < tokens:
        ids = ids + ids
    return ids[:tokens]


def tandem(model: str, tokens: int, batch: int, threads: int, reading: str = "never") -> float:
    """Tandem's prefill tokens/s for one setting: a fresh engine (no prompt cache, the machine's
    calibration kept in a folder of this process), a warm-up read (two batches and a token: under
    `auto` the plain twin is measured then), then the timed read from an empty context."""
    import os
    import tempfile

    from engine import Engine

    with tempfile.TemporaryDirectory(prefix="tandem-prefill-") as home:
        before = os.environ.get("TANDEM_HOME")
        os.environ["TANDEM_HOME"] = home
        try:
            eng = Engine(model, n_ctx=max(tokens, 2 * batch + 1) + 64, n_batch=batch, n_threads=threads,
                         metrics_log=False, prompt_cache=False, plain_reading=reading)
            try:
                ids = document_tokens(eng, max(tokens, 2 * batch + 2))
                eng.generate(ids[: 2 * batch + 2], max_tokens=1)
                eng.forget_prompts()
                done = eng.generate(ids[:tokens], max_tokens=1)
                return float(done.stats.prefill_tokens_per_s)
            finally:
                eng.close()
        finally:
            if before is None:
                os.environ.pop("TANDEM_HOME", None)
            else:
                os.environ["TANDEM_HOME"] = before


def run(model: str, binary: str, lengths: Sequence[int], batches: Sequence[int], threads: Sequence[int],
        repeat: int, readings: Sequence[str] = ("never",), repacks: Sequence[int] = (1,),
        log: Any = sys.stderr) -> list[dict[str, Any]]:
    rows: dict[tuple[int, int, int], dict[str, dict[str, list[float]]]] = {}
    for rep in range(repeat):
        for n in lengths:
            for b in batches:
                for t in threads:
                    cell = rows.setdefault((n, b, t), {"tandem": {}, "llama_bench": {}})
                    for r in repacks:
                        cell["llama_bench"].setdefault(str(r), []).append(llama_bench(binary, model, n, b, t, r))
                    for m in readings:
                        cell["tandem"].setdefault(m, []).append(tandem(model, n, b, t, m))
                    print(f"rep {rep + 1} pp{n} b{b} t{t}: tandem "
                          + ", ".join(f"{m} {v[-1]:.1f}" for m, v in cell["tandem"].items()) + "; llama-bench "
                          + ", ".join(f"repack {r} {v[-1]:.1f}" for r, v in cell["llama_bench"].items()) + " tok/s",
                          file=log, flush=True)
    out = []
    for (n, b, t), cell in rows.items():
        tm = max(statistics.median(v) for v in cell["tandem"].values())
        lb = max(statistics.median(v) for v in cell["llama_bench"].values())
        out.append({"tokens": n, "batch": b, "threads": t, "tandem_tok_s": cell["tandem"],
                    "llama_bench_tok_s": cell["llama_bench"], "ratio": round(tm / lb, 3)})
    return out


def _cell(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def table(rows: Sequence[dict[str, Any]]) -> str:
    """One column per Tandem reading mode and llama-bench repack setting; the ratio of the bests."""
    modes = list(rows[0]["tandem_tok_s"]) if rows else []
    repacks = list(rows[0]["llama_bench_tok_s"]) if rows else []
    lines = ["| prompt | batch | threads | " + " | ".join(f"Tandem, reading {m}" for m in modes) + " | "
             + " | ".join(f"llama-bench, repack {r}" for r in repacks) + " | best / best |",
             "|---|---|---|" + "---|" * (len(modes) + len(repacks) + 1)]
    for r in rows:
        lines.append(f"| {r['tokens']} | {r['batch']} | {r['threads']} | "
                     + " | ".join(_cell(r["tandem_tok_s"][m]) for m in modes) + " | "
                     + " | ".join(_cell(r["llama_bench_tok_s"][k]) for k in repacks) + f" | {r['ratio']:.2f}x |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.prefill_peer", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--llama-bench", default=None, help="the binary (default: built by tools/llama_bench_build.sh)")
    ap.add_argument("--tokens", default="512,1536")
    ap.add_argument("--batches", default="128,256,512")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reading", default="never,auto", help="Tandem's plain reading modes to measure")
    ap.add_argument("--repack", default="1,0", help="llama-bench's weight repacking settings to measure")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    binary = args.llama_bench or subprocess.run(["bash", str(ROOT / "tools" / "llama_bench_build.sh"), sys.executable],
                                                capture_output=True, text=True, check=True).stdout.strip()
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    rows = run(args.model, binary, ints(args.tokens), ints(args.batches), ints(args.threads), args.repeat,
               args.reading.split(","), ints(args.repack))
    md = table(rows)
    print(md)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "prefill_peer.json").write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=1))
        (args.out / "table.md").write_text(md + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
