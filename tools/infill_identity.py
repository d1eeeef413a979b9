"""Issue #45 item 12 on a real model: greedy `/infill` with draft none against lookup, on the
six editor cases of tests/engine/serving/test_infill_identity.py (the suite runs them on tiny
models), each case's order interleaved; every parting reported with the target's top-two
logit margin in one single-token pass (a parting that is not a near-tie is a bug).

    python -m tools.infill_identity MODEL.gguf [--lookahead 4] [--ctx 4096]

Run it on an idle machine; it prints one line per request and the partings, then a JSON list.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--lookahead", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=4096)
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT / "tests" / "engine" / "serving"))
    from test_infill_identity import CASES, parting  # the suite's own cases and parting report

    from engine import Engine
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(a.model, n_ctx=a.ctx, metrics_log=False, calibration=False, history_draft=False)
    srv = ServerThread(create_app(ServedModel(eng, "fim", lookahead=a.lookahead), ServerConfig())).start()
    rows = []
    try:
        for i, case in enumerate(CASES):
            order = ["none", "lookup", "lookup", "none"] if i % 2 == 0 else ["lookup", "none", "none", "lookup"]
            runs = []
            for draft in order:
                t = time.time()
                r = httpx.post(srv.url + "/infill", timeout=600, json={
                    **case, "draft": draft, "temperature": 0, "n_predict": 48, "return_tokens": True,
                    "cache_prompt": True})
                body = r.json()
                runs.append((draft, body))
                tm = body.get("timings", {})
                print(i, draft, r.status_code, f"{time.time() - t:.1f}s", "drafted", tm.get("draft_n"),
                      "accepted", tm.get("draft_n_accepted"), repr(body.get("content"))[:60], flush=True)
            ref = next(b for d, b in runs if d == "none")
            for draft, body in runs:
                same = body["tokens"] == ref["tokens"]
                where = "" if same else parting(eng, case, ref["tokens"], body["tokens"])
                rows.append({"case": i, "draft": draft, "same": same, "where": where})
                if not same:
                    print("PARTING", i, draft, where, flush=True)
    finally:
        srv.stop()
        eng.close()
    print(json.dumps(rows))
    print("identical to draft none:", sum(r["same"] for r in rows), "of", len(rows))


if __name__ == "__main__":
    main()
