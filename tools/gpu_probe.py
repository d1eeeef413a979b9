"""Measure what speculation's cost model needs on a GPU, with shape-realistic random models.

    python -m tools.gpu_probe --out results.json [--target-shape qwen7b] [--draft-shape qwen0.5b] [--quant Q4_K_M]

Random weights make acceptance meaningless, so this measures only what does not depend on
it: target-alone tokens/s, the draft's step time, the verify-cost curve (a batch of n vs
one token), the engine's per-step overhead, and throughput with the target as its own
draft (acceptance ~1: the ceiling). `predict()` then combines these with acceptance rates
measured on real pairs on the CPU to predict GPU speedups — predicted, not measured.
Written for a lent GPU machine (see ../shared/GPU.md); runs on a CPU with small shapes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

# (n_embd, n_layer, n_head, n_kv_head, n_ff, vocab) of real models
SHAPES = {
    "qwen7b": (3584, 28, 28, 4, 18944, 152064),
    "qwen1.5b": (1536, 28, 12, 2, 8960, 151936),
    "qwen0.5b": (896, 24, 14, 2, 4864, 151936),
    "tiny": (128, 2, 4, 2, 256, 2048),
    "small": (512, 4, 8, 2, 1024, 8192),
}


def write_shaped(path: Path, shape: str, vocab_size: int | None = None, seed: int = 0) -> Path:
    """A llama-architecture F16 GGUF of a real model's shape with random weights."""
    from engine.models.tinymodel import make_vocab, write_model

    n_embd, n_layer, n_head, n_kv, n_ff, vocab = SHAPES[shape]
    block = (np.random.default_rng(seed).standard_normal(1 << 22) * 0.02).astype(np.float16)

    def tiled(*shape_: int) -> np.ndarray:  # reused block: independence is irrelevant here
        n = int(np.prod(shape_))
        return np.tile(block, -(-n // block.size))[:n].reshape(shape_)

    # write_model keeps specials (EOS among them) from ever winning, so runs never stop early
    return write_model(path, n_embd=n_embd, n_layer=n_layer, n_head=n_head, n_kv_head=n_kv, n_ff=n_ff,
                       n_ctx=8192, vocab=make_vocab(size=vocab_size or vocab), chat_template=None,
                       name=f"random-{shape}", dtype=np.float16, fill=tiled)


def quantize(src: Path, dst: Path, ftype: str = "Q4_K_M") -> Path:
    import llama_cpp

    from engine.models.hardware import physical_cores
    from engine.llamacpp.llama import ensure_backend

    ensure_backend()  # routes llama.cpp's per-tensor log lines away from the terminal
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype}")
    params.nthread = physical_cores()
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), params)
    if rc != 0:
        raise RuntimeError(f"quantize failed ({rc})")
    return dst


