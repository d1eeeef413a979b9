"""Engine overhead and lookahead sweep, measured in one run (a script, not a test).

    python -m tools.baseline --target T.gguf --draft D.gguf [--tokens 128] [--repeat 3] [--out F.json]

1. Target alone through the engine vs llama-cpp-python's own `Llama.create_completion`
   (non-streaming, so it reports how many tokens it made): same model, prompt, greedy,
   threads and context. Both timed the same way, by difference: (N - 1) / (time to N
   tokens - time to 1 token); both reuse the cached prompt, so the difference is pure
   decoding.
2. Speculative with k = 1..8 and auto vs target alone (decode tok/s ratio).

Runs are interleaved (each repeat runs every configuration once) and medians reported,
so drift on a shared machine hits all configurations alike.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

PROMPT = "Write a Python function that returns the n-th Fibonacci number iteratively, with a docstring and type hints."


def _first_to_last(timestamps: list[float]) -> float:
    if len(timestamps) < 2:
        return 0.0
    return (len(timestamps) - 1) / (timestamps[-1] - timestamps[0])


def run(target: str, draft: str | None, tokens: int, repeat: int, threads: int | None) -> dict:
    from llama_cpp import Llama

    from engine import Engine
    from engine.decoding.events import TokenEvent
    from engine.llamacpp.llama import default_threads

    n_threads = threads or default_threads()
    eng = Engine(target, n_ctx=2048, n_threads=n_threads, metrics_log=False)
    prompt_tokens = eng.tokens_for(PROMPT, chat=True)
    prompt_text = eng.target.detokenize(prompt_tokens)  # the same text for llama-cpp-python
    llm = Llama(target, n_ctx=2048, n_threads=n_threads, n_threads_batch=n_threads, verbose=False, n_gpu_layers=eng.n_gpu_layers or 0)

    configs: list[tuple[str, object, object]] = [("engine target alone", None, 0)]
    if draft:
        configs += [(f"speculative k={k}", draft, k) for k in range(1, 9)] + [("speculative auto", draft, "auto")]
        configs += [("prompt lookup k=4", "lookup", 4), ("prompt lookup auto", "lookup", "auto")]
    results: dict[str, list[float]] = {"llama-cpp-python create_completion": []}
    extra: dict[str, list[dict]] = {}
    for name, _, _ in configs:
        results[name] = []
    # warm-up: load pages, build caches, calibrate Auto
    eng.generate(prompt_tokens and PROMPT, chat=True, max_tokens=8)
    if draft:
        eng.generate(PROMPT, chat=True, max_tokens=8, draft_model=draft, lookahead="auto")
    def lcp_time(n: int) -> tuple[float, int]:
        t = time.perf_counter()
        out = llm.create_completion(prompt_text, max_tokens=n, temperature=0.0)
        return time.perf_counter() - t, int(out["usage"]["completion_tokens"])  # type: ignore[index]

    def engine_time(n: int) -> tuple[float, int]:
        t = time.perf_counter()
        r = eng.generate(PROMPT, chat=True, max_tokens=n)
        return time.perf_counter() - t, r.stats.generated_tokens

    for r in range(repeat):
        # the two implementations, timed by difference, alternating
        (t1, _), (tn, n_lcp) = lcp_time(1), lcp_time(tokens)
        results["llama-cpp-python create_completion"].append((n_lcp - 1) / (tn - t1))
        e1, _ = engine_time(1)
        en, n_gen = engine_time(tokens)
        results.setdefault("engine target alone (same timing)", []).append((n_gen - 1) / (en - e1))
        for name, d, k in configs:
            stamps = []
            done = None
            for ev in eng.stream(PROMPT, chat=True, max_tokens=tokens, draft_model=d, lookahead=k):  # type: ignore[arg-type]
                if isinstance(ev, TokenEvent):
                    stamps.append(time.perf_counter())
                elif ev.kind == "done":
                    done = ev
            results[name].append(_first_to_last(stamps))
            extra.setdefault(name, []).append(
                {"acceptance": done.stats.acceptance_rate, "tokens_per_step": done.stats.mean_tokens_per_step,
                 "decode_tps": done.stats.decode_tokens_per_s, "generated": done.stats.generated_tokens}
            )
        print(f"repeat {r + 1}/{repeat} done", file=sys.stderr)
    base = statistics.median(results["engine target alone"])
    lcp = statistics.median(results["llama-cpp-python create_completion"])
    same = statistics.median(results["engine target alone (same timing)"])
    table = []
    for name, vals in results.items():
        med = statistics.median(vals)
        row = {"config": name, "tok_s_median": med, "tok_s_min": min(vals), "tok_s_max": max(vals),
               "vs_target_alone": med / base if base else 0.0}
        if name in extra:
            row["acceptance_median"] = statistics.median(x["acceptance"] for x in extra[name])
            row["tokens_per_step_median"] = statistics.median(x["tokens_per_step"] for x in extra[name])
        table.append(row)
    dec = eng.decoder(draft) if draft else None
    out = {
        "target": Path(target).name,
        "draft": Path(draft).name if draft else None,
        "tokens": tokens,
        "repeat": repeat,
        "threads": n_threads,
        "machine": {"cpu": platform.processor() or platform.machine(), "system": platform.platform()},
        "engine_vs_llama_cpp_python": same / lcp if lcp else 0.0,
        "rows": table,
        "cost_model": None if dec is None else {
            "verify_s": dec.cost.verify_s, "draft_token_s": dec.cost.draft_token_s, "alpha": dec.cost.alpha,
        },
    }
    eng.close()
    return out


def print_table(res: dict) -> None:
    print(f"\n{res['target']} + {res['draft']}  ({res['tokens']} tokens, median of {res['repeat']}, {res['threads']} threads)")
    print(f"{'configuration':38s} {'tok/s':>7s} {'min':>7s} {'max':>7s} {'ratio':>6s} {'accept':>7s} {'tok/step':>8s}")
    for r in res["rows"]:
        acc = f"{r['acceptance_median']:.0%}" if "acceptance_median" in r else ""
        tps = f"{r['tokens_per_step_median']:.2f}" if "tokens_per_step_median" in r else ""
        print(f"{r['config']:38s} {r['tok_s_median']:7.1f} {r['tok_s_min']:7.1f} {r['tok_s_max']:7.1f} "
              f"{r['vs_target_alone']:5.2f}x {acc:>7s} {tps:>8s}")
    print(f"engine target alone / llama-cpp-python: {res['engine_vs_llama_cpp_python']:.3f}x")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int)
    ap.add_argument("--out", help="write JSON results here")
    a = ap.parse_args(argv)
    res = run(a.target, a.draft, a.tokens, a.repeat, a.threads)
    print_table(res)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
