"""The Python API's contract: inputs checked up front, one run at a time, safe close,
settings objects, the race, persisted calibration and the deferred draft prefill."""

from __future__ import annotations

import json

import subprocess
import sys
import textwrap

import pytest

import engine
from engine import Engine, GenerationRequest, LiveLookahead, TandemError
from engine.decoding.events import DoneEvent, StepEvent
from engine.measure.racing import race, verdict
from engine.decoding.decoder import EngineClosedError


@pytest.fixture(scope="module")
def eng(tiny_target):
    e = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False)
    yield e
    e.close()


@pytest.mark.parametrize("bad, message", [
    (None, "must be a str, a list of chat messages or a list of token ids, not NoneType"),
    (42, "not int"),
    (b"bytes", "not bytes"),
    ([{"role": "user"}], "message 0 must be"),
    ([1, "a"], "chat messages .* or token ids"),
    ("   ", "the prompt is empty"),
])
def test_bad_prompts_get_one_clear_error(eng, bad, message):
    with pytest.raises(TandemError, match=message):
        eng.generate(bad, max_tokens=3)


def test_token_id_prompts_are_supported(eng):
    ids = eng.tokens_for("the value of")
    a = eng.generate(ids, max_tokens=8)
    b = eng.generate("the value of", max_tokens=8)
    assert a.tokens == b.tokens
    with pytest.raises(TandemError, match="outside the vocabulary"):
        eng.generate([10**7], max_tokens=3)


@pytest.mark.parametrize("la", [99, -1, "fast", 2.5, True])
def test_lookahead_is_validated_even_without_a_draft(eng, la):
    with pytest.raises(TandemError, match="lookahead"):
        eng.generate("the value of", lookahead=la, max_tokens=3)


def test_unknown_keyword_is_named(eng):
    with pytest.raises(TandemError, match="temprature"):
        eng.generate("the value of", temprature=0.5)


def test_request_object_and_keywords_are_the_same(eng, tiny_draft):
    req = GenerationRequest.from_options("the value of", draft_model=str(tiny_draft), lookahead=3, max_tokens=20)
    a = eng.generate(req)
    b = eng.generate("the value of", draft_model=str(tiny_draft), lookahead=3, max_tokens=20)
    assert a.tokens == b.tokens
    with pytest.raises(TandemError, match="inside the GenerationRequest"):
        eng.generate(req, max_tokens=5)


def test_two_streams_in_one_thread_fail_fast_instead_of_deadlocking(eng):
    first = eng.stream("the value of", max_tokens=30)
    next(first)
    second = eng.stream("the value of", max_tokens=5)
    with pytest.raises(TandemError, match="already generating in this thread"):
        next(second)
    rest = list(first)
    assert isinstance(rest[-1], DoneEvent) and rest[-1].stats.generated_tokens == 30
    assert eng.generate("the value of", max_tokens=4).stats.generated_tokens == 4  # usable after


def test_stats_report_the_lookahead_actually_used(eng, tiny_draft):
    live = LiveLookahead(2)
    ks = []
    for ev in eng.stream("the value of", draft_model=str(tiny_draft), lookahead=live, max_tokens=60):
        if isinstance(ev, StepEvent):
            ks.append(ev.drafted)
            if ev.step == 3:
                live.set(5)
        if isinstance(ev, DoneEvent):
            st = ev.stats
    assert st.lookahead == "5"  # the last slider value; the ks used are in k_counts
    assert sum(st.k_counts.values()) == st.steps
    assert set(int(k) for k in st.k_counts) <= {0, 1, 2, 3, 4, 5} and any(int(k) > 2 for k in st.k_counts)
    auto = eng.generate("the value of", draft_model=str(tiny_draft), lookahead="auto", max_tokens=30).stats
    assert auto.lookahead.startswith("auto (k=")
    live5 = LiveLookahead(5)
    plain = eng.generate("the value of", lookahead=live5, max_tokens=5).stats
    assert plain.lookahead == "0" and plain.drafted == 0  # nothing to draft with
    assert live5.label == "5"  # the caller's handle is not rewritten


@pytest.mark.parametrize("draft", ["self", "other", "lookup"])
def test_auto_with_deferred_draft_prefill_is_exact(tiny_target, tiny_draft, draft):
    """Greedy output under Auto (draft model read lazily, on first use) equals target alone."""
    e = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False)
    spec = {"self": str(tiny_target), "other": str(tiny_draft), "lookup": "lookup"}[draft]
    for prompt in ("the value of", "def count items in the list", "data data data value"):
        base = e.generate(prompt, max_tokens=60)
        fast = e.generate(prompt, draft_model=spec, lookahead="auto", max_tokens=60)
        assert fast.tokens == base.tokens, (draft, prompt)
    e.close()


def test_race_reports_nothing_drafted_honestly(eng):
    req = GenerationRequest.from_options("the value of", draft_model="lookup", lookahead=0, max_tokens=20)
    r = engine.race(eng, req)  # the public name, same function as engine.measure.racing.race
    assert race is engine.race
    assert isinstance(r, engine.RaceResult) and r.identical
    assert r.speculative.stats.drafted == 0
    assert r.headline.startswith("About the same: nothing was drafted")
    d = r.to_dict()
    assert {"speedup", "wall_speedup", "identical", "headline"} <= set(d)


