"""The benchmark end to end on tiny models, and its arithmetic on synthetic runs."""

from __future__ import annotations

import csv
import json
import statistics
import time

import pytest

from engine import Engine
from engine.measure import bench, bench_report
from engine.measure import suites as bench_suites
from engine.decoding import metrics
from engine.measure.bench import Run, plan_configs, summarize
from engine.measure.suites import load_suite
from engine.cli.main import main as cli


def test_builtin_suites_have_ten_prompts_or_more():
    names = bench_suites.builtin_suites("tuning")
    assert {"code_generation", "code_editing", "chat", "report_drafting", "structured_json"} <= set(names)
    for n in names:
        assert len(load_suite(n).prompts) >= 10


def test_heldout_suites_are_listed_apart_and_pair_with_tuning_ones():
    held = bench_suites.builtin_suites("heldout")
    assert {f"heldout/{n}" for n in bench_suites.builtin_suites("tuning")} == set(held)
    assert bench_suites.builtin_suites() == bench_suites.builtin_suites("tuning") + held
    total = 0
    for n in held:
        s = load_suite(n)
        assert s.name == n and bench_suites.suite_set(n) == "heldout" and len(s.prompts) >= 4
        total += len(s.prompts)
    assert total >= 24
    assert bench_suites.suite_set("chat") == "tuning"
    with pytest.raises(bench.BenchError, match="unknown suite set"):
        bench_suites.builtin_suites("secret")


def test_user_suite_files(tmp_path):
    txt = tmp_path / "mine.txt"
    txt.write_text("first prompt\n\nsecond prompt\n")
    assert [p.prompt for p in load_suite(str(txt)).prompts] == ["first prompt", "second prompt"]
    jl = tmp_path / "mine.jsonl"
    jl.write_text(json.dumps({"id": "a", "messages": [{"role": "user", "content": "hi"}]}) + "\n" + json.dumps({"prompt": "x"}) + "\n")
    s = load_suite(str(jl))
    assert s.prompts[0].id == "a" and s.prompts[0].prompt[0]["content"] == "hi" and s.prompts[1].prompt == "x"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"nope": 1}\n')
    with pytest.raises(bench.BenchError, match="needs 'prompt', 'messages' or 'fim'"):
        load_suite(str(bad))
    with pytest.raises(bench.BenchError, match="unknown suite"):
        load_suite("no_such_suite")


def test_plan_configs():
    names = [c.name for c in plan_configs("d.gguf", sweep=(1, 4))]
    assert names == ["target", "k=1", "k=4", "auto", "lookup"]
    names = [c.name for c in plan_configs("lookup", sweep=(2,))]
    assert names == ["target", "lookup k=2", "lookup auto"]
    with pytest.raises(bench.BenchError):
        plan_configs("d.gguf", modes=["warp"])


def _run(cfg: str, mode: str, la, prompt: str, rep: int, tps: float, acc=(), drafted=(), verify=(), draft_ms=(),
         prefill_s: float = 2.0) -> Run:
    return Run("s", prompt, cfg, mode, la, rep, 100, 0.1, tps, 0.0, 1.0, len(verify), sum(drafted), sum(acc), "length",
               "", [], [la if isinstance(la, int) else 0] * len(verify), list(drafted), list(acc), list(draft_ms), list(verify),
               wall_s=prefill_s + 100 / tps)


