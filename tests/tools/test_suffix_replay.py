"""tools/suffix_replay.py: runs of requests replayed through the real drafters and Auto, priced
by a GPU curve: the suffix draft learns a run's answers, the mix takes the better drafter."""

from __future__ import annotations

import json

import pytest

from tools.draft_replay import CURVES, Recording, pricing_for
from tools.suffix_replay import main, replay, speedup

ANSWER = list(range(200, 260))  # what the target writes for every request of the run


def _run(n: int = 4, *, model_right: bool = True) -> list[Recording]:
    recs = []
    for j in range(1, n + 1):
        prompt = [10 + j, 20 + j, 30 + j, 40]
        props = [(ANSWER[i:i + 8] if model_right else [7] * 8, [0.9] * 8) for i in range(len(ANSWER))]
        recs.append(Recording("agent_runs", f"loop/{j}", prompt, ANSWER, props))
    return recs


def _price():
    curves = json.loads(CURVES.read_text())
    return pricing_for(curves["rtx3090_llama8b_q4_0"], None)


def test_the_suffix_draft_learns_the_run_and_the_mix_takes_the_better_source():
    recs, price = _run(), _price()
    none = replay(recs, price, "none")
    assert speedup(none) == pytest.approx(1.0)
    suffix = replay(recs, price, "suffix")
    assert speedup(suffix[:1]) < 1.05  # the first request has nothing to draft from
    assert speedup(suffix[2:]) > 1.5 and suffix[2].accepted_by.get("suffix:history", 0) > 40
    assert speedup(replay(recs, price, "lookup")) < 1.05  # the answer is not in the prompt
    model = replay(recs, price, "model")
    assert speedup(model) > 1.2
    mix = replay(recs, price, "auto mix")
    interleaved = replay([*_run()[:2], *_run()[2:]][::-1], price, "auto mix")  # recorded by place in the run
    assert [r.spec_s for r in interleaved] == [r.spec_s for r in mix]
    assert speedup(mix[2:]) > speedup(model[2:])  # free and as sure: the suffix draft wins those steps
    assert mix[0].accepted_by.get("model", 0) > 0 and mix[2].accepted_by.get("suffix:history", 0) > 0


def test_a_model_draft_that_is_always_wrong_is_left_out_of_the_mix():
    recs, price = _run(model_right=False), _price()
    mix = replay(recs, price, "auto mix")
    assert sum(r.accepted_by.get("model", 0) for r in mix) == 0
    assert speedup(mix[2:]) > 1.5  # the suffix draft carries the later requests


def test_bad_recording_is_one_line(tmp_path, capsys):
    bad = tmp_path / "rec.jsonl"
    bad.write_text('{"suite": "x"}\n')
    assert main(["--recording", str(bad)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["--recording", str(tmp_path / "missing.jsonl")]) == 2
