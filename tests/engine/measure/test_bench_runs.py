"""Runs of several requests in the bench: the suite format, the suffix draft's memory
(empty at each repetition of a run, carried between its requests, apart per configuration,
never the user's), and the report by request."""

from __future__ import annotations

import json

import pytest

from engine import Engine
from engine.measure import bench, bench_report
from engine.measure import suites as bench_suites
from engine.measure.bench import Run, plan_configs
from engine.measure.bench_requests import by_request
from engine.measure.suites import BenchError, load_suite


def test_a_suite_of_runs_loads_in_order(tmp_path):
    f = tmp_path / "runs.jsonl"
    f.write_text(json.dumps({"id": "loop", "requests": [{"prompt": "a", "chat": False},
                                                        {"messages": [{"role": "user", "content": "b"}]}]}) + "\n"
                 + json.dumps({"id": "solo", "prompt": "c"}) + "\n")
    s = load_suite(str(f))
    assert s.multi_request
    assert [(p.id, p.run, p.request) for p in s.prompts] == [("loop/1", "loop", 1), ("loop/2", "loop", 2), ("solo", None, 1)]
    assert [[p.id for p in g] for g in s.runs()] == [["loop/1", "loop/2"], ["solo"]]
    assert [[p.id for p in g] for g in s.runs(limit=1)] == [["loop/1", "loop/2"]]
    assert not load_suite("chat").multi_request
    f.write_text(json.dumps({"id": "x", "requests": [{"prompt": "a"}]}) + "\n" + json.dumps({"id": "x", "requests": [{"prompt": "b"}]}) + "\n")
    with pytest.raises(BenchError, match=":2: a second run with the id 'x'"):
        load_suite(str(f))
    for bad, why in (({"requests": []}, "'requests' must be a non-empty list"),
                     ({"requests": [{"nope": 1}]}, "request 1: needs 'prompt', 'messages' or 'fim'"),
                     ({"requests": ["text"]}, "request 1: a request must be an object"),
                     ([1, 2], "needs 'prompt', 'messages' or 'requests'")):
        f.write_text(json.dumps(bad) + "\n")
        with pytest.raises(BenchError, match=why):
            load_suite(str(f))


def test_the_builtin_runs_suites_tuning_and_heldout():
    for name in ("agent_runs", "heldout/agent_runs"):
        s = load_suite(name)
        runs = s.runs()
        assert s.multi_request and len(runs) >= 4 and all(len(r) >= 3 for r in runs), name
    tuning = {p.id for p in load_suite("agent_runs").prompts}
    held = {p.id for p in load_suite("heldout/agent_runs").prompts}
    assert not tuning & held  # different content


REPEATED = "the value of the count of items"


def _suite() -> bench_suites.Suite:
    """One run of three requests that each write the same answer: what request 1 wrote, the
    suffix draft can take from its memory in requests 2 and 3."""
    reqs = [bench_suites.BenchPrompt(f"r/{i}", REPEATED, False, run="r", request=i) for i in (1, 2, 3)]
    return bench_suites.Suite("runs", reqs)


@pytest.fixture(scope="module")
def suffix_bench(tiny_target):
    """The bench on an engine whose user already has a memory holding the run's answer."""
    eng = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False)
    eng.generate(REPEATED, chat=False, draft_model="suffix", max_tokens=24)
    users = eng.draft_history_path()
    before = users.read_bytes()
    res = bench.run_bench(eng, [_suite()], plan_configs("suffix", modes=("target", "fixed", "auto", "lookup"), sweep=(4,)),
                          repeat=2, max_tokens=24)
    yield eng, res, before, users.read_bytes()
    eng.close()


def test_the_suffix_memory_starts_empty_at_each_repetition_and_grows_within_a_run(suffix_bench):
    res = suffix_bench[1]
    assert {r.config for r in res.runs} == {"target", "suffix k=4", "suffix auto", "lookup"}
    for cfg in ("suffix k=4", "suffix auto"):
        got = {(r.rep, r.request): r for r in res.runs if r.config == cfg}
        for rep in (0, 1):
            # request 1 drafts from no past answer, in every repetition and configuration
            assert "suffix:history" not in got[(rep, 1)].accepted_by, (cfg, rep, got[(rep, 1)].accepted_by)
            assert got[(rep, 2)].accepted_by.get("suffix:history", 0) > 0, (cfg, rep)
        if cfg == "suffix k=4":  # the repetitions measure the same thing: a fixed k drafts the same
            assert got[(1, 1)].accepted_by == got[(0, 1)].accepted_by
        # (Auto chooses k from the costs it measures as it goes, so on a busy machine one
        # repetition may try a draft the other did not: only its output is the same.)
        assert got[(1, 1)].tokens == got[(0, 1)].tokens
    assert all(r.identical for r in res.runs if r.mode != "target")  # greedy: what target alone wrote


