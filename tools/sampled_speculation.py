"""Sampled decoding with a real pair, end to end: target alone, the draft model, prompt lookup.

    python -m tools.sampled_speculation --target T.gguf --draft D.gguf [--reps 3] [--json OUT]

Temperature 0.7, top-p 0.9, 96 tokens, the first prompt of the code generation and code
editing suites, tuning and held-out; the three modes interleaved in every repetition, each
repetition with its own seed (the same for every mode). Wall-clock (prompt in, last token
out) and decode tokens/s, medians and ranges over repetitions, and how many drafted tokens
were accepted. Not a test: it asserts nothing (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Sequence

SUITES = ("code_generation", "code_editing", "heldout/code_generation", "heldout/code_editing")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.sampled_speculation", description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    from engine import Engine, GenerationRequest
    from engine.decoding.sampling.sampler import SamplingParams
    from engine.measure.suites import load_suite

    eng = Engine(a.target, metrics_log=False)
    prompts = [(s, load_suite(s).prompts[0]) for s in SUITES]
    modes = {"alone": dict(draft=None, lookahead=0), "draft-auto": dict(draft=a.draft, lookahead="auto"),
             "lookup-auto": dict(draft="lookup", lookahead="auto")}
    runs: dict[str, list] = {f"{s}/{m}": [] for s, _ in prompts for m in modes}
    for rep in range(a.reps):
        for s, p in prompts:
            for m, kw in modes.items():
                req = GenerationRequest(p.prompt, chat=p.chat, max_tokens=a.tokens,
                                        sampling=SamplingParams(0.7, top_p=0.9, seed=rep + 1), **kw)
                st = eng.generate(req).stats
                runs[f"{s}/{m}"].append((st.decode_tokens_per_s, st.accepted, st.drafted, st.generated_tokens / st.wall_s))
                print(f"rep {rep + 1}: {s}/{m} {st.decode_tokens_per_s:.2f} tok/s", file=sys.stderr)
    eng.close()
    out = {k: {"decode_tok_s_median": statistics.median(x[0] for x in v), "range": [min(x[0] for x in v), max(x[0] for x in v)],
               "wall_tok_s_median": statistics.median(x[3] for x in v), "wall_range": [min(x[3] for x in v), max(x[3] for x in v)],
               "accepted": sum(x[1] for x in v), "drafted": sum(x[2] for x in v)} for k, v in runs.items()}
    for k, v in out.items():
        print(f"{k}: wall {v['wall_tok_s_median']:.2f} tok/s ({v['wall_range'][0]:.2f}-{v['wall_range'][1]:.2f}), "
              f"decode {v['decode_tok_s_median']:.2f} ({v['range'][0]:.2f}-{v['range'][1]:.2f}), "
              f"{v['accepted']} of {v['drafted']} drafted accepted")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
