"""PREDICTED aggregate throughput of parallel slots with prompt lookup, per verify curve: no
draft, Auto blind to the load (each slot trims as if alone and learns one slot's rows at the
shared pass's time: Tandem before the batch-aware Auto) and Auto that knows the load.

    python -m tools.slots_prediction --target TARGET.gguf --runs RUNS.jsonl [--slots 1,2,4,8]
        [--curve CURVE.json ...] [--markdown]

Greedy speculation writes exactly what the target alone writes, so a policy's steps follow from
recorded target-alone outputs (`tandem bench --modes target` runs, as `tools/lookup_replay.py`
replays them one at a time). Here N slots replay the cases side by side with continuous
batching (a slot takes the next case when its own ends), and every step is one pass over all
the slots' rows, priced by a verify curve: the published GPU curves of `tools/gpu_curves.json`
(each cites its source; passes wider than a curve's largest size are priced by its last slope,
which overprices them against published wider passes) and any measured curve given. The
policies are Tandem's own classes (`Auto`, `CostModel`, `BatchLoad`, `PromptLookupDrafter`);
prompt reading is left out (decode only). These are PREDICTIONS, not measurements.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from engine.decoding.drafting.cost_model import BatchLoad, TextAcceptance, expected_tokens
from engine.decoding.drafting.drafters import DraftContext
from engine.decoding.drafting.lookahead import Auto
from engine.decoding.drafting.lookup_drafter import PromptLookupDrafter
from engine.decoding.sampling.sampler import Sampler

from .lookup_replay import Case, accepted_prefix, curve_function, free_drafter_cost, load_cases

CURVES = Path(__file__).with_name("gpu_curves.json")
POLICIES = ("none", "blind", "load")  # no draft; Auto per slot as if alone; Auto that knows the load


@dataclass
class _Slot:
    case: Case
    drafter: PromptLookupDrafter
    auto: Auto
    text: TextAcceptance
    written: list[int]


@dataclass(frozen=True)
class Outcome:
    slots: int
    policy: str
    tokens: int
    seconds: float
    passes: int
    drafted: int
    accepted: int

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def simulate(cases: Sequence[Case], n_slots: int, policy: str, verify_s: Callable[[int], float]) -> Outcome:
    """Every case once, `n_slots` at a time, each step one pass over every running slot's rows."""
    cost = free_drafter_cost(verify_s)  # what a process learns before: lone passes
    sampler, trimmed = Sampler(), DraftContext(trimmed_by_caller=True)
    todo, running = deque(cases), []
    tokens = passes = drafted = accepted = 0
    seconds = 0.0
    while todo or running:
        while todo and len(running) < n_slots:
            case = todo.popleft()
            d = PromptLookupDrafter()
            d.begin(case.prompt)
            running.append(_Slot(case, d, Auto(), TextAcceptance(cost), case.output[:1]))
            tokens += 1  # the first token comes with the prompt's pass (not priced here)
        plans: list[tuple[_Slot, list[int], object]] = []
        rows = expected = 0.0
        for i, s in enumerate(running):
            later = len(running) - i - 1
            truth, at = s.case.output, len(s.written)
            drafts: list[int] = []
            full = None
            if policy != "none" and len(truth) - at - 1 > 0:
                room = len(truth) - at - 1
                load = BatchLoad(int(rows) + later, expected + later) if policy == "load" else BatchLoad()
                with cost.loaded(load):
                    k_req = s.auto.choose(room, cost)
                    if k_req > 0:
                        full = s.drafter.propose(s.case.prompt + s.written, k_req, sampler, trimmed)
                        drafts = full.cut(s.auto.trim(full, cost, s.text)).tokens
            rows += 1 + len(drafts)
            p = s.auto.last_prediction
            expected += 1.0 if not drafts else (p.tokens_per_step if p is not None and p.k == len(drafts)
                                                else expected_tokens(len(drafts), cost.alpha))
            plans.append((s, drafts, full))
        t = verify_s(int(rows))
        seconds += t
        passes += 1
        if policy == "load":
            cost.observe_verify(int(rows), t)
        for s, drafts, full in plans:
            if policy == "blind":
                cost.observe_verify(1 + len(drafts), t)  # one slot's rows at the shared pass's time
            truth, at = s.case.output, len(s.written)
            acc = accepted_prefix(drafts, truth[at:])
            nxt = truth[at + acc] if at + acc < len(truth) else None
            if drafts:
                cost.observe_acceptance(len(drafts), acc, full.confidence)  # type: ignore[union-attr]
                s.drafter.feedback(len(drafts), acc)
            s.text.observe_step(full, len(drafts), acc, nxt)
            s.auto.feedback(len(drafts), acc)
            new = truth[at:at + acc] + ([nxt] if nxt is not None else [])
            s.written += new
            tokens += len(new)
            drafted += len(drafts)
            accepted += acc
        running = [s for s in running if len(s.written) < len(s.case.output)]
    return Outcome(n_slots, policy, tokens, seconds, passes, drafted, accepted)


