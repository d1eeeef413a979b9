"""What a grammar constraint (engine/decoding/sampling/grammar.py) costs per token, on tiny models.

Tiny random GGUFs (tools/host_overhead.py's: 2 layers, n_embd 64, a nearly flat next-token
distribution) with a 320-token and a 151,936-token (Qwen's) vocabulary, so llama_decode is
cheap and the grammar's host work shows. For each it times

* the grammar sampler itself in a JSON state: `allows` (one token) and `mask` (a whole row);
* generation per token, free vs constrained to any JSON object (`{"type": "object"}`):
  greedy, sampled (temperature 0.7: the one-token rejection path), sampled with top-p 0.9
  (on this flat model the best-ranked tokens never settle the nucleus: every draw masks the
  whole row), and the model drafting for itself (k=4), greedy and sampled.

The flat model is the worst case for the greedy fast path: its unconstrained argmax is almost
never a token the grammar allows, so most rows are masked whole. Not a test: the numbers go
to docs/benchmarks.md.

    flock /tmp/tandem-cpu.lock python -m tools.grammar_cost [--tokens 200] [--reps 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from tools.host_overhead import N_CTX, VOCABS, write_models

MODES = ("greedy", "sampled", "sampled top-p", "self-draft k=4", "self-draft k=4 sampled")


def per_token_ms(dec, model, mode: str, grammar: str | None, tokens: int, seed: int) -> float:
    from engine.decoding.sampling.sampler import GREEDY, SamplingParams
    from engine.decoding.request import GenerationRequest

    sampling = (SamplingParams(0.7, top_p=0.9, seed=seed) if mode.endswith("top-p")
                else SamplingParams(0.7, seed=seed) if mode.endswith("sampled") else GREEDY)
    secs, n = 0.0, 0
    while n < tokens:
        req = GenerationRequest([model.bos], lookahead=4 if mode.startswith("self") else 0, max_tokens=tokens - n,
                                sampling=sampling, grammar=grammar)
        dec.forget_prompts()
        for ev in dec.run([model.bos], req):
            if ev.kind == "done":
                secs += ev.stats.decode_s
                n += max(1, ev.stats.generated_tokens)
    return secs / n * 1000.0


def sampler_costs(model, grammar: str, reps: int = 200) -> tuple[float, float]:
    """(allows one token, mask a whole row) in microseconds, in the state after `{"`."""
    from engine.decoding.sampling.grammar import GrammarState

    g = GrammarState(model, grammar)
    for piece in (b"{", b'"'):
        g.accept(next(t for t in range(model.n_vocab) if model.piece(t) == piece))
    row = np.random.default_rng(0).normal(size=model.n_vocab).astype(np.float32)
    t0 = time.perf_counter()
    for i in range(reps):
        g.allows(i % model.n_vocab)
    t1 = time.perf_counter()
    for _ in range(max(3, reps // 20)):
        g.mask(row)
    t2 = time.perf_counter()
    g.close()
    return (t1 - t0) / reps * 1e6, (t2 - t1) / max(3, reps // 20) * 1e6


def main(argv: list[str] | None = None) -> None:
    from engine.decoding.decoder import Decoder
    from engine.decoding.drafting.drafters import ModelDrafter
    from engine.decoding.sampling.grammar import JSON_OBJECT_SCHEMA, json_schema_grammar
    from engine.llamacpp.llama import Model
    from engine.llamacpp.runtime import RuntimeParams

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    grammar = json_schema_grammar(JSON_OBJECT_SCHEMA)
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_models(Path(tmp))
        print(f"| vocab | mode | free ms/token | JSON-constrained ms/token | added ms/token |")
        print("|---|---|---|---|---|")
        for n in VOCABS:
            rt = RuntimeParams(n_ctx=N_CTX, n_batch=512, n_threads=args.threads, n_gpu_layers=0)
            model = Model(paths[n], runtime=rt)
            decs = {"alone": Decoder(model, runtime=rt), "self": Decoder(model, ModelDrafter(model, rt), runtime=rt)}
            for mode in MODES:
                dec = decs["self" if mode.startswith("self") else "alone"]
                free, con = [], []
                for r in range(args.reps):  # interleaved: drift hits both alike
                    free.append(per_token_ms(dec, model, mode, None, args.tokens, r))
                    con.append(per_token_ms(dec, model, mode, grammar, args.tokens, r))
                f, c = statistics.median(free), statistics.median(con)
                print(f"| {n:,} | {mode} | {f:.3f} | {c:.3f} | {c - f:+.3f} |")
            one, row = sampler_costs(model, grammar)
            print(f"| {n:,} | grammar sampler | allows(1 token): {one:.1f} µs | mask(whole row): {row / 1000:.3f} ms | |")
            for d in decs.values():
                d.close()
            model.close()


if __name__ == "__main__":
    main()
