"""tools/sampled_speculation.py runs the three modes on a pair and reports each."""

from __future__ import annotations

import json

from tools import sampled_speculation


def test_every_mode_runs_and_is_reported(tiny_target, tiny_draft, tmp_path):
    out = tmp_path / "r.json"
    assert sampled_speculation.main(["--target", str(tiny_target), "--draft", str(tiny_draft), "--reps", "1",
                                     "--tokens", "8", "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert set(r) == {f"{s}/{m}" for s in sampled_speculation.SUITES for m in ("alone", "draft-auto", "lookup-auto")}
    assert all(v["decode_tok_s_median"] > 0 and v["wall_tok_s_median"] > 0 for v in r.values())
    assert r["code_generation/alone"]["drafted"] == 0
