"""How much the HTTP server costs, and what per-request drafting buys through it.

    python -m tools.server_bench --pair qwen2.5-coder-1.5b --repeat 5 --out docs/results/server

1. Overhead: one streaming client vs `engine.generate`, same engine, prompt and settings
   (greedy, target alone so speculation cannot blur it), interleaved repetitions. Decode
   rate on both sides = (tokens - 1) / (last token - first token), timed where the tokens
   arrive (the client's socket; the caller of `engine.stream`); plus end to end = tokens /
   (request -> last token). Ratio = server / engine, median of the repetitions.
2. The code-editing suite through the server, per request: `draft: none`, `draft: model`
   with `lookahead: auto`, and `draft: lookup` with `lookahead: auto`; medians of the
   per-prompt ratios to `none` measured in the same repetition.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

def _direct(eng: Any, prompt: Any, **kw: Any) -> dict[str, float]:
    q = eng.queue
    job = q.submit("bench", bounded=False)
    t0 = time.perf_counter()
    stamps: list[float] = []
    for ev in q.stream(eng, prompt, job, **kw):
        if ev.kind == "token":
            stamps.append(time.perf_counter())
    return _rates(t0, stamps)


def _served(http: Any, url: str, body: dict[str, Any]) -> dict[str, float]:
    t0 = time.perf_counter()
    stamps: list[float] = []
    timings: dict[str, Any] = {}
    with http.stream("POST", url + "/v1/chat/completions", json={**body, "stream": True, "provenance": True}) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            now = time.perf_counter()
            for _ in (chunk["choices"][0].get("provenance") or []) if chunk.get("choices") else []:
                stamps.append(now)  # one stamp per token, even when a chunk carries several
            timings = chunk.get("timings", timings)
    out = _rates(t0, stamps)
    out["acceptance"] = timings.get("acceptance_rate", 0.0)
    return out


def _rates(t0: float, stamps: list[float]) -> dict[str, float]:
    n = len(stamps)
    decode = (n - 1) / (stamps[-1] - stamps[0]) if n > 1 and stamps[-1] > stamps[0] else 0.0
    return {"tokens": n, "decode_tok_s": decode, "e2e_tok_s": n / (stamps[-1] - t0) if n else 0.0}


def main(argv: list[str] | None = None) -> int:
    import httpx

    from engine.measure import suites as bench_suites
    from engine.decoding.engine import Engine
    from engine.cli.main import resolve_pair
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    ap = argparse.ArgumentParser(prog="python -m tools.server_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pair")
    ap.add_argument("--target")
    ap.add_argument("--draft")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--suite-repeat", type=int, default=2)
    ap.add_argument("--limit", type=int, default=4, help="prompts of the code-editing suite")
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--out", help="folder for server_bench.json")
    args = ap.parse_args(argv)

    target, draft = resolve_pair(args)
    eng = Engine(target, n_ctx=args.ctx, metrics_log=False)
    if draft is not None:
        eng.decoder(draft)
    app = create_app(ServedModel(eng, "bench", draft=draft, lookahead="auto"), ServerConfig(list_catalog=False))
    result: dict[str, Any] = {"target": target.name, "draft": getattr(draft, "name", draft), "max_tokens": args.max_tokens}
    with ServerThread(app) as srv, httpx.Client(timeout=600) as http:
        prompt = [{"role": "user", "content": "Write a Python function that parses a CSV line with quoted fields."}]
        gen = dict(max_tokens=args.max_tokens, temperature=0.0)
        _direct(eng, prompt, chat=True, **gen)  # warm-up: caches, first-call costs
        _served(http, srv.url, {"messages": prompt, "draft": "none", **gen})
        pairs = []
        for i in range(args.repeat):
            order = ("engine", "server") if i % 2 == 0 else ("server", "engine")
            got = {}
            for side in order:
                got[side] = (_direct(eng, prompt, chat=True, **gen) if side == "engine"
                             else _served(http, srv.url, {"messages": prompt, "draft": "none", **gen}))
            pairs.append(got)
            print(f"overhead {i + 1}/{args.repeat}: engine {got['engine']['decode_tok_s']:.2f} tok/s, "
                  f"server {got['server']['decode_tok_s']:.2f} tok/s", file=sys.stderr)
        med = statistics.median
        result["overhead"] = {
            "runs": pairs,
            "engine_decode_tok_s": med(p["engine"]["decode_tok_s"] for p in pairs),
            "server_decode_tok_s": med(p["server"]["decode_tok_s"] for p in pairs),
            "decode_ratio": med(p["server"]["decode_tok_s"] / p["engine"]["decode_tok_s"] for p in pairs),
            "e2e_ratio": med(p["server"]["e2e_tok_s"] / p["engine"]["e2e_tok_s"] for p in pairs),
        }

        suite = bench_suites.load_suite("code_editing").prompts[: args.limit]
        modes = {"none": {"draft": "none"}, "auto": {"draft": "model", "lookahead": "auto"},
                 "lookup": {"draft": "lookup", "lookahead": "auto"}}
        if draft is None or draft == "lookup":
            modes.pop("auto")
        rows = []
        for rep in range(args.suite_repeat):
            for p in suite:
                msgs = p.prompt if isinstance(p.prompt, list) else [{"role": "user", "content": p.prompt}]
                names = list(modes) if rep % 2 == 0 else list(reversed(modes))
                got = {m: _served(http, srv.url, {"messages": msgs, **modes[m], **gen}) for m in names}
                rows.append({"prompt": p.id, "rep": rep, **{m: got[m] for m in modes}})
                print(f"suite {p.id} rep {rep}: " + ", ".join(f"{m} {got[m]['decode_tok_s']:.1f}" for m in modes),
                      file=sys.stderr)
        summary = {}
        for m in modes:
            summary[m] = {"decode_tok_s": med(r[m]["decode_tok_s"] for r in rows),
                          "speedup_vs_none": med(r[m]["decode_tok_s"] / r["none"]["decode_tok_s"] for r in rows),
                          "acceptance": med(r[m]["acceptance"] for r in rows)}
        if "auto" in modes:
            summary["lookup_vs_auto"] = med(r["lookup"]["decode_tok_s"] / r["auto"]["decode_tok_s"] for r in rows)
        result["code_editing"] = {"rows": rows, "summary": summary}
    eng.close()
    o = result["overhead"]
    print(f"server overhead: decode {o['server_decode_tok_s']:.2f} vs {o['engine_decode_tok_s']:.2f} tok/s, "
          f"ratio {o['decode_ratio']:.3f} (end to end {o['e2e_ratio']:.3f})")
    for m, s in result["code_editing"]["summary"].items():
        print(f"code_editing {m}: {s}")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "server_bench.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
