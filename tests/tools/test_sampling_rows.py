"""tools/sampling_rows.py times what it says: llama.cpp's chain draws from the nucleus it set up."""

from __future__ import annotations

import numpy as np

from tools import sampling_rows


def test_llama_cpp_chain_draws_inside_the_nucleus_and_every_sampler_is_timed():
    rng = np.random.default_rng(0)
    rows = [rng.standard_normal(320).astype(np.float32) for _ in range(12)]
    for r in rows:
        r[[5, 17, 200]] += 40.0  # three tokens hold nearly all the mass: top-p 0.9 keeps only them
    chain = sampling_rows.LlamaChain(320)
    try:
        drawn = set()
        for _ in range(30):
            chain.prepare(rows[0])
            drawn.add(chain.draw())
    finally:
        chain.close()
    assert drawn <= {5, 17, 200} and len(drawn) > 1
    r = sampling_rows.measure(rows, repeat=2)
    assert r["rows"] == 12 and r["vocab"] == 320 and r["nucleus_tokens_max"] <= 3
    assert set(r["per_row"]) == {"argmax", "tandem_t0.7_top_p0.9", "tandem_t1.0", "llama_cpp_chain_t0.7_top_p0.9",
                                 "verify_k4_t0.7_top_p0.9", "verify_k4_t1.0", "verify_k4_t0.7_no_filter"}
    assert all(v["median_us"] > 0 and v["mean_us"] > 0 for v in r["per_row"].values())
    assert "llama_cpp_chain" in sampling_rows.table(r)
