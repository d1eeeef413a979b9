"""How much host work Tandem's decode loop adds to llama.cpp's own decode, per token and step.

On a GPU a target step takes a few milliseconds, so what Python does around each
`llama_decode` (sampling, verification, events, text) decides the speed. This benchmark
measures it where llama_decode itself is cheap: tiny random GGUFs (2 layers, n_embd 64) with
a 320-token and a 151,936-token (Qwen's) vocabulary. In one process, interleaved, it times

* the floor: a tight ctypes loop of llama_decode (one token) + numpy argmax over its logits,
  through llama_cpp's low-level API, no Tandem code in the loop; also for the batch shapes a speculative
  step uses (a pass over n tokens with the last or every row's logits), so each decode a
  speculative step makes is priced by the floor of its own shape;
* Tandem target alone, greedy; Tandem target alone, sampled (temperature 0.7, top-p 0.9),
  beside llama.cpp's own sampler chain (top-p, temperature, draw; all in C) on the same decodes;
* Tandem self-draft k=4: the target as its own draft, so drafts (nearly) always agree;
* Tandem with a free drafter that always agrees (k=4: it proposes the target's own greedy
  continuation at no cost): one verify pass per step, so what remains above that pass's
  floor is the speculative machinery's host work;
* Tandem with the suffix drafter (k=4) that learnt the same continuation as a past answer:
  the same single verify pass per step, plus the suffix drafter's update and lookup, timed
  on their own too (`suffix_drafter_us_per_token`: its propose and learning calls, per
  token written).

A self-draft can never beat the target alone, on any machine: for k+1 tokens it decodes k
one-token draft passes and one (k+1)-token verify pass where the target alone decodes k+1
one-token passes. The free drafter shows what speculation pays when the draft is cheap.

The models' output weights are small, so the next-token distribution is nearly flat: the
worst case for top-p (the nucleus holds most of the vocabulary; the table says how much).
Not a test: it asserts nothing; the numbers go to docs/benchmarks.md.

    flock /tmp/tandem-cpu.lock python -m tools.host_overhead [--reps 5] [--tokens 300] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

VOCABS = (320, 151_936)
K = 4
N_CTX = 1024
TEMPERATURE, TOP_P = 0.7, 0.9


def write_models(folder: Path, vocabs: Sequence[int] = VOCABS) -> dict[int, Path]:
    """Tiny random GGUFs with a nearly flat next-token distribution (small output weights)."""
    from engine.models.tinymodel import make_vocab, write_model

    out = {}
    for n in vocabs:
        rng = np.random.default_rng(n)
        path = folder / f"tiny-{n}.gguf"
        vocab = make_vocab() if n <= 320 else make_vocab(size=n)
        vocab = _pad(vocab, n)
        write_model(path, vocab=vocab, n_layer=2, n_embd=64, seed=n, name=f"tiny-{n}",
                    fill=lambda *shape: rng.standard_normal(shape) * 0.05)
        out[n] = path
    return out


def _pad(vocab, n: int):
    """Exactly n tokens (make_vocab's base vocabulary is a little under 320)."""
    from engine.models.tinymodel import NORMAL

    while len(vocab.tokens) < n:
        vocab.tokens.append(f"▁p{len(vocab.tokens):06d}")
        vocab.scores.append(-50.0)
        vocab.types.append(NORMAL)
    del vocab.tokens[n:], vocab.scores[n:], vocab.types[n:]
    return vocab


def llama_sampler_chain(ll):
    """llama.cpp's own sampler chain for TEMPERATURE / TOP_P in Tandem's order (top-p, then
    temperature, then a seeded draw); the caller frees it with `llama_sampler_free`."""
    chain = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
    for s in (ll.llama_sampler_init_top_p(TOP_P, 1), ll.llama_sampler_init_temp(TEMPERATURE), ll.llama_sampler_init_dist(1234)):
        ll.llama_sampler_chain_add(chain, s)
    return chain


class Floor:
    """llama_decode + numpy argmax in a tight loop over llama_cpp's ctypes API (no Tandem code in the loop)."""

    def __init__(self, path: Path, threads: int, gpu_layers: int = 0):
        import llama_cpp

        from engine.llamacpp.llama import ensure_backend

        self.ll = llama_cpp
        ensure_backend()  # llama.cpp's log goes where Tandem sends it, not to the terminal
        mp = llama_cpp.llama_model_default_params()
        mp.n_gpu_layers = gpu_layers
        self.model = llama_cpp.llama_model_load_from_file(str(path).encode(), mp)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(self.model))
        cp = llama_cpp.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = N_CTX, 512, 512, 1
        cp.n_threads = cp.n_threads_batch = threads
        cp.no_perf = True
        # two contexts, as a self-draft has (target and draft): `replay` decodes on both
        self.ctxs = [llama_cpp.llama_init_from_model(self.model, cp) for _ in range(2)]
        self.ctx = self.ctxs[0]
        self.mem = llama_cpp.llama_get_memory(self.ctx)
        self.batch = llama_cpp.llama_batch_init(512, 0, 1)
        for i in range(512):
            self.batch.n_seq_id[i] = 1
            self.batch.seq_id[i][0] = 0

    def per_decode(self, tokens: int, n: int = 1, rows: str = "last", chain=None) -> float:
        """Seconds per llama_decode of an n-token batch (logits of the last or all rows, each
        argmaxed, or the last drawn by llama.cpp's sampler `chain`), over `tokens` positions
        from an empty cache."""
        ll, b = self.ll, self.batch
        ll.llama_memory_clear(self.mem, True)
        n_out = n if rows == "all" else 1
        for i in range(n):
            b.logits[i] = 1 if (rows == "all" or i == n - 1) else 0
        b.n_tokens = n
        tok, pos, calls = 1, 0, max(1, tokens // n)
        t0 = time.perf_counter()
        for _ in range(calls):
            for i in range(n):
                b.token[i] = tok
                b.pos[i] = pos + i
            if ll.llama_decode(self.ctx, b) != 0:
                raise RuntimeError("llama_decode failed")
            if chain is not None:
                tok = ll.llama_sampler_sample(chain, self.ctx, -1)
            else:
                logits = np.ctypeslib.as_array(ll.llama_get_logits(self.ctx), shape=(n_out, self.n_vocab))
                tok = int(np.argmax(logits, axis=1)[-1])
            pos += n
        return (time.perf_counter() - t0) / calls

    def per_decode_sampled(self, tokens: int) -> float:
        """Seconds per one-token llama_decode + llama.cpp's own sampler chain (top-p, then
        temperature, then a draw: Tandem's order), all in C: what sampling costs llama.cpp."""
        chain = llama_sampler_chain(self.ll)
        try:
            return self.per_decode(tokens, chain=chain)
        finally:
            self.ll.llama_sampler_free(chain)

    def replay(self, calls: Sequence[tuple[int, int, str]]) -> float:
        """Seconds for the decodes (context 0 or 1, batch size, rows) a Tandem run made, in
        its order, each followed by an argmax per row: the floor of what a self-draft step
        decodes, llama.cpp's own costs included (a batch of a new size rebuilds its graph)."""
        ll, b = self.ll, self.batch
        pos = [0, 0]
        for c in self.ctxs:
            ll.llama_memory_clear(ll.llama_get_memory(c), True)
        tok = 1
        t0 = time.perf_counter()
        for which, n, rows in calls:
            ctx = self.ctxs[which]
            for i in range(n):
                b.token[i] = tok
                b.pos[i] = pos[which] + i
                b.logits[i] = 1 if (rows == "all" or i == n - 1) else 0
            b.n_tokens = n
            if ll.llama_decode(ctx, b) != 0:
                raise RuntimeError("llama_decode failed")
            logits = np.ctypeslib.as_array(ll.llama_get_logits(ctx), shape=(n if rows == "all" else 1, self.n_vocab))
            tok = int(np.argmax(logits, axis=1)[-1])
            pos[which] += n
        return time.perf_counter() - t0

    def close(self) -> None:
        self.ll.llama_batch_free(self.batch)
        for c in self.ctxs:
            self.ll.llama_free(c)
        self.ll.llama_model_free(self.model)


@dataclass
class TandemRun:
    seconds: float  # decode phase (after the prompt), as RunStats.decode_s
    tokens: int
    steps: int
    drafted: int
    accepted: int
    decodes: dict[tuple[int, str], int] = field(default_factory=dict)  # (batch size, rows) -> count
    calls: list[tuple[int, int, str]] = field(default_factory=list)  # (context, batch size, rows) in order
    output: list[int] = field(default_factory=list)  # the tokens written
    drafter_s: float = 0.0  # the suffix drafter's own calls (suffix mode)


class Counting:
    """Logs a context's decodes (shape, order) into `calls` (through one extra Python frame)."""

    def __init__(self, ctx, which: int, calls: list[tuple[int, int, str]]):
        self.which, self.calls = which, calls
        self._decode = ctx.decode
        ctx.decode = self

    def __call__(self, tokens, *, logits: str = "last", abortable: bool = False):
        self.calls.append((self.which, len(tokens), "all" if logits == "all" and len(tokens) > 1 else "last"))
        return self._decode(tokens, logits=logits, abortable=abortable)


def oracle_drafter(known: Sequence[int], prompt_len: int):
    """A free drafter that always agrees: it proposes the target's own greedy continuation
    (`known`, recorded by a target-alone run of the same prompt) at no cost, so a step costs
    one verify pass plus Tandem's host work: what speculation's machinery costs per step."""
    from engine.decoding.drafting.drafters import Drafter, Proposal

    class Oracle(Drafter):
        kind = "oracle"
        cost_class = "free"

        def propose(self, context, k, sampler, rules=None):
            done = len(context) - prompt_len
            toks = list(known[done : done + k])
            return Proposal(toks, [None] * len(toks), [1.0] * len(toks))

    return Oracle()


class TandemModes:
    """Decoders over one model: target alone, and the model drafting for itself."""

    def __init__(self, path: Path, threads: int, gpu_layers: int = 0):
        from engine.decoding.decoder import Decoder
        from engine.decoding.drafting.drafters import ModelDrafter
        from engine.llamacpp.llama import Model
        from engine.llamacpp.runtime import RuntimeParams

        rt = RuntimeParams(n_ctx=N_CTX, n_batch=512, n_threads=threads, n_gpu_layers=gpu_layers)
        self.model = Model(path, runtime=rt)
        self.alone = Decoder(self.model, runtime=rt)
        self.selfdraft = Decoder(self.model, ModelDrafter(self.model, rt), runtime=rt)
        self.known: list[int] = []  # the greedy continuation of [bos] (oracle mode drafts it)
        self.oracle = Decoder(self.model, oracle_drafter(self.known, 1), runtime=rt)
        self.suffix_time = [0.0]
        self.suffix = Decoder(self.model, timed_suffix_drafter(self.suffix_time), runtime=rt)
        self.calls: list[tuple[int, int, str]] = []
        Counting(self.alone.ctx, 0, self.calls)
        Counting(self.oracle.ctx, 0, self.calls)
        Counting(self.suffix.ctx, 0, self.calls)
        Counting(self.selfdraft.ctx, 0, self.calls)
        Counting(self.selfdraft.drafter.ctx, 1, self.calls)  # type: ignore[union-attr]
        self.seed = 0

    def run(self, mode: str, tokens: int) -> TandemRun:
        """Generate until `tokens` tokens were written (a sampled run that draws an
        end-of-generation token is continued by another run; only decode time counts)."""
        from engine.decoding.sampling.sampler import GREEDY, SamplingParams
        from engine.decoding.request import GenerationRequest

        dec = {"selfdraft": self.selfdraft, "oracle": self.oracle, "suffix": self.suffix}.get(mode, self.alone)
        if mode in ("oracle", "suffix") and len(self.known) < tokens:  # greedy from [bos] is deterministic
            self.known[:] = self.run("greedy", tokens).output[:tokens]
        if mode == "suffix":  # the continuation is a past answer (only that one: the history is reset)
            drafter = self.suffix.drafter
            drafter.answers.clear()  # type: ignore[union-attr]
            drafter.answers.add(self.known)  # type: ignore[union-attr]
            self.suffix_time[0] = 0.0
        total = TandemRun(0.0, 0, 0, 0, 0)
        self.calls.clear()
        while total.tokens < tokens:
            self.seed += 1
            sampling = SamplingParams(TEMPERATURE, top_p=TOP_P, seed=self.seed) if mode == "sampled" else GREEDY
            req = GenerationRequest([self.model.bos], lookahead=K if mode in SPECULATIVE else 0,
                                    max_tokens=tokens - total.tokens, sampling=sampling)
            dec.forget_prompts()
            for ev in dec.run([self.model.bos], req):
                if ev.kind == "done":
                    st = ev.stats
                    total.seconds += st.decode_s
                    total.tokens += st.generated_tokens
                    total.steps += st.steps
                    total.drafted += st.drafted
                    total.accepted += st.accepted
                    total.output += list(ev.tokens)
            if total.tokens == 0:
                raise RuntimeError("the model wrote nothing")
        total.calls = list(self.calls)
        total.drafter_s = self.suffix_time[0] if mode == "suffix" else 0.0
        for _, n, rows in total.calls:
            total.decodes[(n, rows)] = total.decodes.get((n, rows), 0) + 1
        return total

    def nucleus(self) -> float:
        """Mean share of the vocabulary top-p 0.9 keeps on this model (how flat it is)."""
        from engine.decoding.sampling.sampler import SamplingParams, distribution

        ctx = self.alone.ctx
        ctx.clear()
        row = np.array(ctx.decode([self.model.bos])[0])
        ctx.clear()
        return len(distribution(row, SamplingParams(TEMPERATURE, top_p=TOP_P)).ids) / self.model.n_vocab


SPECULATIVE = ("selfdraft", "oracle", "suffix")


def timed_suffix_drafter(spent: list[float]):
    """The suffix drafter, adding the seconds its propose and learning calls take to spent[0]."""
    from engine.decoding.drafting.suffix_drafter import SuffixDrafter

    class Timed(SuffixDrafter):
        def propose(self, *a, **kw):
            t = time.perf_counter()
            try:
                return super().propose(*a, **kw)
            finally:
                spent[0] += time.perf_counter() - t

        def finish(self, *a, **kw):
            t = time.perf_counter()
            super().finish(*a, **kw)
            spent[0] += time.perf_counter() - t

    return Timed()


def measure(path: Path, reps: int, tokens: int, threads: int, log: Callable[[str], None], gpu_layers: int = 0) -> dict:
    """Each rep runs every mode once, each right after its floor, and prices the mode by that
    floor (the machine's speed drifts between reps). A speculative mode's floor replays the
    decodes its previous run made (greedy speculation decodes the same sequence every run)."""
    floor, tandem = Floor(path, threads, gpu_layers), TandemModes(path, threads, gpu_layers)
    runs: dict[str, list[tuple[TandemRun, float]]] = {"greedy": [], "sampled": [], "selfdraft": [], "oracle": [], "suffix": []}
    floors: list[float] = []
    llama_sampled: list[float] = []  # llama.cpp's own sampler chain: the C-only reference for sampling
    try:
        tandem.run("greedy", 20)
        tandem.run("sampled", 20)
        calls = {mode: tandem.run(mode, tokens).calls for mode in SPECULATIVE}
        for c in calls.values():
            floor.replay(c)  # warm up: first passes of a batch size build their graphs
        floor.per_decode(tokens)
        for rep in range(reps):
            for mode in runs:
                if mode in SPECULATIVE:
                    floor_s = floor.replay(calls[mode])
                else:
                    ls = floor.per_decode_sampled(tokens) if mode == "sampled" else None
                    floors.append(floor.per_decode(tokens))
                    if ls is not None:  # above the greedy floor measured right after it
                        llama_sampled.append(ls - floors[-1])
                r = tandem.run(mode, tokens)
                if mode in SPECULATIVE:
                    calls[mode] = r.calls
                else:
                    floor_s = floors[-1] * r.tokens
                runs[mode].append((r, floor_s))
            log(f"  rep {rep + 1}/{reps}: floor {floors[-1] * 1e6:.0f} us/token")
        nucleus = tandem.nucleus()
    finally:
        floor.close()
    out = _summarise(runs, floors, nucleus)
    out["llama_cpp_sampler_over_floor_us_per_token"] = statistics.median(llama_sampled) * 1e6
    return out


def _summarise(runs: dict[str, list[tuple[TandemRun, float]]], floors: list[float], nucleus: float) -> dict:
    """Medians over reps; `runs` pairs each run with the floor cost of the decodes it made."""
    out: dict = {"floor_us_per_token": statistics.median(floors) * 1e6, "top_p_nucleus_share": nucleus}
    for mode in ("greedy", "sampled"):
        over = [(r.seconds - f) / r.tokens * 1e6 for r, f in runs[mode]]
        out[mode] = {"us_per_token": statistics.median(r.seconds / r.tokens for r, _ in runs[mode]) * 1e6,
                     "over_floor_us_per_token": statistics.median(over), "over_floor_range": [min(over), max(over)]}
    for mode in SPECULATIVE:
        sd = runs[mode]
        per_step = [(r.seconds - f) / r.steps * 1e6 for r, f in sd]
        drafted_per_step = statistics.median(r.drafted / r.steps for r, _ in sd)
        us_per_token = statistics.median(r.seconds / r.tokens for r, _ in sd) * 1e6
        last = sd[-1][0]
        out[mode] = {
            "us_per_token": us_per_token,
            "over_floor_us_per_step": statistics.median(per_step),
            "over_floor_range": [min(per_step), max(per_step)],
            "drafted_per_step": drafted_per_step,
            "acceptance": sum(r.accepted for r, _ in sd) / max(1, sum(r.drafted for r, _ in sd)),
            "decodes_per_step": {f"{n}x{rows}": c / last.steps for (n, rows), c in sorted(last.decodes.items())},
            "goal_us_per_step": 150 + 40 * drafted_per_step,
            "speedup_vs_greedy": out["greedy"]["us_per_token"] / us_per_token,
        }
        if mode == "suffix":
            out[mode]["suffix_drafter_us_per_token"] = statistics.median(r.drafter_s / r.tokens for r, _ in sd) * 1e6
    return out


def table(results: dict[int, dict]) -> str:
    lines = ["| tiny model | floor | greedy, above floor | sampled (T 0.7, top-p 0.9), above floor | "
             "self-draft k=4, above its decodes' floor | self-draft vs greedy | "
             "free drafter that agrees (k=4), above its decodes' floor | free drafter vs greedy | "
             "suffix drafter (k=4, the continuation learnt), above its decodes' floor | suffix vs greedy |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for vocab, r in results.items():
        g, s = r["greedy"], r["sampled"]
        cells = [f"{vocab:,}-token vocabulary", f"{r['floor_us_per_token']:,.0f} us/token",
                 f"{g['over_floor_us_per_token']:+,.0f} us/token ({g['over_floor_range'][0]:,.0f} to {g['over_floor_range'][1]:,.0f})",
                 f"{s['over_floor_us_per_token']:+,.0f} us/token ({s['over_floor_range'][0]:,.0f} to {s['over_floor_range'][1]:,.0f}); "
                 f"nucleus {r['top_p_nucleus_share']:.0%} of the vocabulary"
                 + (f"; llama.cpp's own sampler chain {r['llama_cpp_sampler_over_floor_us_per_token']:+,.0f}"
                    if "llama_cpp_sampler_over_floor_us_per_token" in r else "")]
        for mode in SPECULATIVE:
            d = r.get(mode)
            if d is None:  # results written before the oracle mode existed
                cells += ["", ""]
                continue
            cells += [f"{d['over_floor_us_per_step']:+,.0f} us/step ({d['over_floor_range'][0]:,.0f} to {d['over_floor_range'][1]:,.0f}) "
                      f"for {d['drafted_per_step']:.1f} drafts/step; goal {d['goal_us_per_step']:,.0f}",
                      f"{d['speedup_vs_greedy']:.2f}x ({d['acceptance']:.0%} accepted)"
                      + (f"; the drafter itself {d['suffix_drafter_us_per_token']:,.0f} us/token"
                         if "suffix_drafter_us_per_token" in d else "")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.host_overhead", description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=300)
    ap.add_argument("--vocab", type=int, action="append", help=f"vocabulary sizes (default: {VOCABS})")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: the physical cores)")
    ap.add_argument("--gpu-layers", type=int, default=0,
                    help="layers llama.cpp offloads, floor and Tandem alike (-1: all; default 0, the CPU)")
    ap.add_argument("--json", type=Path, help="write the results here")
    a = ap.parse_args(argv)
    from engine.models.hardware import physical_cores

    threads = a.threads or physical_cores()
    results: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="tandem-host-") as tmp:
        paths = write_models(Path(tmp), tuple(a.vocab or VOCABS))
        for vocab, path in paths.items():
            print(f"{vocab}-token vocabulary:", file=sys.stderr)
            results[vocab] = measure(path, a.reps, a.tokens, threads, lambda s: print(s, file=sys.stderr), a.gpu_layers)
    print(table(results))
    if a.json:
        meta = {"reps": a.reps, "tokens": a.tokens, "threads": threads, "gpu_layers": a.gpu_layers, "k": K, "temperature": TEMPERATURE, "top_p": TOP_P}
        a.json.write_text(json.dumps({"settings": meta, "results": {str(k): v for k, v in results.items()}}, indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