def test_verdict_wording():
    from engine.decoding.events import RunStats

    base = RunStats(generated_tokens=100, wall_s=10.0, decode_tokens_per_s=10.0)
    fast = RunStats(generated_tokens=100, wall_s=5.0, decode_tokens_per_s=25.0, drafted=50, accepted=45, mode="lookup", lookahead="auto")
    assert verdict(base, fast)[0] == "2.00x faster (wall-clock)"
    same = RunStats(generated_tokens=100, wall_s=9.9, decode_tokens_per_s=10.1, drafted=10, accepted=5, mode="model", lookahead="4")
    assert verdict(base, same)[0].startswith("About the same")
    none = RunStats(generated_tokens=100, wall_s=9.0, decode_tokens_per_s=11.0, drafted=0, mode="model", lookahead="auto")
    assert "Auto judged that drafting does not pay" in verdict(base, none)[0]
    slow = RunStats(generated_tokens=100, wall_s=15.0, decode_tokens_per_s=7.0, drafted=100, accepted=40, mode="model", lookahead="8")
    assert verdict(base, slow)[0].startswith("1.50x slower")


def _py(code: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def test_setup_while_another_thread_generates_does_not_crash(tiny_target, tiny_draft):
    """engine.setup() closes the engine a thread is generating with: cancel, wait, free."""
    r = _py(f"""
        import threading, engine
        from engine.decoding.decoder import EngineClosedError
        old = engine.setup({str(tiny_target)!r}, n_ctx=2048, metrics_log=False)
        out = {{}}
        started = threading.Event()
        def gen():
            for ev in old.stream("the value of", draft_model={str(tiny_draft)!r}, lookahead=3, max_tokens=1500):
                started.set()
                if ev.kind == "done":
                    out["done"] = ev
        t = threading.Thread(target=gen)
        t.start()
        started.wait(10)
        engine.setup({str(tiny_target)!r}, n_ctx=256, metrics_log=False)   # closes `old` mid-generation
        t.join(30)
        assert not t.is_alive()
        assert out["done"].stats.finish_reason == "cancelled", out["done"].stats.finish_reason
        try:
            old.generate("x", max_tokens=2)
        except EngineClosedError as e:
            print("closed:", e)
        print("new:", engine.generate("the value of", max_tokens=3).stats.generated_tokens)
    """)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "closed: this engine was closed" in r.stdout and "new: 3" in r.stdout


def test_calibration_persists_across_processes(tiny_target, tiny_draft, tmp_path):
    """What the first process's answers measured of the verify curve is stored once known (each
    width several times); a fresh process starts from it."""
    code = f"""
        from engine import Engine
        e = Engine({str(tiny_target)!r}, n_ctx=1024, metrics_log=False)
        cost = e.decoder({str(tiny_draft)!r}).cost
        print("loaded", len(cost.verify_s))
        e.generate("the value of", draft_model={str(tiny_draft)!r}, lookahead=0, max_tokens=6)  # one-token passes
        v1 = cost.verify_s[1]
        for n, r in [(2, 1.3)] * 3 + [(4, 1.9)] * 3:  # as drafting steps would have measured them
            cost.observe_verify(n, r * v1)
        e.generate("the value of", draft_model={str(tiny_draft)!r}, lookahead=0, max_tokens=2)  # stored after it
        print("calibrated", cost.calibrated)
    """
    env = {"TANDEM_HOME": str(tmp_path)}
    first = _py(code, env)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "loaded 0" in first.stdout and "calibrated True" in first.stdout, first.stdout
    assert (tmp_path / "calibration.json").exists()
    second = _py(code, env)
    assert second.returncode == 0, second.stderr[-2000:]
    assert int(second.stdout.split()[1]) >= 3  # the stored curve, before any answer
    (tmp_path / "calibration.json").write_text("{not json")  # a corrupt cache is ignored and rewritten
    third = _py(code, env)
    assert third.returncode == 0 and "loaded 0" in third.stdout, third.stdout
    assert isinstance(json.loads((tmp_path / "calibration.json").read_text()), dict)


def test_lookup_confidence_calibration_is_reused_by_the_next_process(tiny_target, tmp_path):
    """Prompt lookup's measured acceptance per confidence is stored per target and reused."""
    code = f"""
        from engine import Engine
        e = Engine({str(tiny_target)!r}, n_ctx=512, metrics_log=False)
        r = e.generate("the value of the value of the value of", draft_model="lookup", lookahead=4, max_tokens=24)
        dec = e.decoder("lookup")
        print("seen", sum(dec.cost._conf_total))
    """
    env = {"TANDEM_HOME": str(tmp_path)}
    first = _py(code, env)
    assert first.returncode == 0, first.stderr[-2000:]
    seen_first = float(first.stdout.split()[-1])
    assert seen_first > 0
    import json
    stored = [v for k, v in json.loads((tmp_path / "calibration.json").read_text()).items() if k.startswith("confidence|")]
    assert len(stored) == 1 and sum(stored[0]["total"]) == pytest.approx(seen_first, abs=0.01)
    second = _py(code, env)
    assert second.returncode == 0, second.stderr[-2000:]
    assert float(second.stdout.split()[-1]) > seen_first  # started from the first process's counts


def test_closed_engine_raises_clearly(tiny_target):
    e = Engine(tiny_target, n_ctx=256, metrics_log=False)
    e.close()
    e.close()  # twice is fine
    with pytest.raises(EngineClosedError, match="closed"):
        e.generate("the value of", max_tokens=2)
    assert isinstance(EngineClosedError("x"), engine.TandemError)


def test_lone_surrogates_in_api_prompts_are_replaced_not_a_traceback(eng):
    with pytest.warns(UserWarning, match="replaced with U\\+FFFD"):
        r = eng.generate("the value \ud800 of", max_tokens=3)
    assert r.stats.generated_tokens == 3
    with pytest.warns(UserWarning):
        eng.generate([{"role": "user", "content": "x \udcff y"}], max_tokens=2)
