"""Replay recorded target outputs through prompt lookup and Auto, priced by a measured curve.

Greedy speculation writes exactly what target alone writes, so what a lookup policy would
have cost on a prompt follows from the target's recorded output alone: at every step, what
the drafter proposes, how much of it Auto verifies, how much of that the recorded output
confirms, and the measured cost of a target pass over that many tokens. That makes a policy
change measurable on every prompt of every suite in seconds and without this machine's
±6 % run-to-run noise; `tandem bench` remains the measurement of record (real passes, real
wall-clock), and a replay only predicts it.

    python -m tools.lookup_replay --target T.gguf --runs RUNS.jsonl [--curve CURVE.json]
        [--calibration calibration.json] [--set tuning|heldout|all] [--verbose]

RUNS.jsonl is a `tandem bench` output with target-alone runs (`--modes target` is enough);
CURVE.json maps a pass size n to its milliseconds (`--measure-curve` writes one).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from engine.decoding.drafting.drafters import DraftContext
from engine.decoding.drafting.lookup_drafter import PromptLookupDrafter
from engine.errors import TandemError
from engine.decoding.drafting.cost_model import CostModel, TextAcceptance
from engine.decoding.drafting.lookahead import MAX_LOOKAHEAD, Auto
from engine.llamacpp.runtime import RuntimeParams
from engine.decoding.sampling.sampler import Sampler


@dataclass
class Case:
    """One recorded target-alone generation."""

    suite: str
    prompt_id: str
    prompt: list[int]
    output: list[int]
    prefill_s: float  # its time to first token: wall-clock = prefill + decode


@dataclass
class Replayed:
    case: Case
    steps: int
    drafted: int
    accepted: int
    decode_s: float  # what the policy's passes cost
    target_decode_s: float  # one pass per token, as target alone

    @property
    def decode_ratio(self) -> float:
        return self.target_decode_s / self.decode_s if self.decode_s > 0 else 1.0

    @property
    def wall_ratio(self) -> float:
        return (self.case.prefill_s + self.target_decode_s) / (self.case.prefill_s + self.decode_s)


def curve_function(curve: dict[int, float]) -> Callable[[int], float]:
    """Seconds for a pass over n tokens from measured sizes (linear between them, the last
    slope beyond)."""
    if 1 not in curve or any(n < 1 or t <= 0 for n, t in curve.items()):
        raise ValueError("the verify curve needs positive times, one of them for a pass over 1 token")
    costs = CostModel()
    for n, t in curve.items():
        costs.observe_verify(int(n), float(t))
    table = {n: costs.verify_time(n) for n in range(1, MAX_LOOKAHEAD + 2)}
    return lambda n: table[n] if n in table else costs.verify_time(n)


def free_drafter_cost(verify_s: Callable[[int], float]) -> CostModel:
    """A free drafter's cost model that has timed every pass Auto may ask for on the curve."""
    cost = CostModel()
    cost.free_drafter = True
    for n in range(1, MAX_LOOKAHEAD + 2):
        cost.observe_verify(n, verify_s(n))
    return cost


def accepted_prefix(drafts: Sequence[int], truth: Sequence[int]) -> int:
    """How many drafts the recorded output confirms, from the first: greedy verification's verdict."""
    acc = 0
    for d, t in zip(drafts, truth):
        if d != t:
            break
        acc += 1
    return acc


def replay(cases: Sequence[Case], verify_s: Callable[[int], float], *, confidence: dict | None = None,
           on_step: Callable[[Case, int, int, int], None] | None = None) -> list[Replayed]:
    """Run the decoder's loop for a free drafter under Auto over every case, in order, with
    one cost model (as one process would: what one text teaches carries to the next)."""
    cost = free_drafter_cost(verify_s)
    if confidence:
        cost.import_confidence(confidence)
    sampler = Sampler()
    trimmed = DraftContext(trimmed_by_caller=True)  # Auto trims: the drafter proposes all it has
    out: list[Replayed] = []
    for case in cases:
        drafter = PromptLookupDrafter()
        drafter.begin(case.prompt)
        auto, text = Auto(), TextAcceptance(cost)
        truth = case.output
        written = truth[:1]  # the first token comes from the prompt's pass
        steps = drafted = accepted = 0
        spent = 0.0
        while len(written) < len(truth):
            i = len(written)
            k_req = auto.choose(len(truth) - i - 1, cost)
            full = drafter.propose(case.prompt + written, k_req, sampler, trimmed) if k_req > 0 else None
            k = auto.trim(full, cost, text) if full is not None else 0
            prop = full.cut(k) if full is not None else None
            drafts = prop.tokens if prop is not None else []
            acc = accepted_prefix(drafts, truth[i:])
            nxt = truth[i + acc] if i + acc < len(truth) else None
            seconds = verify_s(1 + len(drafts))
            cost.observe_verify(1 + len(drafts), seconds)
            spent += seconds
            if drafts:
                assert prop is not None
                cost.observe_acceptance(len(drafts), acc, prop.confidence)
                drafter.feedback(len(drafts), acc)
            text.observe_step(full, len(drafts), acc, nxt)
            auto.feedback(len(drafts), acc)
            if on_step is not None:
                on_step(case, i, len(drafts), acc)
            steps += 1
            drafted += len(drafts)
            accepted += acc
            written += truth[i : i + acc] + ([nxt] if nxt is not None else [])
        out.append(Replayed(case, steps, drafted, accepted, spent, (len(truth) - 1) * verify_s(1)))
    return out