def median_time(fn, n: int) -> float:
    """Median seconds of n calls of fn."""
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def measure(target: Path, draft: Path, tokens: int = 128, reps: int = 3, gpu_layers: int | None = None,
            curve_only: bool = False) -> dict:
    """Costs and speeds on this machine; `curve_only`: the verify curve and the draft step alone."""
    from engine import Engine
    from engine.decoding.events import DoneEvent
    from engine.llamacpp.context import Context
    from engine.decoding.drafting.lookahead import Fixed
    from engine.llamacpp.runtime import RuntimeParams
    from engine.decoding.sampling.sampler import SamplingParams
    from engine.decoding.request import GenerationRequest

    eng = Engine(target, n_ctx=4096, metrics_log=False, n_gpu_layers=gpu_layers)
    t = eng.target
    prompt = [300 + (i * 7919) % 1000 for i in range(256)]  # 256 ordinary vocabulary ids
    ctx = Context(t, RuntimeParams(n_ctx=4096, n_gpu_layers=gpu_layers))
    ctx.decode(prompt[:-1], logits="none")
    base = ctx.n_past
    verify = {}
    for n in (1, 2, 3, 4, 5, 6, 8, 9, 12, 16):
        def one(n: int = n) -> None:
            ctx.truncate(base)
            ctx.decode(prompt[-1:] * n, logits="all")
        one()
        verify[n] = median_time(one, 9)
    ctx.close()
    dm = eng.load_draft(draft)
    dctx = Context(dm, RuntimeParams(n_ctx=4096, n_gpu_layers=gpu_layers))
    dctx.decode(prompt[:-1], logits="none")
    dbase = dctx.n_past

    def dstep() -> None:
        dctx.truncate(dbase)
        dctx.decode(prompt[-1:], logits="last")
    dstep()
    draft_step = median_time(dstep, 15)
    dctx.close()
    out: dict = {"target": target.name, "draft": draft.name, "gpu_layers": gpu_layers, "verify_s": verify,
                 "verify_ratio": {n: v / verify[1] for n, v in verify.items()},
                 "draft_step_s": draft_step, "draft_cost_ratio": draft_step / verify[1]}
    if curve_only:
        eng.close()
        return out

    def run(draft_model, la, sampling=None, dec=None) -> tuple[float, list[int]]:
        """Median decode tok/s over `reps` runs, and the tokens of the last run."""
        dec = dec or eng.decoder(draft_model)
        vals, toks = [], []
        for rep in range(reps):
            kw = {"sampling": SamplingParams(0.7, top_p=0.9, seed=rep + 1)} if sampling else {}
            req = GenerationRequest(prompt, max_tokens=tokens, lookahead=Fixed(la), **kw)
            done = [e for e in dec.run(prompt, req) if isinstance(e, DoneEvent)][0]
            # greedy never stops early (specials never win); a sampled run may draw one: its rate still counts
            if done.stats.generated_tokens < (16 if sampling else tokens):
                raise RuntimeError(f"only {done.stats.generated_tokens} of {tokens} tokens generated")
            vals.append(done.stats.decode_tokens_per_s)
            toks = list(done.tokens)
        return statistics.median(vals), toks

    alone, alone_tokens = run(None, 0)
    sampled, _ = run(None, 0, sampling=True)
    # engine overhead: wall time per plain step minus the raw decode time of one token
    overhead = 1.0 / alone - verify[1] if alone else None
    ceiling, identical = {}, {}
    for k in (2, 4, 8):
        ceiling[k], toks = run(target, k)
        # greedy speculation must write what the target alone writes; on a GPU a batched
        # pass may round differently from a one-token pass (no batch invariance): say where
        identical[k] = _first_difference(alone_tokens, toks)
    # a free drafter that always agrees (it proposes the target's own greedy continuation):
    # what a perfect prompt lookup would pay on this machine, one verify pass per step
    from engine.decoding.decoder import Decoder
    from tools.host_overhead import oracle_drafter

    oracle = Decoder(t, oracle_drafter(alone_tokens, len(prompt)), runtime=eng.runtime)
    free, free_identical = {}, {}
    for k in (4, 8):
        free[k], toks = run(None, k, dec=oracle)
        free_identical[k] = _first_difference(alone_tokens, toks)
    oracle.close()
    out.update({
        "target_alone_tok_s": alone, "engine_overhead_s_per_step": overhead,
        "target_alone_sampled_tok_s": sampled,  # temperature 0.7, top-p 0.9
        "self_draft_tok_s": ceiling, "self_draft_speedup": {k: v / alone for k, v in ceiling.items()},
        # None: greedy self-draft wrote exactly the target-alone tokens; else the first index that differs
        "self_draft_first_difference": identical,
        "self_draft_predicted_speedup": {k: _self_draft_prediction(verify, k) for k in ceiling},
        "free_agreeing_draft_speedup": {k: v / alone for k, v in free.items()},
        "free_agreeing_draft_first_difference": free_identical,
    })
    eng.close()
    return out


def _first_difference(a: list[int], b: list[int]) -> int | None:
    """The first index where two outputs differ, or None when one is a prefix of the other."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)


def _self_draft_prediction(verify: dict[int, float], k: int) -> float:
    """What the pricing of tools/draft_replay.py predicts for the target drafting for itself
    (every draft accepted, each draft token a one-token pass): k + 1 tokens per step costing
    k one-token passes and one (k+1)-token verify. Checked against the measured ceiling."""
    return (k + 1) * verify[1] / (k * verify[1] + verify[k + 1])


def predict(m: dict, alphas: dict[str, float]) -> dict:
    """Predicted speedups for a real draft of this cost at CPU-measured acceptance rates."""
    from engine.decoding.drafting.cost_model import CostModel

    cm = CostModel()
    for n, s in m["verify_s"].items():
        cm.observe_verify(int(n), float(s))
    cm.observe_draft(1, m["draft_step_s"])
    return {name: {"alpha": a, "best": cm.best(16, alpha=a).__dict__} for name, a in alphas.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target-shape", default="qwen7b", choices=sorted(SHAPES))
    ap.add_argument("--draft-shape", default="qwen0.5b", choices=sorted(SHAPES))
    ap.add_argument("--quant", default="Q4_K_M")
    ap.add_argument("--dir", default="/tmp/tandem-gpu-models")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--alphas", default="code:0.9,chat:0.75", help="name:alpha pairs measured on real pairs (CPU)")
    ap.add_argument("--gpu-layers", type=int, default=None, help="layers to offload (default: all, when the build can)")
    ap.add_argument("--curve-only", action="store_true", help="measure the verify curve and the draft step only")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    d = Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    vocab = SHAPES[a.target_shape][5]
    files = {}
    for role, shape in (("target", a.target_shape), ("draft", a.draft_shape)):
        q = d / f"{role}-{shape}-{a.quant}.gguf"
        if not q.exists():
            t0 = time.time()
            f16 = write_shaped(d / f"{role}-{shape}-f16.gguf", shape, vocab_size=vocab)
            quantize(f16, q, a.quant)
            f16.unlink()
            print(f"{role}: {q.name} in {time.time() - t0:.0f} s", file=sys.stderr)
        files[role] = q
    m = measure(files["target"], files["draft"], a.tokens, gpu_layers=a.gpu_layers, curve_only=a.curve_only)
    alphas = {k: float(v) for k, v in (x.split(":") for x in a.alphas.split(","))}
    m["predicted"] = predict(m, alphas)
    try:
        from engine.llamacpp.ggml_devices import probe

        m["hardware"] = probe().summary()
    except Exception:
        pass
    Path(a.out).write_text(json.dumps(m, indent=1, default=str))
    print(json.dumps(m, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
