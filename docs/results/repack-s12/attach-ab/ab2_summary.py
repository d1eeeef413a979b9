import json, statistics as st, glob, os
from collections import defaultdict
for suite in ["long_documents", "heldout-long_documents"]:
    print("##", suite)
    W = defaultdict(list)  # (mode, config, kind) -> walls
    ratio = defaultdict(list)  # (mode, kind) -> auto/target per (doc,rep)
    same = defaultdict(lambda: [0, 0])
    for mode in ("off", "on"):
        for rep in (1, 2):
            d = json.load(open(f"docs/results/repack-s12/attach-ab/{suite}-{mode}-r{rep}/runs.json"))
            by = defaultdict(dict)
            for r in d["runs"]:
                W[(mode, r["config"], r["kind"])].append(r["wall_s"])
                by[r["id"]][r["config"]] = r
            for qid, x in by.items():
                k = x["target"]["kind"]
                ratio[(mode, k)].append(x["target"]["wall_s"] / x["auto"]["wall_s"])
                same[(mode, k)][0] += x["auto"]["same_text"] is True
                same[(mode, k)][1] += 1
    for k in ("quote", "extract", "summary"):
        row = []
        for mode in ("off", "on"):
            r = ratio[(mode, k)]
            row.append(f"{mode}: Auto vs target {st.median(r):.2f}x ({min(r):.2f}-{max(r):.2f}) identical {same[(mode,k)][0]}/{same[(mode,k)][1]} | target {st.median(W[(mode,'target',k)]):.2f} s Auto {st.median(W[(mode,'auto',k)]):.2f} s")
        print(k, " || ".join(row))
