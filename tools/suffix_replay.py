"""Predict GPU speedups on runs of several requests (the agent_runs suites) for every drafter:
none, prompt lookup, the suffix draft, the model draft, and Auto's choice among them per step.

A recording of tools/draft_replay.py (the target's greedy output per request and the model
draft's proposal at every position, made on this CPU: greedy output and greedy drafts are the
same on any machine) is replayed through the decoder's own step: Auto's `choose`, its gate,
trim and source chooser, the real drafters (PromptLookupDrafter, SuffixDrafter, MixedDrafter;
the model draft answers from the recording), every pass priced by a published verify curve
(tools/gpu_curves.json) plus the host work tools/host_overhead.py measured. The suffix draft's
memory of past answers starts empty at each run, as in `tandem bench`. A prediction, not a
measurement.

    python -m tools.draft_replay record --target T.gguf --draft D.gguf --out REC.jsonl \\
        --suite agent_runs --suite heldout/agent_runs --limit 100
    python -m tools.suffix_replay --recording REC.jsonl [--curves tools/gpu_curves.json] [--host HOST.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from engine.decoding.drafting.cost_model import MAX_LOOKAHEAD, CostModel, TextAcceptance
from engine.decoding.drafting.draft_context import DraftContext
from engine.decoding.drafting.drafters import Drafter, Proposal
from engine.decoding.drafting.lookup_drafter import PromptLookupDrafter
from engine.decoding.drafting.lookahead import Auto
from engine.decoding.drafting.mixed_drafter import MixedDrafter
from engine.decoding.drafting.suffix_drafter import SuffixDrafter
from engine.decoding.sampling.sampler import Sampler
from tools.draft_replay import CURVES, Pricing, Recording, load_recordings, prefill_seconds, pricing_for

DRAFTERS = ("lookup", "suffix", "model", "auto mix")


class RecordedModel(Drafter):
    """The model draft, answering from a recording: its greedy proposal at this position, stopped
    by Auto's gate as ModelDrafter stops it. `examined`: draft tokens computed (paid for)."""

    kind = "model"
    cost_class = "model"

    def __init__(self) -> None:
        self.rec: Recording | None = None
        self.examined = 0

    def propose(self, context: Sequence[int], k: int, sampler: Sampler, rules: DraftContext = DraftContext()) -> Proposal:
        assert self.rec is not None
        tokens, confs = self.rec.proposals[len(context) - len(self.rec.prompt)]
        out = Proposal(confidence=[])
        gate = rules.confidence_gate
        for j in range(min(k, len(tokens))):
            self.examined += 1
            keep, more = gate(j + 1, confs[j]) if gate is not None else (True, True)
            if not keep:
                break
            out.tokens.append(tokens[j])
            out.dists.append(None)
            out.confidence.append(confs[j])  # type: ignore[union-attr]
            if not more:
                break
        return out

    def measure(self, cost: CostModel, proposal: Proposal, accepted: int, seconds: float) -> None:
        """As a model draft is measured, its time spread over the tokens it computed (`examined`)."""
        cost.observe_draft(self.examined, seconds)
        cost.observe_acceptance(len(proposal.tokens), accepted, proposal.confidence)


@dataclass
class RequestResult:
    rec: Recording
    request: int  # its place in its run, from 1
    spec_s: float  # prefill + the replayed steps
    target_s: float  # prefill + one plain pass per token
    drafted: int = 0
    accepted_by: dict[str, int] = field(default_factory=dict)


def run_of(rec: Recording) -> tuple[str, int]:
    """(run id, place in the run) of a request id "RUN/N" (a lone prompt: a run of one)."""
    run, _, n = rec.prompt_id.rpartition("/")
    return (f"{rec.suite}:{run}", int(n)) if run and n.isdigit() else (f"{rec.suite}:{rec.prompt_id}", 1)


def in_run_order(recs: Sequence[Recording]) -> list[Recording]:
    """The requests run by run, each run in order (a recording may hold them by place in the run)."""
    first: dict[str, int] = {}
    for i, r in enumerate(recs):
        first.setdefault(run_of(r)[0], i)
    return sorted(recs, key=lambda r: (first[run_of(r)[0]], run_of(r)[1]))


def _cost(price: Pricing, free: bool) -> CostModel:
    """A cost model that knows the curve already (as a calibrated store gives a process)."""
    cost = CostModel()
    cost.free_drafter = free
    for n in range(1, MAX_LOOKAHEAD + 2):
        cost.observe_verify(n, price.step(n - 1, 0))
    cost.draft_ratio_prior = price.draft_token_s / price.verify_s(1)
    return cost


def replay(recs: Sequence[Recording], price: Pricing, which: str) -> list[RequestResult]:
    """Every request of `recs`, in order, with drafter `which` (one of DRAFTERS, or "none")
    under Auto; one cost model for all (one process), the suffix draft's memory per run."""
    model = RecordedModel()
    cost = _cost(price, which in ("lookup", "suffix"))
    out: list[RequestResult] = []
    drafter: Drafter | None = None
    current = None
    for rec in in_run_order(recs):
        run, place = run_of(rec)
        if run != current:
            current, drafter = run, _drafter(which, model, drafter)
        model.rec = rec
        res = _request(rec, drafter, model, cost, price)
        res.request = place
        out.append(res)
        if drafter is not None:
            drafter.finish(rec.prompt, rec.output)
    return out


