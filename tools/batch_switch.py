"""Does llama.cpp pay extra when consecutive decodes change batch size? (issue 24, item 2)

A self-draft step decodes 2, 1, 1, 1 tokens in the draft's context and 5 in the target's;
the docs blamed graph rebuilds on size changes. This times decode patterns repeated in a
tight ctypes loop (tools/host_overhead.py's `Floor.replay`, every row's logits argmaxed) on
the same tiny random GGUFs: a pattern that switches sizes against the same sizes alone, and
a draft pattern padded to one size. Not a test: it asserts nothing.

    flock /tmp/tandem-cpu.lock python -m tools.batch_switch [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from tools.host_overhead import VOCABS, Floor, write_models

PATTERNS = {"1": [1], "2": [2], "5": [5], "1,5": [1, 5], "2,1,1,1": [2, 1, 1, 1], "1,1,1,1": [1, 1, 1, 1], "2,2,2,2": [2, 2, 2, 2]}


def per_pattern(floor: Floor, pattern: list[int], positions: int = 900, reps: int = 7) -> float:
    """Median seconds per repetition of `pattern`, repeated up to `positions` tokens."""
    times = positions // sum(pattern)
    calls = [(0, n, "all") for n in pattern] * times
    floor.replay(calls)  # warm up: the first pass of a size builds its graph
    return statistics.median(floor.replay(calls) for _ in range(reps)) / times


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.batch_switch", description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args(argv)
    from engine.models.hardware import physical_cores

    threads = a.threads or physical_cores()
    print("| vocabulary | " + " | ".join(f"[{k}]" for k in PATTERNS) + " |")
    print("|---|" + "---|" * len(PATTERNS))
    with tempfile.TemporaryDirectory(prefix="tandem-switch-") as tmp:
        for vocab, path in write_models(Path(tmp), VOCABS).items():
            floor = Floor(path, threads)
            try:
                us = {k: per_pattern(floor, p) * 1e6 for k, p in PATTERNS.items()}
            finally:
                floor.close()
            print(f"| {vocab:,} | " + " | ".join(f"{v:,.0f}" for v in us.values()) + " |")
            print(f"  {vocab:,}: switching 1<->5 costs {us['1,5'] - us['1'] - us['5']:+,.0f} us per pair; "
                  f"2,1,1,1 costs {us['2,1,1,1'] - us['2'] - 3 * us['1']:+,.0f} us over its sizes alone", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