def load_curves(paths: Sequence[Path]) -> dict[str, tuple[str, Callable[[int], float]]]:
    """Name -> (source, seconds per pass over n rows): the published GPU curves and the given ones."""
    out = {}
    for name, entry in json.loads(CURVES.read_text()).items():
        if not name.startswith("_"):
            out[name] = (entry["source"], curve_function({int(n): ms / 1000 for n, ms in entry["ms_per_pass"].items()}))
    for p in paths:
        out[p.stem] = (f"measured here ({p})", curve_function({int(n): float(t) for n, t in json.loads(p.read_text()).items()}))
    return out


def table(results: dict[str, list[Outcome]]) -> str:
    lines = ["| curve | slots | no draft tok/s | Auto blind to the load | Auto that knows the load | accepted / drafted (knows) |",
             "|---|---|---|---|---|---|"]
    for curve, outs in results.items():
        by = {(o.slots, o.policy): o for o in outs}
        for n in sorted({o.slots for o in outs}):
            none, blind, load = by[(n, "none")], by[(n, "blind")], by[(n, "load")]
            lines.append(f"| {curve} | {n} | {none.rate:.1f} | {blind.rate / none.rate:.2f}x | {load.rate / none.rate:.2f}x | "
                         f"{load.accepted} / {load.drafted} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.slots_prediction", description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True, help="the target GGUF the runs were recorded with (its tokenizer)")
    ap.add_argument("--runs", type=Path, required=True, help="a tandem bench runs.jsonl with target-alone runs")
    ap.add_argument("--slots", default="1,2,4,8")
    ap.add_argument("--curve", type=Path, action="append", default=[], help="JSON {n: seconds}, measured (repeatable)")
    ap.add_argument("--set", dest="which", choices=("tuning", "heldout", "all"), default="all")
    a = ap.parse_args(argv)
    from engine.decoding.engine import prompt_tokens
    from engine.llamacpp.llama import Model

    model = Model(str(a.target), vocab_only=True)
    cases = load_cases(a.runs, lambda prompt, chat: prompt_tokens(model, prompt, chat=chat), a.which)
    if not cases:
        print(f"error: no target-alone runs with tokens in {a.runs}", file=sys.stderr)
        return 2
    curves = load_curves(a.curve)
    results: dict[str, list[Outcome]] = {}
    for name, (_, verify_s) in curves.items():
        results[name] = [simulate(cases, int(n), p, verify_s) for n in a.slots.split(",") for p in POLICIES]
    print(f"PREDICTED from {len(cases)} recorded target-alone outputs ({a.runs}), decode only\n")
    print(table(results))
    print("\nCurves:\n" + "\n".join(f"- {name}: {src}" for name, (src, _) in curves.items()))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