def _drafter(which: str, model: RecordedModel, last: Drafter | None) -> Drafter | None:
    """The drafter for a new run: the suffix draft's memory starts empty (the mix keeps what
    it measured of each source, as an engine does)."""
    if which == "none":
        return None
    if which == "lookup":
        return PromptLookupDrafter()
    if which == "suffix":
        return SuffixDrafter()
    if which == "model":
        return model
    if which == "auto mix":
        if isinstance(last, MixedDrafter):
            last.suffix = SuffixDrafter(with_lookup=False)
            return last
        return MixedDrafter(model, SuffixDrafter(with_lookup=False))
    raise ValueError(f"unknown drafter {which!r}: none, {', '.join(DRAFTERS)}")


def _request(rec: Recording, drafter: Drafter | None, model: RecordedModel, cost: CostModel,
             price: Pricing) -> RequestResult:
    """One request through Decoder.step's logic; the first token comes from the prompt's pass."""
    prefill = prefill_seconds(rec, price)
    res = RequestResult(rec, 1, prefill, prefill + (len(rec.output) - 1) * price.plain())
    if drafter is not None:
        drafter.begin(rec.prompt)
    auto, text, truth, sampler = Auto(), TextAcceptance(cost), rec.output, Sampler()
    i = 1
    while i < len(truth):
        room = len(truth) - i - 1
        k_req = auto.choose(room, cost) if drafter is not None else 0
        prop = offered = Proposal()
        model.examined = 0
        if drafter is not None and drafter.wants_proposal(k_req, room, auto):
            rules = DraftContext(auto.gate(cost) if drafter.cost_class == "model" else None, True, None, None,
                                 auto, cost, room)
            offered = drafter.propose([*rec.prompt, *truth[:i]], k_req, sampler, rules)
            asked = offered.asked if offered.asked is not None else k_req
            prop = offered.cut(auto.verify_count(offered, asked, cost, text))
        drafts = prop.tokens
        acc = 0
        for d, t in zip(drafts, truth[i:]):
            if d != t:
                break
            acc += 1
        paid = model.examined  # only a model draft computes (and pays for) tokens
        seconds = price.step(len(drafts), paid)
        cost.observe_verify(1 + len(drafts), seconds - paid * price.draft_token_s)
        if drafts:
            assert drafter is not None
            drafter.measure(cost, prop, acc, paid * price.draft_token_s)
            drafter.feedback(len(drafts), acc)
            src = prop.source or drafter.kind
            res.accepted_by[src] = res.accepted_by.get(src, 0) + acc
        nxt = truth[i + acc] if i + acc < len(truth) else None
        text.observe_step(offered, len(drafts), acc, nxt)
        res.spec_s += seconds
        res.drafted += len(drafts)
        i += acc + 1
    return res


def speedup(rows: Sequence[RequestResult]) -> float:
    """Target-alone time over speculative time, summed over the requests (wall-clock)."""
    spec = sum(r.spec_s for r in rows)
    return sum(r.target_s for r in rows) / spec if spec > 0 else 1.0


def table(recs: Sequence[Recording], curves: dict, host: dict | None) -> str:
    """Per curve and suite: each drafter's predicted wall-clock speedup over all requests and over
    requests 3+ of each run, and where the mix's accepted tokens came from."""
    lines = ["| curve | suite | requests (3+) | none | " + " | ".join(DRAFTERS) + " | auto mix: accepted from |",
             "|---|---|---|---|" + "---|" * len(DRAFTERS) + "---|"]
    for name, curve in curves.items():
        price = pricing_for(curve, host)
        results = {d: replay(recs, price, d) for d in ("none", *DRAFTERS)}
        for suite in dict.fromkeys(r.suite for r in recs):
            cells = []
            for d in ("none", *DRAFTERS):
                rows = [r for r in results[d] if r.rec.suite == suite]
                later = [r for r in rows if r.request >= 3]
                cells.append(f"{speedup(rows):.2f}x / " + (f"{speedup(later):.2f}x" if later else "–"))
            by: dict[str, int] = {}
            for r in results["auto mix"]:
                if r.rec.suite == suite:
                    for src, n in r.accepted_by.items():
                        by[src] = by.get(src, 0) + n
            n = sum(1 for r in recs if r.suite == suite)
            n3 = sum(1 for r in results["none"] if r.rec.suite == suite and r.request >= 3)
            src = ", ".join(f"{s} {k}" for s, k in sorted(by.items(), key=lambda kv: -kv[1])) or "–"
            lines.append(f"| {name} | {suite} | {n} ({n3}) | " + " | ".join(cells) + f" | {src} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.suffix_replay", description=__doc__.split("\n\n")[0])
    ap.add_argument("--recording", type=Path, required=True, help="tools/draft_replay.py record output")
    ap.add_argument("--curves", type=Path, default=CURVES)
    ap.add_argument("--host", type=Path, help="tools/host_overhead.py --json output: host work added to every step")
    a = ap.parse_args(argv)
    try:
        recs = load_recordings(a.recording)
        curves = {k: v for k, v in json.loads(a.curves.read_text()).items() if not k.startswith("_")}
        host = json.loads(a.host.read_text()) if a.host else None
        out(table(recs, curves, host))
    except (OSError, ValueError, KeyError, IndexError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
