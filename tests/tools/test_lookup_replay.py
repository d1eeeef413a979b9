"""The lookup replay: recorded target outputs through prompt lookup and Auto, priced by a
verify curve, without a model (synthetic token sequences)."""

from __future__ import annotations

import json

import pytest

from tools.lookup_replay import Case, curve_function, load_cases, main, replay

# nearly linear up to 8 tokens, a pass over 16 cheaper than over 15 (the 2-core EPYC)
EPYC = {1: 0.045, 2: 0.075, 3: 0.106, 4: 0.138, 5: 0.183, 8: 0.336, 15: 0.482, 16: 0.403, 17: 0.421}
FLAT = {1: 0.020, 2: 0.020, 4: 0.021, 8: 0.022, 17: 0.025}  # a GPU


def _edit() -> Case:
    """An edit that copies a 300-token source with one identifier renamed throughout."""
    source = [100 + (i % 97) if i % 10 else 7 for i in range(300)]
    return Case("edit", "rename", [1, 2] + source + [3, 4], [8 if t == 7 else t for t in source], 1.0)


def _fresh() -> Case:
    """Writing that copies nothing."""
    return Case("gen", "fresh", [1, 2, 3, 4, 5], list(range(1000, 1200)), 0.5)


def test_a_copy_pays_and_fresh_writing_costs_nothing():
    edit, fresh = replay([_edit(), _fresh()], curve_function(EPYC))
    assert edit.accepted > 150 and edit.decode_ratio > 1.1
    assert edit.wall_ratio < edit.decode_ratio  # the prefill is paid either way
    assert fresh.drafted == 0 and fresh.decode_ratio == pytest.approx(1.0)
    assert fresh.steps == len(fresh.case.output) - 1


def test_a_flat_curve_drafts_longer_than_a_linear_one():
    cpu, = replay([_edit()], curve_function(EPYC))
    gpu, = replay([_edit()], curve_function(FLAT))
    assert gpu.steps < cpu.steps and gpu.decode_ratio > cpu.decode_ratio


def test_the_curve_is_interpolated_and_checked():
    at = curve_function({1: 0.04, 3: 0.10})
    assert at(2) == pytest.approx(0.07) and at(5) > at(3)
    for bad in ({}, {2: 0.1}, {1: 0.04, 2: -1.0}):
        with pytest.raises(ValueError):
            curve_function(bad)


def test_cases_come_from_target_runs_of_a_bench_output(tmp_path):
    runs = tmp_path / "runs.jsonl"
    rows = [
        {"suite": "code_editing", "prompt_id": "rename_total", "mode": "target", "tokens": [5, 6], "time_to_first_token_s": 1.5},
        {"suite": "code_editing", "prompt_id": "rename_total", "mode": "auto", "tokens": [5, 6], "time_to_first_token_s": 1.4},
        {"suite": "code_editing", "prompt_id": "rename_total", "mode": "target", "tokens": [5, 6], "time_to_first_token_s": 1.6},
        {"suite": "heldout/chat", "prompt_id": "kalman_intuition", "mode": "target", "tokens": [9], "time_to_first_token_s": 0.5},
    ]
    runs.write_text("\n".join(json.dumps(r) for r in rows))
    seen = []
    cases = load_cases(runs, lambda prompt, chat: seen.append(chat) or [1, 2, 3], "tuning")
    assert [(c.suite, c.prompt_id, c.output, c.prefill_s) for c in cases] == [("code_editing", "rename_total", [5, 6], 1.5)]
    assert [c.suite for c in load_cases(runs, lambda p, c: [1], "heldout")] == ["heldout/chat"]


def test_the_command_line_says_what_is_missing_in_one_line(tmp_path, capsys):
    bad = tmp_path / "curve.json"
    bad.write_text('{"2": 0.1}')
    runs = tmp_path / "runs.jsonl"
    runs.write_text("")
    assert main(["--target", str(tmp_path / "none.gguf"), "--runs", str(runs), "--curve", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err
