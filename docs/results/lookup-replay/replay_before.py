"""The replay loop of engine/lookup_replay.py for the engine before the change (4b60211:
`Auto.trim(proposal, cost)`, no per-text acceptance), to compare both on the same data.

usage: replay_before.py OLD_CHECKOUT CASES.json CURVE.json [CALIBRATION.json] [tuning|heldout]
CASES.json: written by `python -m engine.lookup_replay ... --dump-cases CASES.json` (prompt and
output token ids and time to first token of each target-alone run).
"""
import json, statistics, sys

old, cases_path, curve_path = sys.argv[1:4]
calibration = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4].endswith(".json") else None
which = sys.argv[-1] if sys.argv[-1] in ("tuning", "heldout") else "all"
sys.path.insert(0, old)
from engine.drafters import PromptLookupDrafter  # noqa: E402
from engine.lookahead import Auto, CostModel  # noqa: E402
from engine.sampling import Sampler  # noqa: E402

curve = {int(n): float(t) for n, t in json.load(open(curve_path)).items()}
cost = CostModel()
cost.free_drafter = True
for n, t in curve.items():
    cost.observe_verify(n, t)
vt = lambda n: cost.verify_time(n)  # noqa: E731  (interpolated like the replay's)
if calibration:
    stored = json.load(open(calibration))
    cost.import_confidence(next(v for k, v in stored.items() if k.startswith("confidence|") and k.endswith("|lookup")))
rows, seen = [], set()
for r in json.load(open(cases_path)):
    held = r["suite"].startswith("heldout/")
    if (which == "tuning" and held) or (which == "heldout" and not held) or (r["suite"], r["id"]) in seen:
        continue
    seen.add((r["suite"], r["id"]))
    rows.append(r)
by = {}
for r in rows:
    prompt, truth = r["prompt"], r["out"]
    d = PromptLookupDrafter()
    d.trimmed_by_caller = True
    d.begin(prompt)
    auto = Auto()
    written, spent, drafted, accepted = truth[:1], 0.0, 0, 0
    while len(written) < len(truth):
        i = len(written)
        k_req = auto.choose(len(truth) - i - 1, cost)
        prop = d.propose(prompt + written, k_req, Sampler()) if k_req > 0 else None
        drafts = prop.cut(auto.trim(prop, cost)) if prop is not None else None
        toks = drafts.tokens if drafts else []
        acc = 0
        for a, b in zip(toks, truth[i:]):
            if a != b:
                break
            acc += 1
        t = vt(1 + len(toks))
        cost.observe_verify(1 + len(toks), t)
        spent += t
        if toks:
            cost.observe_acceptance(len(toks), acc, drafts.confidence)
            d.feedback(len(toks), acc)
        auto.feedback(len(toks), acc)
        drafted, accepted = drafted + len(toks), accepted + acc
        written += truth[i : i + acc + 1]
    base = (len(truth) - 1) * vt(1)
    by.setdefault(r["suite"], []).append(((r["ttft"] + base) / (r["ttft"] + spent), base / spent, drafted, accepted))
print("| suite | prompts | wall-clock, median (min) | decode, median | accepted / drafted |\n|---|---|---|---|---|")
for s, xs in by.items():
    w = [x[0] for x in xs]
    print(f"| {s} | {len(xs)} | {statistics.median(w):.3f}x ({min(w):.3f}) | {statistics.median(x[1] for x in xs):.3f}x | "
          f"{sum(x[3] for x in xs)} / {sum(x[2] for x in xs)} |")