def test_ratios_and_medians_on_synthetic_runs():
    runs = []
    # two prompts x three repetitions; target speeds vary (drift), k=2 always 1.5x its own reference
    for p, base in (("a", 10.0), ("b", 20.0)):
        for rep, drift in enumerate((1.0, 0.5, 1.2)):
            runs.append(_run("target", "target", 0, p, rep, base * drift, verify=[30.0] * 4, drafted=[0] * 4, acc=[0] * 4, draft_ms=[0] * 4))
            runs.append(_run("k=2", "fixed", 2, p, rep, base * drift * 1.5, verify=[40.0] * 4, drafted=[2] * 4,
                             acc=[2, 1, 2, 2], draft_ms=[10.0] * 4))
    rows = {r.config: r for r in summarize(runs)}
    assert rows["target"].speedup_median == pytest.approx(1.0)
    assert rows["k=2"].speedup_median == pytest.approx(1.5)  # drift cancels: ratios are per repetition
    assert rows["k=2"].speedup_min == pytest.approx(1.5) and rows["k=2"].speedup_max == pytest.approx(1.5)
    # wall-clock includes the same 2 s of prefill on both sides, so it gains less than decode
    walls = [(2 + 100 / (b * d)) / (2 + 100 / (b * d * 1.5)) for b in (10.0, 20.0) for d in (1.0, 0.5, 1.2)]
    assert rows["k=2"].wall_speedup_median == pytest.approx(statistics.median(walls))
    assert 1.0 < rows["k=2"].wall_speedup_median < rows["k=2"].speedup_median
    assert rows["target"].wall_speedup_median == pytest.approx(1.0)
    assert rows["k=2"].tok_s_median == pytest.approx(statistics.median([15, 7.5, 18, 30, 15, 36]))
    # alpha: 7 accepted, 1 rejection per 4 steps -> 7/8
    assert rows["k=2"].alpha == pytest.approx(7 / 8)
    # cost model: t1 = 30 ms, batch of 3 = 40 ms, draft 5 ms/token; E(2) at 7/8
    e = (1 - (7 / 8) ** 3) / (1 - 7 / 8)
    assert rows["k=2"].predicted_speedup == pytest.approx((e / (2 * 5 + 40)) / (1 / 30), rel=1e-6)


def test_an_auto_row_is_predicted_from_what_it_verified_step_by_step():
    """Under Auto a free drafter's k is only a cap (16): lookup that verified nothing in a chat
    was predicted at 0.13x from k = 16 at 0% acceptance, beside a measured 0.95x."""
    runs = [_run("target", "target", 0, "a", 0, 10.0, verify=[30.0] * 4, drafted=[0] * 4, acc=[0] * 4, draft_ms=[0] * 4)]
    lookup = _run("lookup", "lookup", "auto", "a", 0, 9.5, verify=[30.0] * 4, drafted=[0] * 4, acc=[0] * 4,
                  draft_ms=[0] * 4)
    lookup.step_k = [16] * 4
    mixed = _run("auto", "fixed", "auto", "a", 0, 12.0, verify=[30.0, 40.0, 30.0, 40.0], drafted=[0, 2, 0, 2],
                 acc=[0, 2, 0, 1], draft_ms=[0, 10.0, 0, 10.0])
    mixed.step_k = [0, 4, 0, 4]  # asked for 4, the gate stopped each draft at 2
    rows = {r.config: r for r in summarize(runs + [lookup, mixed])}
    assert rows["lookup"].predicted_speedup == pytest.approx(1.0)
    a = rows["auto"].alpha
    e2 = (1 - a ** 3) / (1 - a)
    assert rows["auto"].predicted_speedup == pytest.approx(((1 + e2) / (30 + 2 * 5 + 40)) * 30, rel=1e-6)