def load_cases(runs: Path, tokens_for: Callable[[object, bool], list[int]], which: str = "all") -> list[Case]:
    """Target-alone runs of a `tandem bench` output (the first repetition of each prompt)."""
    from engine.measure.suites import HELDOUT, load_suite

    suites: dict = {}
    cases: list[Case] = []
    seen: set[tuple[str, str]] = set()
    for line in runs.read_text().splitlines():
        r = json.loads(line)
        key = (r["suite"], r["prompt_id"])
        if r.get("mode") != "target" or not r.get("tokens") or key in seen:
            continue
        held = r["suite"].startswith(HELDOUT + "/")
        if (which == "tuning" and held) or (which == HELDOUT and not held):
            continue
        seen.add(key)
        suite = suites.get(r["suite"]) or suites.setdefault(r["suite"], load_suite(r["suite"]))
        prompt = {p.id: p for p in suite.prompts}[r["prompt_id"]]
        cases.append(Case(r["suite"], r["prompt_id"], tokens_for(prompt.prompt, prompt.chat), list(r["tokens"]),
                          float(r["time_to_first_token_s"])))
    return cases


def summary(results: Sequence[Replayed]) -> str:
    """Per suite: median and minimum wall-clock ratio, median decode ratio, acceptance."""
    by: dict[str, list[Replayed]] = {}
    for r in results:
        by.setdefault(r.case.suite, []).append(r)
    lines = ["| suite | prompts | wall-clock, median (min) | decode, median | accepted / drafted |", "|---|---|---|---|---|"]
    for suite, rs in by.items():
        walls = [r.wall_ratio for r in rs]
        lines.append(f"| {suite} | {len(rs)} | {statistics.median(walls):.3f}x ({min(walls):.3f}) | "
                     f"{statistics.median(r.decode_ratio for r in rs):.3f}x | "
                     f"{sum(r.accepted for r in rs)} / {sum(r.drafted for r in rs)} |")
    return "\n".join(lines)


def measure_curve(target: str, sizes: Sequence[int] = range(1, MAX_LOOKAHEAD + 2), repeat: int = 5,
                  context: int = 400) -> dict[int, float]:
    """Median seconds of one target pass over n tokens (logits for every row, as verification
    needs), sizes interleaved per repetition, after `context` tokens of context."""
    from engine.llamacpp.llama import Model
    from engine.llamacpp.context import Context

    model = Model(target)
    ctx = Context(model, RuntimeParams(n_ctx=context + MAX_LOOKAHEAD + 8))
    try:
        filler = [(1000 + i) % model.n_vocab for i in range(context)]
        for _ in ctx.feed(filler):
            pass
        samples: dict[int, list[float]] = {n: [] for n in sizes}
        for _ in range(repeat):
            for n in sizes:
                base = ctx.n_past
                t = time.perf_counter()
                ctx.decode([filler[-1]] * n, logits="all")
                samples[n].append(time.perf_counter() - t)
                ctx.truncate(base)
        return {n: statistics.median(v) for n, v in samples.items()}
    finally:
        ctx.close()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.lookup_replay", description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True, help="the target GGUF the runs were recorded with (its tokenizer)")
    ap.add_argument("--runs", type=Path, help="a tandem bench runs.jsonl with target-alone runs")
    ap.add_argument("--curve", type=Path, help="JSON {n: seconds} of one pass over n tokens")
    ap.add_argument("--measure-curve", type=Path, metavar="OUT", help="measure the curve on this machine and write it here")
    ap.add_argument("--calibration", type=Path, help="a calibration.json whose stored lookup confidences seed Auto")
    ap.add_argument("--set", dest="which", choices=("tuning", "heldout", "all"), default="all")
    ap.add_argument("--verbose", action="store_true", help="one line per prompt")
    ap.add_argument("--dump-cases", type=Path, metavar="OUT",
                    help="also write the cases (prompt and output token ids, time to first token) as JSON, for other replays")
    a = ap.parse_args(argv)
    try:
        if a.measure_curve:
            curve = measure_curve(a.target)
            a.measure_curve.write_text(json.dumps({str(n): t for n, t in curve.items()}, indent=1))
            print(" ".join(f"{n}:{t * 1000:.0f}ms" for n, t in curve.items()))
            if not a.runs:
                return 0
        if not a.runs or not (a.curve or a.measure_curve):
            ap.error("--runs and a curve (--curve or --measure-curve) are needed to replay")
        curve_path = a.curve or a.measure_curve
        verify_s = curve_function({int(n): float(t) for n, t in json.loads(curve_path.read_text()).items()})
        confidence = None
        if a.calibration:
            stored = json.loads(a.calibration.read_text())
            name = PromptLookupDrafter.calibration_name
            confidence = next((v for k, v in stored.items() if k.startswith("confidence|") and k.endswith("|" + name)), None)
        from engine.decoding.engine import prompt_tokens
        from engine.llamacpp.llama import Model

        model = Model(a.target, vocab_only=True)
        cases = load_cases(a.runs, lambda prompt, chat: prompt_tokens(model, prompt, chat=chat), a.which)
        if not cases:
            print(f"error: no target-alone runs with tokens in {a.runs}", file=sys.stderr)
            return 2
        if a.dump_cases:
            a.dump_cases.write_text(json.dumps([{"suite": c.suite, "id": c.prompt_id, "prompt": c.prompt, "out": c.output,
                                                 "ttft": c.prefill_s} for c in cases]))
        results = replay(cases, verify_s, confidence=confidence)
    except (OSError, ValueError, KeyError, TandemError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.verbose:
        for r in results:
            print(f"{r.case.suite}/{r.case.prompt_id}: wall {r.wall_ratio:.3f}x decode {r.decode_ratio:.3f}x "
                  f"accepted {r.accepted}/{r.drafted} in {r.steps} steps")
    print(summary(results))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
