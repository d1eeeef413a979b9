"""Predict speculative speedups on a GPU from published verify curves and recorded drafts.

Greedy speculation writes exactly what the target alone writes, and a greedy draft model
proposes the same tokens whatever machine it runs on. So one recording on this CPU (what the
target writes for each suite prompt, and at every position what the draft proposes next,
with its confidence) lets the decoder's loop be replayed under any cost curve: Auto's real
policy (engine/decoding/drafting/lookahead.py `Auto`, cost_model.py) chooses k, gates the model draft
by confidence, trims lookup proposals, and every pass is priced by a published verify curve,
a draft-to-target cost ratio and the host overhead tools/host_overhead.py measured.

    python -m tools.draft_replay record --target T.gguf --draft D.gguf --out REC.jsonl
        [--set tuning|heldout|all] [--limit 2] [--max-tokens 96] [--depth 8]
    python -m tools.draft_replay predict --recording REC.jsonl [--curves tools/gpu_curves.json]
        [--host docs/host_overhead.json]

The result is a prediction, not a measurement: `packaging/gpu_bench.sh` measures on a GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from engine.decoding.drafting.cost_model import MAX_LOOKAHEAD, CostModel
from engine.decoding.drafting.lookahead import Auto
from tools.lookup_replay import Case, curve_function, replay as lookup_replay

CURVES = Path(__file__).resolve().parent / "gpu_curves.json"


@dataclass
class Recording:
    """One prompt: the target's greedy output and, per output position i, the draft's greedy
    proposal (tokens, confidences) after prompt + output[:i]."""

    suite: str
    prompt_id: str
    prompt: list[int]
    output: list[int]
    proposals: list[tuple[list[int], list[float]]]


# -- recording (on this machine, with the real pair) -------------------------------------------
def record_one(target_ctx, draft_ctx, prompt: list[int], max_tokens: int, depth: int) -> tuple[list[int], list]:
    """The target's greedy output, then the draft's proposal of `depth` tokens at each position.
    A proposal whose first token the target wrote carries on at the next position, so most
    positions cost one draft decode, not `depth`."""
    import numpy as np

    target_ctx.clear()
    logits = None
    for _, logits in target_ctx.feed(prompt, last_logits=True):
        pass
    out: list[int] = []
    model = target_ctx.model
    while len(out) < max_tokens:
        tok = int(np.argmax(logits[0]))
        if model.is_eog(tok):
            break
        out.append(tok)
        logits = target_ctx.decode([tok], logits="last")
    proposals: list = []
    chain: list[tuple[int, float]] = []
    for i in range(len(out)):
        context = prompt + out[:i]
        if chain and i > 0 and chain[0][0] == out[i - 1]:
            chain = chain[1:]  # the draft's cache holds context already: extend by one token
        else:
            chain = []
            draft_ctx.reuse_prefix(context)
            for _, row in draft_ctx.feed(context[draft_ctx.n_past:], last_logits=True):
                pass
            chain.append(_top(row[0]))
        while len(chain) < depth:
            row = draft_ctx.decode([chain[-1][0]], logits="last")
            chain.append(_top(row[0]))
        proposals.append(([t for t, _ in chain], [round(c, 4) for _, c in chain]))
        # keep the draft's cache equal to context + chain[:-1]: the next position reuses it
    return out, proposals


def _top(row) -> tuple[int, float]:
    """Greedy token and its probability (the confidence ModelDrafter reports)."""
    import numpy as np

    tok = int(np.argmax(row))
    return tok, float(1.0 / np.exp(row - row[tok]).sum())


def record(target: str, draft: str, out: Path, which: str, limit: int, max_tokens: int, depth: int,
           log: Callable[[str], None], suites: Sequence[str] = (), budget_s: float | None = None) -> int:
    """Record the prompts of `suites` (names; none given: the built-in set `which`), `limit` per
    suite; requests of runs by their place in the run first (every run's first request, then
    every run's second, ...), so a recording cut short still has the start of every run. No new
    prompt is started after `budget_s` seconds (a later call records the rest)."""
    import time

    from engine.decoding.engine import prompt_tokens
    from engine.llamacpp.llama import Model
    from engine.llamacpp.context import Context
    from engine.llamacpp.runtime import RuntimeParams
    from engine.measure.suites import builtin_suites, load_suite

    rt = RuntimeParams(n_ctx=4096)
    tm, dm = Model(target, runtime=rt), Model(draft, runtime=rt)
    tc, dc = Context(tm, rt), Context(dm, rt)
    done = {(r["suite"], r["id"]) for r in _read(out)} if out.exists() else set()
    work = [(p.request, i, name, p) for i, name in enumerate(suites or builtin_suites(which))
            for p in load_suite(name).prompts[:limit]]
    n, t0 = 0, time.monotonic()
    with out.open("a") as f:
        for _, _, name, p in sorted(work, key=lambda w: w[:2]):
            if (name, p.id) in done:
                continue
            if budget_s is not None and time.monotonic() - t0 > budget_s:
                break
            t = time.monotonic()
            prompt = prompt_tokens(tm, p.prompt, chat=p.chat)
            output, proposals = record_one(tc, dc, prompt, max_tokens, depth)
            f.write(json.dumps({"suite": name, "id": p.id, "prompt": prompt, "out": output, "proposals": proposals}) + "\n")
            f.flush()
            n += 1
            log(f"{name}/{p.id}: {len(prompt)} prompt tokens, {len(output)} written, {time.monotonic() - t:.0f} s")
    return n


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def load_recordings(path: Path) -> list[Recording]:
    return [Recording(r["suite"], r["id"], r["prompt"], r["out"], [(list(t), list(c)) for t, c in r["proposals"]])
            for r in _read(path)]


# -- replay (any machine, any curve) ------------------------------------------------------------
@dataclass
class Pricing:
    """What one step costs on a machine: a target pass over n tokens, a draft token, and the
    host work around them (per step, per drafted token, per plain token)."""

    verify_s: Callable[[int], float]
    draft_token_s: float
    host_step_s: float = 0.0
    host_draft_token_s: float = 0.0
    host_plain_s: float = 0.0

    def plain(self) -> float:
        return self.verify_s(1) + self.host_plain_s

    def step(self, verified: int, drafted_cost_tokens: int) -> float:
        """A step verifying `verified` drafts after drafting `drafted_cost_tokens` tokens."""
        if verified == 0 and drafted_cost_tokens == 0:
            return self.plain()
        return (self.verify_s(1 + verified) + drafted_cost_tokens * self.draft_token_s
                + self.host_step_s + self.host_draft_token_s * verified)


@dataclass
class Predicted:
    rec: Recording
    steps: int
    drafted: int
    accepted: int
    decode_s: float
    target_s: float
    prefill_s: float

    @property
    def wall_speedup(self) -> float:
        return (self.prefill_s + self.target_s) / (self.prefill_s + self.decode_s)


def prefill_seconds(rec: Recording, price: Pricing) -> float:
    """The prompt's pass, priced at the curve's widest measured rate (per token of 8)."""
    return len(rec.prompt) * price.verify_s(8) / 8


def replay_model_draft(recs: Sequence[Recording], price: Pricing) -> list[Predicted]:
    """The decoder's loop with a model drafter under Auto: `choose` picks k from the cost model
    (fed the curve as measured, as a calibrated store gives it), the confidence gate stops the draft,
    and costs, acceptance and confidences are observed after every step as `Decoder.step` does."""
    cost = CostModel()
    cost.free_drafter = False
    for n in range(1, MAX_LOOKAHEAD + 2):
        cost.observe_verify(n, price.verify_s(n) + (price.host_step_s + price.host_draft_token_s * (n - 1) if n > 1 else price.host_plain_s))
    cost.draft_ratio_prior = price.draft_token_s / price.verify_s(1)
    out: list[Predicted] = []
    for rec in recs:
        auto, truth = Auto(), rec.output
        i, steps, drafted, accepted, spent = 1, 0, 0, 0, 0.0  # output[0] comes from the prompt's pass
        while i < len(truth):
            k_req = auto.choose(len(truth) - i - 1, cost)
            drafts, conf, examined = _gated(rec.proposals[i], k_req, auto.gate(cost) if k_req else None)
            acc = 0
            for d, t in zip(drafts, truth[i:]):
                if d != t:
                    break
                acc += 1
            seconds = price.step(len(drafts), examined)
            cost.observe_verify(1 + len(drafts), seconds - examined * price.draft_token_s)
            if drafts:
                cost.observe_draft(examined, examined * price.draft_token_s)
                cost.observe_acceptance(len(drafts), acc, conf)
            auto.feedback(len(drafts), acc)
            spent += seconds
            steps += 1
            drafted += len(drafts)
            accepted += acc
            i += acc + 1
        out.append(Predicted(rec, steps, drafted, accepted, spent, (len(truth) - 1) * price.plain(), prefill_seconds(rec, price)))
    return out


def _gated(proposal: tuple[list[int], list[float]], k: int, gate) -> tuple[list[int], list[float], int]:
    """What ModelDrafter.propose returns for this recorded proposal under Auto's gate, and how
    many draft tokens it computed (the one the gate refused was computed too)."""
    tokens, confs = proposal
    kept: list[int] = []
    kc: list[float] = []
    examined = 0
    for j in range(min(k, len(tokens))):
        examined += 1
        keep, more = gate(j + 1, confs[j]) if gate is not None else (True, True)
        if not keep:
            break
        kept.append(tokens[j])
        kc.append(confs[j])
        if not more:
            break
    return kept, kc, examined


def replay_lookup(recs: Sequence[Recording], price: Pricing) -> list[Predicted]:
    """Prompt lookup under Auto (tools/lookup_replay.py's loop), host costs folded into each pass."""
    def pass_s(n: int) -> float:
        return price.step(n - 1, 0)

    cases = [Case(r.suite, r.prompt_id, r.prompt, r.output, 0.0) for r in recs]
    res = lookup_replay(cases, pass_s)
    return [Predicted(r, x.steps, x.drafted, x.accepted, x.decode_s, (len(r.output) - 1) * price.plain(),
                      prefill_seconds(r, price)) for r, x in zip(recs, res)]


def pricing_for(curve: dict, host: dict | None) -> Pricing:
    """A published curve (ms per pass over n tokens) with its draft ratio, plus measured host
    overhead (tools/host_overhead.py JSON, the 151,936-token vocabulary: Qwen's)."""
    verify = curve_function({int(n): ms / 1000.0 for n, ms in curve["ms_per_pass"].items()})
    p = Pricing(verify, curve["draft_ratio"] * verify(1))
    if host:  # measured at k=4: charged to every speculative step, whatever its k
        r = host["results"]["151936"]
        p.host_plain_s = max(0.0, r["greedy"]["over_floor_us_per_token"]) / 1e6
        p.host_step_s = max(0.0, r["selfdraft"]["over_floor_us_per_step"]) / 1e6
    return p


def curve_from_probe(probe: dict, stem: str) -> tuple[str, dict]:
    """A curve measured by tools/gpu_probe.py (verify passes of n tokens, the draft model's
    one-token step over the target's) in the form of tools/gpu_curves.json."""
    verify = {int(n): float(s) * 1000.0 for n, s in probe["verify_s"].items()}
    where = probe.get("hardware") or stem  # engine.models.hardware's one-line summary
    return f"measured:{stem}", {
        "source": f"tools/gpu_probe.py on {where}: {probe['target']} / {probe['draft']}",
        "ms_per_pass": {str(n): ms for n, ms in sorted(verify.items())},
        "draft_ratio": float(probe["draft_cost_ratio"]),
    }


def table(recs: Sequence[Recording], curves: dict, host: dict | None) -> str:
    lines = ["| suite | prompts | " + " | ".join(f"{name}: lookup | {name}: model draft" for name in curves) + " |",
             "|---|---|" + "---|---|" * len(curves)]
    results = {name: (replay_lookup(recs, pricing_for(c, host)), replay_model_draft(recs, pricing_for(c, host)))
               for name, c in curves.items()}
    suites = list(dict.fromkeys(r.suite for r in recs))
    for suite in suites + ["all"]:
        cells = []
        for name in curves:
            for res in results[name]:
                rs = [p for p in res if suite in ("all", p.rec.suite)]
                acc = sum(p.accepted for p in rs) / max(1, sum(p.drafted for p in rs))
                cells.append(f"{statistics.median(p.wall_speedup for p in rs):.2f}x ({acc:.0%} of {sum(p.drafted for p in rs)})")
        n = sum(1 for r in recs if suite in ("all", r.suite))
        lines.append(f"| {suite} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.draft_replay", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="record target outputs and draft proposals on this machine")
    r.add_argument("--target", required=True)
    r.add_argument("--draft", required=True)
    r.add_argument("--out", type=Path, required=True, help="JSON lines; prompts already in it are skipped")
    r.add_argument("--set", dest="which", choices=("tuning", "heldout", "all"), default="all")
    r.add_argument("--suite", action="append", default=[], help="a suite by name (repeatable): these instead of --set")
    r.add_argument("--limit", type=int, default=2, help="prompts per suite")
    r.add_argument("--max-tokens", type=int, default=96)
    r.add_argument("--depth", type=int, default=8, help="draft tokens recorded per position")
    r.add_argument("--budget-s", type=float, help="start no new prompt after this many seconds")
    p = sub.add_parser("predict", help="replay recordings under published curves")
    p.add_argument("--recording", type=Path, required=True)
    p.add_argument("--curves", type=Path, default=CURVES)
    p.add_argument("--probe", type=Path, action="append", default=[],
                   help="tools/gpu_probe.py --out JSON: its measured curve and draft ratio, priced beside --curves")
    p.add_argument("--only-probes", action="store_true", help="price with the --probe curves alone")
    p.add_argument("--host", type=Path, help="tools/host_overhead.py --json output: host work added to every step")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "record":
            record(a.target, a.draft, a.out, a.which, a.limit, a.max_tokens, a.depth, lambda s: print(s, file=sys.stderr),
                   a.suite, a.budget_s)
            return 0
        recs = load_recordings(a.recording)
        curves = {} if a.only_probes else {k: v for k, v in json.loads(a.curves.read_text()).items() if not k.startswith("_")}
        for path in a.probe:
            name, curve = curve_from_probe(json.loads(path.read_text()), path.stem)
            curves[name] = curve
        host = json.loads(a.host.read_text()) if a.host else None
        print(table(recs, curves, host))
    except (OSError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
