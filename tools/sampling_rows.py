"""What one draw costs on a real model's logits rows: Tandem's sampler beside llama.cpp's own.

    python -m tools.sampling_rows --model TARGET.gguf [--tokens 96] [--json OUT]

tools/host_overhead.py prices sampling on a random tiny model's nearly flat rows, the worst
case for top-p (the nucleus holds 81% of a 151,936-token vocabulary). A real model's rows are
peaked. This writes from each suite's first prompt with the real model (temperature 0.7, top-p
0.9, so the rows are those a sampled answer meets), keeps every row, and then times on the
same rows, one at a time, each repeated and the median kept:

* argmax (what greedy decoding pays);
* Tandem's draw (`Sampler.pick`: `LazyDist`, exact) at temperature 0.7 / top-p 0.9, and at
  temperature 1.0 with no filter (the server's default when a client sends none);
* llama.cpp's own chain for 0.7 / 0.9 (top-p, temperature, draw; `llama_sampler_apply` on a
  prepared candidate array, so filling the array is not counted against it);
* a speculative step's verification with sampling (`verify`, the p/q rule) of 4 one-hot
  drafts (the rows' own top tokens, as prompt lookup or a greedy draft proposes) over 5
  consecutive rows, at 0.7 / 0.9, at 1.0 unfiltered, and at 0.7 unfiltered (a client that sends
  only a temperature).

Not a test: it asserts nothing; the numbers go to docs/benchmarks.md section 4.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from tools.host_overhead import TEMPERATURE, TOP_P


def collect_rows(model_path: str, tokens: int, suites: Sequence[str]) -> list[np.ndarray]:
    """Logits rows met while writing a sampled answer to each suite's first prompt."""
    from engine.decoding.engine import prompt_tokens
    from engine.llamacpp.llama import Model
    from engine.llamacpp.context import Context
    from engine.measure.suites import load_suite
    from engine.llamacpp.runtime import RuntimeParams
    from engine.decoding.sampling.sampler import Sampler, SamplingParams

    model = Model(model_path)
    ctx = Context(model, RuntimeParams(n_ctx=4096))
    sampler = Sampler(SamplingParams(TEMPERATURE, top_p=TOP_P, seed=7))
    rows: list[np.ndarray] = []
    try:
        for suite in suites:
            p = load_suite(suite).prompts[0]
            ids = prompt_tokens(model, p.prompt, chat=p.chat)
            ctx.clear()
            row = ctx.decode(ids, logits="last")[0]
            for _ in range(tokens):
                rows.append(np.array(row, dtype=np.float32))
                tok = sampler.pick(row)
                if model.is_eog(tok):
                    break
                row = ctx.decode([tok], logits="last")[0]
    finally:
        ctx.close()
        model.close()
    return rows


class LlamaChain:
    """llama.cpp's sampler chain (top-p, temperature, draw) applied to a candidate array."""

    def __init__(self, n_vocab: int):
        import llama_cpp

        from tools.host_overhead import llama_sampler_chain

        self.ll = llama_cpp
        self.chain = llama_sampler_chain(llama_cpp)
        self.cells = (llama_cpp.llama_token_data * n_vocab)()
        self.view = np.ctypeslib.as_array(self.cells)  # a structured view: id, logit, p
        self.ids = np.arange(n_vocab, dtype=np.int32)

    def prepare(self, row: np.ndarray) -> None:
        self.view["id"] = self.ids
        self.view["logit"] = row
        self.view["p"] = 0.0

    def draw(self) -> int:
        arr = self.ll.llama_token_data_array(self.cells, len(self.cells), -1, False)
        self.ll.llama_sampler_apply(self.chain, ctypes.byref(arr))
        return int(arr.data[arr.selected].id)

    def close(self) -> None:
        self.ll.llama_sampler_free(self.chain)


def measure(rows: Sequence[np.ndarray], repeat: int = 5) -> dict:
    from engine.decoding.sampling.sampler import Sampler, SamplingParams
    from tools.gpu_probe import median_time

    tandem = Sampler(SamplingParams(TEMPERATURE, top_p=TOP_P, seed=1))
    plain = Sampler(SamplingParams(1.0, seed=1))
    chain = LlamaChain(rows[0].shape[0])
    out: dict[str, list[float]] = {"argmax": [], "tandem_t0.7_top_p0.9": [], "tandem_t1.0": [], "llama_cpp_chain_t0.7_top_p0.9": []}
    nucleus = []
    try:
        for row in rows:
            out["argmax"].append(median_time(lambda: int(np.argmax(row)), repeat))
            out["tandem_t0.7_top_p0.9"].append(median_time(lambda: tandem.pick(row), repeat))
            out["tandem_t1.0"].append(median_time(lambda: plain.pick(row), repeat))
            ts = []
            for _ in range(repeat):
                chain.prepare(row)
                t = time.perf_counter()
                chain.draw()
                ts.append(time.perf_counter() - t)
            out["llama_cpp_chain_t0.7_top_p0.9"].append(statistics.median(ts))
            nucleus.append(len(tandem.dist(row).ids))
    finally:
        chain.close()
    # a speculative step's verification (engine.decoding.sampling.sampler.verify): 4 one-hot drafts
    # (the rows' own top tokens, as greedy drafts or prompt lookup propose) over 5 rows
    from engine.decoding.sampling.sampler import verify

    for name, params in (("verify_k4_t0.7_top_p0.9", SamplingParams(TEMPERATURE, top_p=TOP_P, seed=3)),
                         ("verify_k4_t1.0", SamplingParams(1.0, seed=3)),
                         ("verify_k4_t0.7_no_filter", SamplingParams(TEMPERATURE, seed=3))):  # a client sending only a temperature
        sampler, ts = Sampler(params), []
        for i in range(0, len(rows) - 5, 5):
            block = np.stack(rows[i : i + 5])
            drafts = [int(r.argmax()) for r in rows[i : i + 4]]
            t = time.perf_counter()
            verify(drafts, [None] * 4, block, sampler)
            ts.append(time.perf_counter() - t)
        out[name] = ts
    res = {k: {"median_us": statistics.median(v) * 1e6, "mean_us": statistics.fmean(v) * 1e6,
               "p90_us": float(np.percentile(v, 90)) * 1e6, "max_us": max(v) * 1e6} for k, v in out.items()}
    return {"rows": len(rows), "vocab": int(rows[0].shape[0]), "nucleus_tokens_median": statistics.median(nucleus),
            "nucleus_tokens_max": max(nucleus), "per_row": res}


def table(r: dict) -> str:
    lines = [f"| per draw, {r['rows']} rows of {r['vocab']:,} tokens (nucleus median {r['nucleus_tokens_median']:.0f}, "
             f"max {r['nucleus_tokens_max']:,} tokens) | median | mean | 90th percentile | max |", "|---|---|---|---|---|"]
    for k, v in r["per_row"].items():
        unit = "per step" if k.startswith("verify") else ""
        mean = f"{v['mean_us']:,.0f} us" if "mean_us" in v else ""  # results written before the mean was kept
        lines.append(f"| {k} | {v['median_us']:,.0f} us {unit} | {mean} | {v['p90_us']:,.0f} us | {v['max_us']:,.0f} us |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.sampling_rows", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a GGUF (the default pair's target, say)")
    ap.add_argument("--tokens", type=int, default=96, help="rows per prompt")
    ap.add_argument("--suites", default="code_generation,chat,report_drafting,structured_json,code_editing")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    rows = collect_rows(a.model, a.tokens, a.suites.split(","))
    r = measure(rows)
    print(table(r))
    if a.json:
        a.json.write_text(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
