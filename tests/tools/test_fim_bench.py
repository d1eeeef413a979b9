"""tools/fim_bench.py: its cases are cut from real files (tuning from engine/, held-out from
app/) with a fixed seed, and it runs end to end on a tiny FIM model (the real measurement
needs a FIM model such as Qwen2.5-Coder)."""

from __future__ import annotations

import json

from engine.models.tinymodel import FIM_TOKENS, chain_through, make_vocab, write_model
from tools import fim_bench


def test_cases_are_function_bodies_cut_from_real_files_with_a_fixed_seed():
    tuning, again = fim_bench.cases("tuning", 5), fim_bench.cases("tuning", 5)
    assert [(c.file, c.function) for c in tuning] == [(c.file, c.function) for c in again]
    assert len(tuning) == 5 and all(c.file.startswith("engine/") for c in tuning)
    assert all(c.file.startswith("app/") for c in fim_bench.cases("heldout", 3))
    for c in tuning:
        source = (fim_bench.ROOT / c.file).read_text(encoding="utf-8")
        assert c.prefix + c.middle + c.suffix == source and c.middle.strip()


def test_the_tool_runs_on_a_tiny_fim_model_and_refuses_one_without(tmp_path, tiny_target, capsys):
    v = make_vocab(fim=True)
    chain = chain_through([v.id(FIM_TOKENS["fim_mid"])] + [v.id(c) for c in "abcdef"] + [2])
    model = write_model(tmp_path / "fim.gguf", vocab=v, chain=chain, name="fim")
    out = tmp_path / "runs.jsonl"
    assert fim_bench.main(["--target", str(model), "--cases", "2", "--reps", "2", "--max-tokens", "8", "--ctx", "2048",
                           "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {(r["set"], r["mode"]) for r in rows} == {(s, m) for s in ("tuning", "heldout") for m in ("target", "lookup")}
    assert len(rows) == 2 * 2 * 2 * 2 and {r["rep"] for r in rows} == {0, 1}  # sets x cases x modes x reps
    printed = capsys.readouterr().out
    assert "tuning" in printed and "heldout" in printed and "vs target" in printed
    assert printed.count("identical 4/4") == 2  # lookup, per set: 2 cases x 2 repetitions, all target alone's tokens
    assert fim_bench.main(["--target", str(tiny_target), "--cases", "1"]) == 2
    assert "no fill-in-the-middle tokens" in capsys.readouterr().err


def test_a_run_that_parts_from_target_alone_is_named_by_its_first_differing_token():
    assert fim_bench.parted_at([1, 2, 3], [1, 2, 3]) is None
    assert fim_bench.parted_at([1, 2, 3], [1, 5, 3]) == 1
    assert fim_bench.parted_at([1, 2, 3], [1, 2]) == 2  # stopped early
    line = fim_bench.summary("tuning", {"target": [2.0, 2.0], "lookup": [1.0, 1.6]},
                             {"target": [1.0, 1.0], "lookup": [0.5, 1.0]}, {"target": 0, "lookup": 1}, reps=3)
    assert "wall x1.62 (1.25-2.00) vs target" in line and "decode x1.50 (1.00-2.00)" in line
    assert "identical 5/6" in line
