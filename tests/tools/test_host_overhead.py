"""The host-overhead benchmark measures what it says: each mode's decodes, priced by their floor."""

from __future__ import annotations

import math

from tools import host_overhead


def test_every_mode_is_measured_and_the_free_drafter_always_agrees(tmp_path):
    path = host_overhead.write_models(tmp_path, (320,))[320]
    r = host_overhead.measure(path, reps=1, tokens=24, threads=1, log=lambda s: None)
    assert {"greedy", "sampled", "selfdraft", "oracle", "suffix"} <= set(r)
    oracle, selfdraft = r["oracle"], r["selfdraft"]
    # the oracle proposes the target's own continuation: every draft is accepted, one
    # verify pass of k+1 tokens per step and nothing else
    assert oracle["acceptance"] == 1.0 and oracle["drafted_per_step"] > host_overhead.K - 0.5
    shapes = oracle["decodes_per_step"]  # the last step may be shorter (max_tokens)
    assert all(k.endswith("xall") for k in shapes) and shapes[f"{host_overhead.K + 1}xall"] >= 0.75
    # the self-draft decodes on two contexts: its draft's one-token passes and the verify
    assert selfdraft["acceptance"] == 1.0 and any(k.startswith("1x") for k in selfdraft["decodes_per_step"])
    assert "free drafter that agrees" in host_overhead.table({320: r})
    # the suffix drafter learnt the continuation as a past answer: it drafts it, and its own
    # time (update + lookup) is reported per token
    suffix = r["suffix"]
    assert suffix["acceptance"] > 0.9 and suffix["drafted_per_step"] > 1.5
    assert 0 < suffix["suffix_drafter_us_per_token"] < 1e5 and "the drafter itself" in host_overhead.table({320: r})
    assert math.isfinite(r["llama_cpp_sampler_over_floor_us_per_token"])  # noise may make it negative


def test_the_oracle_writes_what_the_target_alone_writes(tmp_path):
    path = host_overhead.write_models(tmp_path, (320,))[320]
    modes = host_overhead.TandemModes(path, threads=1)
    greedy = modes.run("greedy", 30).output
    oracle = modes.run("oracle", 30)
    assert oracle.output == greedy and oracle.accepted == oracle.drafted > 0
