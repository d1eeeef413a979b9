"""PREDICTED speedups of drafting with a model's own MTP head on published GPU verify curves.

No Qwen3.5/3.6 file can be downloaded here and no GPU has been lent, so this prices one
speculative step with Tandem's cost model (`Costs.predict`: expected tokens per step over
draft + verify time) using:
- the verify curves of `tools/gpu_curves.json` (published llama.cpp pp1..pp8 rows),
- an MTP head's cost per drafted token as a share of a target token, from parameter counts:
  one nextn block (1/n_layers of the trunk) plus the output head (vocab x hidden), which a
  batch-1 GPU pass reads once per token (estimates, stated with each model),
- per-token acceptance alpha from published llama-server runs (each cited below).
It assumes each drafted token is accepted independently with probability alpha (the replay of
`tools/draft_replay.py` needs recorded MTP proposals, which need the real files). Printed
beside each row: the speedup the same source measured, where it published one.

    python -m tools.mtp_prediction [--markdown]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from engine.decoding.drafting.cost_model import Costs

CURVES = Path(__file__).with_name("gpu_curves.json")


@dataclass(frozen=True)
class Case:
    model: str
    head_share: float  # MTP head cost per drafted token / target cost per token (estimate)
    head_basis: str
    k: int
    alpha: float
    source: str
    measured: float | None  # the source's own with/without ratio, if it gave one


# Head shares: (trunk / n_layers + vocab x hidden) / total parameters.
# Qwen3.5-4B: 32 layers, hidden 2560, vocab 248,320 (model card, config.json): 3.97B params;
#   one block ~ 3.3B / 32 = 0.10B, head 0.64B -> 0.74B / 3.97B = 0.19.
# Qwen3.6/3.8-27B: 64 layers, hidden 5120, vocab 248,320: block ~ 25.7B / 64 = 0.40B, head 1.27B -> 0.06.
CASES = [
    Case("Qwen3.5-4B IQ4_XS", 0.19, "1 block + LM head of 3.97B params", 2, 0.98,
         "localweights/Qwen3.5-4B-MTP-IQ4_XS-GGUF card: RTX 3090 Ti, n=2, 98% accepted, 207 -> 290 tok/s", 1.40),
    Case("Qwen3.5-4B IQ4_XS", 0.19, "1 block + LM head of 3.97B params", 3, 0.82,
         "same card, n=3, 82% accepted, 207 -> 280 tok/s", 1.35),
    Case("27B hybrid Q4_K_M", 0.06, "1 block + LM head of 27B params", 2, 0.80,
         "sudoingX/qwen38-mtp README, Qwen3.8-27B Q4_K_M n=2 on RTX 3090 / 4090: 1.33x / 1.60x (mean shown); alpha assumed 0.80", 1.46),
    Case("27B hybrid Q4_K_M", 0.06, "1 block + LM head of 27B params", 4, 0.70,
         "same README, Qwen3.8-27B UD-Q4_K_XL n=4 on an RTX 5090: 74.4 -> 182.0 tok/s; alpha assumed 0.70", 2.45),
    Case("27B hybrid Q4_K_M (prose)", 0.06, "1 block + LM head of 27B params", 2, 0.55,
         "assumed prose acceptance (M2 Ultra draft-model rows of #23052 fall to 1.03x on prose)", None),
]


def predict(curve: dict, case: Case) -> float:
    pts = sorted((int(n), ms / 1000.0) for n, ms in curve["ms_per_pass"].items())
    costs = Costs(verify_pts=pts, draft_token_s=case.head_share * pts[0][1], draft_ratio_prior=case.head_share,
                  alpha=case.alpha)
    return costs.predict(case.k, case.alpha).speedup


def rows() -> list[dict]:
    curves = {k: v for k, v in json.loads(CURVES.read_text(encoding="utf-8")).items() if not k.startswith("_")}
    out = []
    for c in CASES:
        out.append({"model": c.model, "k": c.k, "alpha": c.alpha, "head_share": c.head_share,
                    **{name: round(predict(curve, c), 2) for name, curve in curves.items()},
                    "measured_by_source": c.measured, "source": c.source})
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--markdown", action="store_true")
    a = p.parse_args()
    table = rows()
    if not a.markdown:
        print(json.dumps(table, indent=1))
        return
    curves = [k for k in table[0] if k not in ("model", "k", "alpha", "head_share", "measured_by_source", "source")]
    print("| model | k | alpha | head cost | " + " | ".join(f"predicted on {c}" for c in curves)
          + " | measured by the source | source |")
    print("|---|---|---|---|" + "---|" * len(curves) + "---|---|")
    for r in table:
        m = f"{r['measured_by_source']:.2f}x" if r["measured_by_source"] else "—"
        print(f"| {r['model']} | {r['k']} | {r['alpha']:.2f} | {r['head_share']:.2f} | "
              + " | ".join(f"{r[c]:.2f}x" for c in curves) + f" | {m} | {r['source']} |")


if __name__ == "__main__":
    main()
