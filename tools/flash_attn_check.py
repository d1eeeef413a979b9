"""What llama.cpp's flash-attention kernel costs on this machine, where speculation spends its
time: target passes of 1 to 16 tokens (a plain step and verify passes) after a prompt of a few
thousand tokens, with the kernel on (what llama.cpp's own "auto", Tandem's default, picks on a
CPU) and off (`TANDEM_FLASH_ATTN=off`, engine/llamacpp/runtime.py `flash_attention`).

    flock /tmp/cpu.lock python -m tools.flash_attn_check --model FILE.gguf [--depths 1536,3000] --out DIR

One process, one load of the model, one context per setting, each
holding the same prompt; then rounds in which every context runs every pass width in turn (the
fastest of a few tries per round, each pass taken back after), so a machine that speeds up or
slows down moves every setting alike. Medians over rounds, with the off/on ratio per width
(below 1: off is faster). The prompt is random tokens: attention costs the same whatever they
say. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Sequence

SETTINGS = ("on", "off")


def _context(model: Any, setting: str, n_ctx: int, threads: int) -> Any:
    """The engine's own context over `model`, made with flash attention `setting` (as
    $TANDEM_FLASH_ATTN asks every context of a process)."""
    from engine.llamacpp.context import Context
    from engine.llamacpp.runtime import RuntimeParams

    before = os.environ.get("TANDEM_FLASH_ATTN")
    os.environ["TANDEM_FLASH_ATTN"] = setting
    try:
        return Context(model, RuntimeParams(n_ctx=n_ctx, n_batch=512, n_threads=threads))
    finally:
        if before is None:
            del os.environ["TANDEM_FLASH_ATTN"]
        else:
            os.environ["TANDEM_FLASH_ATTN"] = before


def measure(path: str, depths: Sequence[int], widths: Sequence[int], rounds: int, threads: int,
            log: Any = sys.stderr) -> list[dict[str, Any]]:
    """Per depth and width, each setting's median pass seconds over `rounds`."""
    from engine.llamacpp.llama import load_model

    model = load_model(path)
    rows: list[dict[str, Any]] = []
    try:
        for depth in depths:
            rng = random.Random(depth)
            top = min(model.n_vocab, 30000)
            prompt = [rng.randrange(top // 4, top) for _ in range(depth)]
            ctxs = {name: _context(model, name, depth + max(widths) + 64, threads) for name in SETTINGS}
            try:
                for c in ctxs.values():
                    for i in range(0, depth, c.n_batch):
                        c.decode(prompt[i : i + c.n_batch], logits="none")
                times: dict[tuple[str, int], list[float]] = {(s, n): [] for s in ctxs for n in widths}
                for r in range(rounds):
                    for name, c in ctxs.items():
                        for n in widths:
                            best = float("inf")
                            for _ in range(3 if n == 1 else 2):
                                t = time.perf_counter()
                                c.decode([rng.randrange(top // 4, top) for _ in range(n)], logits="all")
                                best = min(best, time.perf_counter() - t)
                                c.truncate(depth)
                            times[(name, n)].append(best)
                    print(f"depth {depth}: round {r + 1} of {rounds}", file=log, flush=True)
                for n in widths:
                    ms = {s: 1000 * statistics.median(times[(s, n)]) for s in ctxs}
                    rows.append({"depth": depth, "tokens": n, **{f"{s}_ms": round(v, 3) for s, v in ms.items()},
                                 "off_vs_on": round(ms["off"] / ms["on"], 3)})
            finally:
                for c in ctxs.values():
                    c.close()
    finally:
        model.close()
    return rows


def table(rows: Sequence[dict[str, Any]]) -> str:
    out = ["| depth | tokens in the pass | on ms | off ms | off / on |", "|---|---|---|---|---|"]
    out += [f"| {r['depth']} | {r['tokens']} | {r['on_ms']} | {r['off_ms']} | {r['off_vs_on']:.2f} |"
            for r in rows]
    return "\n".join(out)


def _ints(text: str) -> list[int]:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}") from None
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return vals


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.flash_attn_check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a GGUF file")
    ap.add_argument("--depths", type=_ints, default=[1536, 3000], help="prompt tokens held before the passes")
    ap.add_argument("--widths", type=_ints, default=[1, 2, 4, 8, 16], help="tokens per pass")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--threads", type=int, default=None, help="default: the engine's (the physical cores)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    if not Path(a.model).is_file():
        ap.error(f"--model: {a.model}: no such file")
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    from engine.llamacpp.llama import default_threads

    rows = measure(a.model, a.depths, a.widths, a.rounds, a.threads or default_threads())
    print(table(rows))
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "rows.json").write_text(json.dumps({"argv": list(argv or sys.argv[1:]), "rows": rows}, indent=1))
        (a.out / "summary.md").write_text(table(rows) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