def test_the_bench_neither_reads_nor_writes_the_users_suffix_memory(suffix_bench):
    eng, res, before, after = suffix_bench
    assert after == before  # not written (and not read: request 1 drafts from no past answer, above)
    assert not any(k.startswith("drafter:") for k in eng._decoders)  # the bench's own decoder was freed


def test_the_report_by_request(suffix_bench, tmp_path):
    res = suffix_bench[1]
    rows = {(r.config, r.request): r for r in res.by_request}
    assert set(rows) == {(c, b) for c in ("target", "suffix k=4", "suffix auto", "lookup") for b in ("1", "2", "3+")}
    assert rows[("target", "1")].wall_vs_target == pytest.approx(1.0)
    assert rows[("lookup", "2")].decode_vs_lookup == pytest.approx(1.0)
    assert rows[("suffix k=4", "3+")].runs == 2 and rows[("suffix k=4", "3+")].wall_vs_lookup is not None
    assert "suffix:history" in rows[("suffix k=4", "2")].accepted_by
    bench_report.write_reports(res, tmp_path)
    md = (tmp_path / "summary.md").read_text()
    assert "### Runs of several requests, by request" in md and "| runs | suffix k=4 | 3+ | 2 |" in md
    assert "| runs | target | 1 |" not in md  # the reference is not compared with itself
    assert "### Who drafted the accepted tokens" in md and "suffix:history" in md
    saved = json.loads((tmp_path / "results.json").read_text())
    assert len(saved["by_request"]) == 12 and saved["rows"][1]["accepted_by"]


def _run(config: str, mode: str, request: int, rep: int, tps: float, wall: float, by=None) -> Run:
    return Run("s", f"r/{request}", config, mode, "auto", rep, 10, 0.1, tps, 0.0, 1.0, 1, 0, 0, "length", "", [],
               wall_s=wall, run_id="r", request=request, accepted_by=by or {})


def test_ratios_by_request_are_per_request_and_repetition():
    runs = []
    for rep, drift in ((0, 1.0), (1, 2.0)):
        for req in (1, 2, 3, 4):
            runs.append(_run("target", "target", req, rep, 10 * drift, 4.0 / drift))
            runs.append(_run("lookup", "lookup", req, rep, 10 * drift, 4.0 / drift))
            gain = 1.0 if req == 1 else 2.0  # learnt from request 1
            runs.append(_run("suffix auto", "auto", req, rep, 10 * drift * gain, 4.0 / drift / gain, {"suffix:history": req}))
    runs.append(Run("other", "p", "target", "target", 0, 0, 1, 0.1, 1.0, 0.0, 1.0, 1, 0, 0, "length", "", []))
    rows = {(r.config, r.request): r for r in by_request(runs)}
    assert ("target", "1") in rows and not any(r.suite == "other" for r in by_request(runs))  # lone prompts: not here
    assert rows[("suffix auto", "1")].wall_vs_target == pytest.approx(1.0)
    assert rows[("suffix auto", "2")].decode_vs_lookup == pytest.approx(2.0)
    r3 = rows[("suffix auto", "3+")]
    assert r3.runs == 4 and r3.wall_vs_target == pytest.approx(2.0) and r3.accepted_by == {"suffix:history": 14}


def test_suffix_on_an_ordinary_suite_drafts_from_each_prompt_alone(tiny_target):
    """A lone prompt is a run of one: no prompt drafts from another's answer."""
    eng = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False)
    try:
        same = [bench_suites.BenchPrompt(p, REPEATED, False) for p in ("a", "b")]
        res = bench.run_bench(eng, [bench_suites.Suite("plain", same)], plan_configs("suffix", modes=("target", "auto")),
                              repeat=1, max_tokens=16)
        assert not any("suffix:history" in r.accepted_by for r in res.runs)
        assert res.by_request == []
    finally:
        eng.close()


def test_a_run_with_a_request_that_does_not_fit_is_skipped_whole(suffix_bench):
    """Without its long request, the run's next one would learn from less: none of it is run."""
    eng = suffix_bench[0]
    long = "the value of the item " * 400
    run = [bench_suites.BenchPrompt(f"r/{i}", text, False, run="r", request=i) for i, text in ((1, "a b"), (2, long), (3, "c d"))]
    s = bench_suites.Suite("s", [*run, bench_suites.BenchPrompt("solo", "the value of", False)])
    keep, skipped = bench_suites.fitting_prompts(eng, [(s, p) for p in s.prompts])
    assert [p.id for _, p in keep] == ["solo"]
    assert [x["prompt"] for x in skipped] == ["r/2", "r/1", "r/3"]
    assert "context holds 512" in skipped[0]["reason"] and skipped[1]["reason"] == "another request of run r does not fit"
