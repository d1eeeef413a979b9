"""RPC benchmark: the target split over two loopback `tandem worker`s behind a latency proxy.

    PYTHONPATH=. python packaging/rpc_bench.py --target T.gguf --draft D.gguf \
        --suite code_editing --delays 0,2,5,20 --limit 3 --max-tokens 64 --out out/rpc

For each added round-trip latency (tests/delayproxy.py, in front of both workers) it runs
target alone, prompt lookup (Auto) and the draft model (Auto) interleaved per prompt with
`engine.measure.bench.run_bench`, on one target loaded once (the proxy's delay changes between
latencies, each latency gets fresh decoders so Auto re-calibrates). It also measures the
same target loaded locally, so each pass's network share is visible: per-pass verify time
over RPC minus the same pass measured locally.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from delayproxy import DelayProxy  # noqa: E402
from engine.measure import bench
from engine.measure import suites as bench_suites
from engine.llamacpp import rpc_backend as rpc  # noqa: E402
from engine.decoding.engine import Engine  # noqa: E402


def start_worker(threads: int) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen([sys.executable, "-m", "engine.cli", "worker", "--port", str(port), "--threads", str(threads)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    endpoint = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:  # ready when it answers the protocol's handshake
        try:
            rpc.probe(endpoint, timeout=1.0)
            return p, endpoint
        except rpc.RpcError:
            if p.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def per_pass_verify_ms(res: bench.BenchResult, config: str) -> float:
    xs = [v for r in res.runs if r.config == config for v in r.step_verify_ms]
    return statistics.median(xs) if xs else 0.0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--suite", default="code_editing")
    ap.add_argument("--delays", default="0,2,5,20", help="added round-trip latency in ms, comma list")
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--worker-threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()

    suite = bench_suites.load_suite(a.suite)
    configs = [bench.Config("target", "target", None, 0), bench.Config("auto", "auto", a.draft, "auto"),
               bench.Config("lookup", "lookup", "lookup", "auto")]
    rows = []

    # The same target loaded locally: per-pass verify time without the network.
    local = Engine(a.target, n_threads=a.threads, metrics_log=False)
    loc = bench.run_bench(local, [suite], configs[:1], repeat=a.repeat, max_tokens=a.max_tokens, limit=a.limit)
    local_ms = per_pass_verify_ms(loc, "target")
    local_tok_s = loc.rows[0].tok_s_median
    local.close()
    print(f"local target alone: {local_tok_s:.1f} tok/s, {local_ms:.1f} ms per pass", flush=True)

    workers = [start_worker(a.worker_threads) for _ in range(2)]
    proxies = [DelayProxy(ep, 0.0).start() for _, ep in workers]
    try:
        base = Engine(a.target, n_threads=a.threads, metrics_log=False, rpc=[p.endpoint for p in proxies])
        split = base.rpc.placement(int(base.target.header.get(f"{base.target.architecture}.block_count"))).describe()
        print(f"target split: {split}", flush=True)
        for delay in [float(x) for x in a.delays.split(",")]:
            for p in proxies:
                p.delay_s = delay / 1000
            eng = Engine(base.target, n_threads=a.threads, metrics_log=False)  # fresh decoders: Auto re-calibrates
            t0 = time.time()
            res = bench.run_bench(eng, [suite], configs, repeat=a.repeat, max_tokens=a.max_tokens, limit=a.limit)
            by = {r.config: r for r in res.rows}
            auto_k = [k for r in res.runs if r.config == "auto" for k in r.step_k]
            rpc_ms = per_pass_verify_ms(res, "target")
            row = {
                "delay_ms": delay,
                "target_tok_s": by["target"].tok_s_median,
                "lookup_tok_s": by["lookup"].tok_s_median, "lookup_ratio": by["lookup"].speedup_median,
                "lookup_ratio_min": by["lookup"].speedup_min,
                "auto_tok_s": by["auto"].tok_s_median, "auto_ratio": by["auto"].speedup_median,
                "auto_ratio_min": by["auto"].speedup_min,
                "auto_mean_k": statistics.mean(auto_k) if auto_k else 0.0,
                "auto_acceptance": by["auto"].acceptance_median,
                "verify_ms_per_pass": rpc_ms, "local_verify_ms_per_pass": local_ms,
                "network_share": (rpc_ms - local_ms) / rpc_ms if rpc_ms else 0.0,
                "identical": sum(r.identical for r in res.rows[1:]), "compared": sum(r.compared for r in res.rows[1:]),
                "seconds": round(time.time() - t0, 1),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
            eng.close()
        base.close()
    finally:
        for p in proxies:
            p.stop()
        for w, _ in workers:
            w.terminate()
            w.wait(10)

    table = ["| added RTT | target alone | lookup (Auto) | ratio | draft model (Auto) | ratio | Auto's mean k | per-pass verify | network share |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        table.append(f"| {r['delay_ms']:g} ms | {r['target_tok_s']:.1f} tok/s | {r['lookup_tok_s']:.1f} | "
                     f"**{r['lookup_ratio']:.2f}x** ({r['lookup_ratio_min']:.2f} min) | {r['auto_tok_s']:.1f} | "
                     f"**{r['auto_ratio']:.2f}x** ({r['auto_ratio_min']:.2f} min) | {r['auto_mean_k']:.1f} | "
                     f"{r['verify_ms_per_pass']:.1f} ms | {r['network_share']:.0%} |")
    print(f"\nlocal target alone (no RPC): {local_tok_s:.1f} tok/s, {local_ms:.1f} ms per pass; split: {split}")
    print("\n".join(table))
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "rpc_results.json").write_text(json.dumps({"local_tok_s": local_tok_s, "local_ms": local_ms,
                                                          "split": split, "rows": rows}, indent=1))
        (out / "summary.md").write_text("\n".join(table) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