def test_bench_end_to_end_on_tiny_models(tiny_target, tiny_draft, tmp_path):
    eng = Engine(tiny_target, n_ctx=512, metrics_log=False)
    suite = bench_suites.Suite("mini", [bench_suites.BenchPrompt("a", "the value of", False), bench_suites.BenchPrompt("b", "def count items", False)])
    seen = []
    res = bench.run_bench(eng, [suite], plan_configs(str(tiny_draft), sweep=(1, 3)), repeat=2, max_tokens=24,
                          progress=lambda d, t, label: seen.append((d, t)))
    assert seen[-1][0] == seen[-1][1] and [d for d, _ in seen] == list(range(1, len(seen) + 1))
    assert len(res.runs) == 2 * 2 * 5
    rows = {r.config: r for r in res.rows}
    assert set(rows) == {"target", "k=1", "k=3", "auto", "lookup"}
    assert all(r.compared == 4 and r.identical == 4 and r.bugs == 0 for r in res.rows if r.mode != "target")
    files = bench_report.write_reports(res, tmp_path / "out")
    names = {f.name for f in files}
    assert names == {"runs.jsonl", "results.csv", "results.json", "summary.md", "lookahead.png", "predicted_vs_measured.png"}
    lines = [json.loads(x) for x in (tmp_path / "out" / "runs.jsonl").read_text().splitlines()]
    assert len(lines) == 20 and all("decode_tokens_per_s" in x for x in lines)
    with open(tmp_path / "out" / "results.csv") as f:
        assert len(list(csv.DictReader(f))) == 5
    assert json.loads((tmp_path / "out" / "results.json").read_text())["rows"][0]["config"] == "target"
    md = (tmp_path / "out" / "summary.md").read_text()
    assert "| mini | k=3 |" in md and "Cost model" in md and "E(k)" in md
    for png in ("lookahead.png", "predicted_vs_measured.png"):
        assert (tmp_path / "out" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    eng.close()


def test_bench_cli_writes_reports(tiny_target, tmp_path, capsys):
    suite = tmp_path / "s.txt"
    suite.write_text("the value of\n")
    rc = cli(["bench", "--target", str(tiny_target), "--draft", "lookup", "--suite", str(suite), "--repeat", "1",
              "--max-tokens", "12", "--lookahead", "2", "--out", str(tmp_path / "o")])
    assert rc == 0
    out = capsys.readouterr().out
    assert "| s | lookup k=2 |" in out
    assert (tmp_path / "o" / "summary.md").exists()


def test_metrics_log_and_stats(tiny_target, tmp_path, capsys, monkeypatch):
    log = tmp_path / "m.jsonl"
    monkeypatch.setenv("TANDEM_METRICS_LOG", str(log))
    eng = Engine(tiny_target, n_ctx=256)
    eng.generate("the value of", max_tokens=10, tag="code")
    eng.generate("the value of", max_tokens=10, tag="code", draft_model=tiny_target, lookahead=3)
    eng.close()
    log.write_text(log.read_text() + '{"torn line\n')  # a crash mid-write must not break stats
    groups = metrics.summarize(metrics.read(log))
    by_draft = {g.draft: g for g in groups}
    assert by_draft["none"].runs == 1 and by_draft["none"].speedup == 1.0
    spec = by_draft["target.gguf"]
    assert spec.acceptance == 1.0 and spec.speedup is not None and spec.task == "code"
    assert cli(["stats", "--log", str(log)]) == 0
    assert "target.gguf" in capsys.readouterr().out


def test_estimate_counts_generations_and_times_them():
    configs = plan_configs("d.gguf")  # target, k=1,2,4,8, auto, lookup: the Bench view's defaults
    est = bench.estimate(6, configs, repeat=3, max_tokens=128, token_s=0.05, basis="calibrated cost model")
    assert (est.generations, est.warmup) == (126, 7)  # 2 suites x 3 prompts x 7 configurations x 3 repetitions
    assert est.seconds == pytest.approx(133 * 128 * 0.05)
    assert est.text() == "about 126 generations (+7 warm-up), ~14 min on this machine"
    unknown = bench.estimate(2, configs[:1], repeat=1, max_tokens=16, token_s=None, warmup=False)
    assert unknown.seconds is None and unknown.text() == "about 2 generations"
    assert bench.estimate(3, configs[:1], repeat=1, max_tokens=10, token_s=0.1, warmup=False).text() == \
        "about 3 generations, ~3 s on this machine"
    assert bench.estimate(1, configs[:1], repeat=1, max_tokens=10, token_s=None, warmup=False).text() == "about 1 generation"
    assert "h on this machine" in bench.estimate(50, configs, repeat=5, max_tokens=512, token_s=0.2).text()


def test_target_token_seconds_prefers_the_calibrated_cost_model(tiny_target):
    from engine.models import calibration

    eng = Engine(tiny_target, n_ctx=256, metrics_log=False)
    try:
        secs, basis = bench.target_token_seconds(eng)
        assert basis.startswith("uncalibrated: hardware bandwidth estimate") and secs > 0
        calibration.save({eng.calibration_key(): {"verify_s": {"1": 0.125, "4": 0.2}}})
        secs, basis = bench.target_token_seconds(eng)
        assert secs == 0.125 and basis.startswith("calibrated cost model, target alone")
        # A benchmark leaves its real pace (seconds per token of its budget) for the next estimate.
        suite = bench_suites.Suite("mini", [bench_suites.BenchPrompt("a", "the value of", False)])
        t0 = time.time()
        res = bench.run_bench(eng, [suite], plan_configs("lookup", sweep=(2,)), repeat=1, max_tokens=8)
        took = time.time() - t0
        secs, basis = bench.target_token_seconds(eng)
        assert basis == "the pace of your last benchmark of this model here"
        assert 0 < secs * (len(res.runs) + 3) * 8 <= took + 0.01  # 3 warm-up generations
        est = bench.estimate(1, plan_configs("lookup", sweep=(2,)), repeat=1, max_tokens=8, token_s=secs)
        assert est.seconds == pytest.approx(res.meta["seconds"], abs=0.06)  # the same run, estimated
    finally:
        eng.close()


def _reps(ratios_by_rep, acceptance=0.0):
    """Target alone at 10 tok/s and one lookup row at the given ratio per repetition (one prompt)."""
    runs = []
    for rep, ratio in enumerate(ratios_by_rep):
        runs.append(_run("target", "target", 0, "a", rep, 10.0, verify=[30.0], drafted=[0], acc=[0], draft_ms=[0]))
        runs.append(_run("lookup", "lookup", "auto", "a", rep, 10.0 * ratio, verify=[30.0], drafted=[0], acc=[0], draft_ms=[0]))
    return {r.config: r for r in summarize(runs)}


def test_a_ratio_is_a_gain_or_loss_only_outside_the_repetition_noise():
    one = _reps([1.05])["lookup"]  # the case: one repetition, 0% acceptance, 1.05x
    assert one.acceptance_median == 0 and one.speedup_verdict() == (None, "one repetition: no noise estimate")
    mixed = _reps([1.05, 0.97, 1.02])["lookup"]
    verdict, why = mixed.speedup_verdict()
    assert verdict is None and why == "within the noise: 3 repetitions ranged 0.97–1.05x"
    assert _reps([1.05, 1.02, 1.10])["lookup"].speedup_verdict()[0] == "gain"
    assert _reps([0.8, 0.9])["lookup"].speedup_verdict() == ("loss", "slower in every repetition (2 repetitions ranged 0.80–0.90x)")
    assert _reps([1.2, 1.3])["target"].speedup_verdict()[0] is None
    assert _reps([1.2, 1.3])["lookup"].speedup_by_rep == pytest.approx([1.2, 1.3])


def test_local_pass_costs_are_found_beside_an_rpc_key(tmp_path):
    """The network share needs the same pass measured here alone: same machine, threads and
    file, any local backend (the fastest), never another RPC split or another machine."""
    from engine.models import calibration

    store = tmp_path / "calibration.json"
    m = calibration.machine_id()
    rpc_key = f"{m}|cpu:ngl6+rpc:127.0.0.1:5001|t2|target.gguf:100"
    calibration.save({
        f"{m}|cpu:ngl0|t2|target.gguf:100": {"verify_s": {"1": 0.040, "2": 0.070}},
        f"{m}|gpu:ngl99|t2|target.gguf:100": {"verify_s": {"1": 0.010, "2": 0.011, "bad": "x"}},
        f"{m}|cpu:ngl6+rpc:127.0.0.1:5009|t2|target.gguf:100": {"verify_s": {"1": 0.001}},  # another split
        f"other-host|cpu|cpu:ngl0|t2|target.gguf:100": {"verify_s": {"1": 0.0001}},  # another machine
        f"{m}|cpu:ngl0|t4|target.gguf:100": {"verify_s": {"1": 0.0002}},  # other threads
        f"{m}|cpu:ngl0|t2|draft.gguf:50": {"verify_s": {"1": 0.0003}},  # another file
        f"{m}|cpu:ngl0|t2|target.gguf:100|bench": {"s_per_token": 0.05},
        f"{m}|cpu:ngl1|t2|target.gguf:100": "not a dict",
    }, store)
    assert calibration.local_verify_s(rpc_key, store) == {"1": 0.010, "2": 0.011}
    assert calibration.local_verify_s("no separators", store) == {}
    assert calibration.local_verify_s(rpc_key, tmp_path / "missing.json") == {}


def test_network_share_per_pass_and_per_token(monkeypatch):
    """Every pass pays the network once: per generated token it falls with tokens per pass."""
    from engine.models import calibration

    monkeypatch.setattr(calibration, "local_verify_s", lambda key: {"1": 0.040, "3": 0.080})
    cost = {"verify_ms": {1: 100.0, 2: 130.0, 3: 140.0}, "draft_ms_per_token": {}}
    net = bench.network_costs(cost, "key")
    assert net["local_verify_ms"] == {1: 40.0, 3: 80.0}
    assert net["network_ms"] == pytest.approx({1: 60.0, 3: 60.0})
    plain = bench.Run("s", "p", "target", "target", 0, 0, 4, 0.1, 10.0, 0.0, 1.0, 4, 0, 0, "length", "", [],
                      step_drafted=[0, 0, 0, 0])
    spec = bench.Run("s", "p", "lookup k=2", "lookup", 2, 0, 6, 0.1, 10.0, 1.0, 3.0, 2, 4, 4, "length", "", [],
                     step_drafted=[2, 2])  # two passes of 3 tokens; n=3 measured both ways
    odd = bench.Run("s", "p", "lookup k=1", "lookup", 1, 0, 2, 0.1, 10.0, 1.0, 2.0, 1, 1, 1, "length", "", [],
                    step_drafted=[1])  # n=2 only over RPC: the nearest size measured both ways stands in
    assert bench.network_per_token(plain, net["network_ms"]) == pytest.approx(60.0)
    assert bench.network_per_token(spec, net["network_ms"]) == pytest.approx(20.0)
    assert bench.network_per_token(odd, net["network_ms"]) == pytest.approx(30.0)
    assert bench.network_per_token(plain, {}) is None


def test_every_bench_run_reads_its_whole_prompt(tiny_target, tiny_draft):
    """Fixed k and Auto with one draft share a decoder: without emptying its caches the
    second configuration would reuse the prompt the first one read, and its wall-clock
    would beat target alone by a prefill it never paid."""
    eng = Engine(tiny_target, n_ctx=512, metrics_log=False)
    try:
        prompt = "the value of the count of items"
        n = len(eng.tokens_for(prompt))

        def prefill_total() -> int:
            evs = list(eng.stream(prompt, draft_model=str(tiny_draft), lookahead=2, max_tokens=4))
            return next(e for e in evs if e.kind == "prefill").total

        assert prefill_total() == n - 1
        assert prefill_total() == 0  # the same prompt again: the cached prefix is reused
        eng.forget_prompts()
        assert prefill_total() == n - 1  # emptied: read in full, as a new conversation's first turn

        totals = []
        real = eng.stream

        def spy(req, **kw):
            evs = list(real(req, **kw))
            totals.append(next(e for e in evs if e.kind == "prefill").total)
            return iter(evs)

        eng.stream = spy  # type: ignore[method-assign]
        suite = bench_suites.Suite("one", [bench_suites.BenchPrompt("a", prompt, False)])
        bench.run_bench(eng, [suite], plan_configs(str(tiny_draft), modes=("target", "fixed", "auto"), sweep=(1, 2)),
                        repeat=2, max_tokens=4, check_quality=False)
        assert totals and set(totals) == {n - 1}, totals
    finally:
        eng.close()


def test_a_prompt_that_does_not_fit_is_skipped_and_named_not_the_whole_run(tiny_target, tmp_path, capsys):
    """Issue 27: one long suite prompt aborted the whole run on a short-context model."""
    suite = tmp_path / "s.txt"
    suite.write_text("the value of\n" + "the value of the item " * 400 + "\ndef count items\n")
    rc = cli(["bench", "--target", str(tiny_target), "--draft", "lookup", "--suite", str(suite), "--repeat", "1",
              "--max-tokens", "8", "--lookahead", "2", "--ctx", "256", "--out", str(tmp_path / "o")])
    assert rc == 0
    captured = capsys.readouterr()
    assert "tandem: skipped s/" in captured.err and "context holds 256" in captured.err
    md = (tmp_path / "o" / "summary.md").read_text()
    assert "## Skipped prompts" in md and "context holds 256" in md
    meta = json.loads((tmp_path / "o" / "results.json").read_text())["meta"]
    assert len(meta["skipped"]) == 1
    runs = [json.loads(x) for x in (tmp_path / "o" / "runs.jsonl").read_text().splitlines()]
    assert len({r["prompt_id"] for r in runs}) == 2  # the two that fit were measured
