"""Issue 12: every bad input gets one clear line, nothing crashes, nothing hangs.

Sampling parameters, the metrics log, prompt bytes (files, stdin, argv), hostile chat
templates (written into copies of a tiny GGUF), Ctrl+C and validating before loading.
"""

from __future__ import annotations

import io
import json
import math
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from engine.decoding.prompting.chat import ChatTemplateWarning, render
from engine.cli.main import main as cli
from engine.decoding.metrics import append_metrics
from engine.decoding.sampling.sampler import SamplingParamError, SamplingParams
from engine.decoding.prompting.template_sandbox import TemplateLimitError

ROOT = Path(__file__).resolve().parents[2]
MSGS = [{"role": "user", "content": "the value of"}]


def _one_error_line(err: str, *needles: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("tandem: error:")]
    assert len(errors) == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in errors[0], errors[0]


# -- 1. sampling parameters -------------------------------------------------------------------
@pytest.mark.parametrize("name, value, says", [
    ("temperature", float("nan"), "temperature must be a finite number"),
    ("temperature", float("inf"), "temperature must be a finite number"),
    ("temperature", -0.5, "temperature must be >= 0"),
    ("temperature", "hot", "temperature must be a number"),
    ("top_p", float("nan"), "top-p must be a finite number"),
    ("top_p", 0.0, "top-p must be in (0, 1]"),
    ("min_p", float("-inf"), "min-p must be a finite number"),
    ("min_p", 1.0, "min-p must be in [0, 1)"),
    ("top_k", 2.5, "top-k must be an integer"),
    ("top_k", -1, "top-k must be >= 0"),
    ("seed", -1, "seed must be in 0.."),
    ("seed", 2**70, "seed must be in 0.."),
    ("seed", 1.5, "seed must be an integer"),
])
def test_every_sampling_parameter_is_checked_in_one_place(name, value, says):
    with pytest.raises(SamplingParamError, match=None) as e:
        SamplingParams(**{name: value})
    assert says in str(e.value)


def test_valid_sampling_parameters_are_stored_as_plain_numbers():
    import numpy as np

    p = SamplingParams(temperature=np.float32(0.5), top_k=np.int64(3), top_p=1, seed=np.uint64(7))
    assert p.to_dict() == {"temperature": 0.5, "top_k": 3, "top_p": 1.0, "min_p": 0.0, "seed": 7}
    assert type(p.top_k) is int and type(p.temperature) is float


def test_a_tiny_positive_temperature_is_greedy_not_nan():
    import numpy as np

    from engine.decoding.sampling.sampler import distribution

    d = distribution(np.array([1.0, 3.0, 2.0]), SamplingParams(temperature=1e-310))
    assert np.isfinite(d.probs).all() and d.prob(1) == pytest.approx(1.0)


def test_api_refuses_nan_temperature_and_logs_nothing(tiny_target, tmp_path):
    from engine import Engine

    log = tmp_path / "m.jsonl"
    eng = Engine(tiny_target, n_ctx=256, metrics_log=log)
    try:
        with pytest.raises(SamplingParamError, match="temperature"):
            eng.generate("the value of", temperature=float("nan"), max_tokens=4)
    finally:
        eng.close()
    assert not log.exists()


@pytest.mark.parametrize("flag, value, says", [
    ("--temperature", "nan", "temperature must be a finite number"),
    ("--temperature", "inf", "temperature must be a finite number"),
    ("--top-p", "nan", "top-p"),
    ("--min-p", "-inf", "min-p"),
    ("--seed", "-3", "seed"),
    ("--max-tokens", "0", "--max-tokens"),
    ("--ctx", "-1", "--ctx"),
    ("--threads", "0", "--threads"),
])
def test_cli_refuses_bad_numbers_before_looking_for_models(capsys, tmp_path, flag, value, says):
    # the target does not exist: the error must be about the option, found first
    code = cli(["generate", "hello", "--target", str(tmp_path / "missing.gguf"), f"{flag}={value}"])
    assert code == 2
    _one_error_line(capsys.readouterr().err, says)


# -- 1 and 8. the metrics log -------------------------------------------------------------------
def test_metrics_lines_are_strict_json(tmp_path):
    log = tmp_path / "m.jsonl"
    append_metrics(log, {"target": "t\udcff.gguf", "settings": {"temperature": float("nan")},
                         "stats": {"decode_tokens_per_s": float("inf"), "generated_tokens": 3}})

    def refuse(name):
        raise ValueError(name)

    rec = json.loads(log.read_bytes().decode("utf-8"), parse_constant=refuse)
    assert rec["settings"]["temperature"] is None and rec["stats"]["decode_tokens_per_s"] is None
    assert rec["target"] == "t\ufffd.gguf"


def test_stats_skips_and_counts_unreadable_lines(tmp_path, capsys):
    from engine.decoding import metrics

    good = {"target": "t.gguf", "draft": None, "task": "x",
            "stats": {"generated_tokens": 10, "decode_tokens_per_s": 5.0, "drafted": 0, "accepted": 0}}
    log = tmp_path / "m.jsonl"
    log.write_bytes(
        json.dumps(good).encode() + b"\n"
        + b'{"target": "\xff\xfe", "stats": {}}\n'  # not UTF-8
        + b'{"target": "t.gguf", "stats": {"decode_tokens_per_s": NaN}}\n'  # not strict JSON
        + b'["a list"]\n'
        + b'{"target": "t.gguf", "stats": {"generated_tokens": "many"}}\n'  # readable, odd values
        + b'{"target": "t.gguf", "sta'  # torn last line
    )
    got = metrics.read_log(log)
    assert (len(got.records), got.skipped) == (2, 4)
    assert cli(["stats", "--log", str(log)]) == 0
    out, err = capsys.readouterr()
    assert "t.gguf" in out and "Traceback" not in err
    assert "skipped 4 unreadable line(s)" in err


# -- 2. prompt bytes ----------------------------------------------------------------------------
def test_prompt_file_with_invalid_utf8_is_read_with_replacements(capsys, tmp_path, tiny_target):
    f = tmp_path / "p.txt"
    f.write_bytes(b"the \xff\xfe value \xc3 of")
    assert cli(["generate", f"@{f}", "--target", str(tiny_target), "--max-tokens", "3", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["stats"]["generated_tokens"] == 3
    assert f"tandem: warning: {f}: 3 undecodable byte sequence(s) replaced with U+FFFD" in err
    assert "Traceback" not in err


def test_prompt_files_with_a_bom_are_decoded():
    from engine.decoding.prompting.prompt_text import decode

    for enc in ("utf-16", "utf-32", "utf-8-sig"):
        assert decode("héllo ☃".encode(enc)) == ("héllo ☃", 0)
    assert decode("a \ufffd b".encode()) == ("a \ufffd b", 0)  # a genuine U+FFFD is not counted


def test_lone_surrogates_in_arguments_become_replacement_characters(capsys, tiny_target):
    argv_prompt = os.fsdecode(b"the \xff value")  # what Python makes of a non-UTF-8 argv byte
    code = cli(["generate", argv_prompt, "--target", str(tiny_target), "--max-tokens", "3", "--chat",
                "--system", "be \ud800 brief", "--stop", "\udcff", "--tag", "x\udcfe"])
    assert code == 0
    err = capsys.readouterr().err
    assert "argument: 1 undecodable byte sequence(s) replaced" in err
    assert "--system:" in err and "Traceback" not in err


def test_stdin_bytes_are_read_tolerantly(monkeypatch, capsys, tiny_target):
    fake = io.TextIOWrapper(io.BytesIO(b"the value \xff of"), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", fake)
    assert cli(["generate", "-", "--target", str(tiny_target), "--max-tokens", "2"]) == 0
    assert "stdin: 1 undecodable byte sequence(s) replaced" in capsys.readouterr().err


def test_oversized_and_unreadable_prompt_sources_get_one_line(capsys, tmp_path, monkeypatch):
    import engine.decoding.prompting.prompt_text as pt

    monkeypatch.setattr(pt, "MAX_PROMPT_BYTES", 1000)
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 1001)
    assert cli(["generate", f"@{big}", "--target", "t.gguf"]) == 2
    _one_error_line(capsys.readouterr().err, "big.txt", "not a prompt")
    assert cli(["generate", f"@{tmp_path}", "--target", "t.gguf"]) == 2
    _one_error_line(capsys.readouterr().err, "cannot read prompt file")


def test_prompt_is_read_before_any_model_is_resolved(capsys, monkeypatch):
    import engine.cli.main as c

    def too_early(args):
        raise AssertionError("models were resolved before the prompt was read")

    monkeypatch.setattr(c, "resolve_pair", too_early)
    assert cli(["generate", "@missing-prompt.txt"]) == 2
    _one_error_line(capsys.readouterr().err, "missing-prompt.txt", "cannot read prompt file")
    assert cli(["generate", "   "]) == 2
    _one_error_line(capsys.readouterr().err, "the prompt is empty")


def test_subprocess_non_utf8_argv_and_stdin_never_traceback(tiny_target):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LC_ALL": "C.UTF-8"}
    base = [sys.executable, "-m", "engine.cli", "generate"]
    opts = ["--target", os.fsencode(str(tiny_target)), "--max-tokens", "2", "--json"]
    r = subprocess.run(base + [b"the \xff\xfe value"] + opts, env=env, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert b"Traceback" not in r.stderr and b"replaced with U+FFFD" in r.stderr
    r = subprocess.run(base + ["-"] + opts, env=env, input=b"the \xff value", capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert b"Traceback" not in r.stderr


# -- 3. hostile chat templates -------------------------------------------------------------------
HOSTILE = {
    "division": "{{ 1/0 }}",
    "type error": "{{ messages + 1 }}",
    "huge range": "{% for i in range(10**9) %}{% endfor %}",
    "nested loops": "{% for a in range(99999) %}{% for b in range(99999) %}{% for c in range(99999) %}"
                    "{% endfor %}{% endfor %}{% endfor %}",
    "repeat": "{{ 'x' * 10**10 }}",
    "power": "{{ 10**(10**8) }}",
    "doubling ~": "{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
    "doubling +": "{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}",
    "nested list": "{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l }}",
    "nested json": "{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l|tojson }}",
    "center": "{{ 'x'.center(10**10) }}",
    "center filter": "{{ 'x'|center(10**10) }}",
    "format width": "{{ '{:>9999999999}'.format(1) }}",
    "percent width": "{{ '%9999999999d' % 1 }}",
    "replace": "{% set a = 'x' * 1000000 %}{{ a|replace('x', 'y' * 1000000) }}",
    "recursion": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "output size": "{% for i in range(99999) %}{{ 'x' * 99999 }}{% endfor %}",
    "squaring": "{% set ns = namespace(x=3) %}{% for i in range(99) %}{% set ns.x = ns.x * ns.x %}{% endfor %}{{ ns.x }}",
    "macro output": "{% set big = 'x' * 4000000 %}{% macro f() %}{% for i in range(99999) %}{{ big }}{% endfor %}"
                    "{% endmacro %}{{ f()|length }}",
    "set block": "{% set big = 'x' * 4000000 %}{% set s %}{% for i in range(99999) %}{{ big }}{% endfor %}{% endset %}"
                 "{{ s|length }}",
    "deep compare": "{% set ns = namespace(a=[1], b=[1]) %}{% for i in range(60) %}{% set ns.a = [ns.a, ns.a] %}"
                    "{% set ns.b = [ns.b, ns.b] %}{% endfor %}{{ ns.a == ns.b }}",
    "raise": "{{ raise_exception('no system role') }}",
    "syntax": "{% for %}",
    "attribute escape": "{{ messages.__class__.__mro__ }}",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_template_falls_back_to_chatml_quickly(name):
    t0, cpu0 = time.monotonic(), time.thread_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = render(MSGS, HOSTILE[name], source="/models/evil.gguf", deadline_s=1.0)
    elapsed, cpu = time.monotonic() - t0, time.thread_time() - cpu0
    assert out == "<|im_start|>user\nthe value of<|im_end|>\n<|im_start|>assistant\n"
    assert cpu < 5, f"{name} spent {cpu:.1f} s of CPU"  # the deadline: 1 s of the thread's CPU a render
    assert elapsed < 30, f"{name} took {elapsed:.1f} s"  # the clock's backstop, however busy the machine
    msgs = [str(w.message) for w in caught if issubclass(w.category, ChatTemplateWarning)]
    assert len(msgs) == 1 and msgs[0].startswith("/models/evil.gguf: its chat template failed"), msgs


def test_deadline_is_what_stops_an_endless_template():
    from engine.decoding.prompting.chat import _env
    from engine.decoding.prompting.template_sandbox import render_bounded

    with pytest.raises(TemplateLimitError, match="ran for more than 0.3 s"):
        render_bounded(_env(), HOSTILE["nested loops"], {"messages": MSGS}, deadline_s=0.3)


def test_real_world_template_features_still_render():
    t = ("{{ bos_token }}{% for m in messages %}{% if m.role == 'system' %}{{ m.content|trim }}\n"
         "{% else %}{{ '<|' ~ m.role ~ '|>' }}{{ m.content|tojson }}{{ ('%s' % loop.index) }}{% endif %}"
         "{% endfor %}{{ strftime_now('%Y')|length }}{{ 'ab'.replace('a', 'c') }}{{ [1, 2]|join(',') }}"
         "{{ 'x'.center(5) }}{{ range(3)|list|length * 2 }}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = render([{"role": "system", "content": " s "}, {"role": "user", "content": "hi"}], t, bos_token="<s>")
    assert out == '<s>s\n<|user|>"hi"24cb1,2  x  6'


def _hostile_model(models_dir: Path, vocab, name: str, template: str) -> Path:
    from engine.models.tinymodel import write_model

    return write_model(models_dir / f"hostile-{name}.gguf", seed=1, n_layer=1, vocab=vocab, chat_template=template)


def test_engine_stream_with_an_endless_template_warns_and_generates(models_dir, vocab):
    """The path the app's generation worker takes: a message list, chat=True."""
    from engine import Engine

    path = _hostile_model(models_dir, vocab, "loops", HOSTILE["nested loops"])
    eng = Engine(path, n_ctx=256, metrics_log=False)
    try:
        t0 = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = eng.generate(MSGS, chat=True, max_tokens=3)
        assert out.stats.generated_tokens == 3
        assert time.monotonic() - t0 < 15
        assert any(str(path) in str(w.message) for w in caught if issubclass(w.category, ChatTemplateWarning))
    finally:
        eng.close()


def test_app_generation_worker_finishes_on_a_hostile_template(models_dir, vocab):
    pytest.importorskip("PySide6")
    from app.workers import GenerationWorker
    from engine import Engine, GenerationRequest

    path = _hostile_model(models_dir, vocab, "doubling", HOSTILE["nested list"])
    eng = Engine(path, n_ctx=256, metrics_log=False)
    try:
        w = GenerationWorker(eng, GenerationRequest.from_options(MSGS, lookahead=0, max_tokens=3, chat=True))
        done, failed = [], []
        w.done.connect(done.append)
        w.failed.connect(failed.append)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ChatTemplateWarning)
            w.run()  # in this thread: returns, or the test times out
        assert failed == [] and len(done) == 1 and done[0].stats.generated_tokens == 3
    finally:
        eng.close()


def test_cli_chat_with_hostile_template_prints_one_warning(capsys, models_dir, vocab):
    path = _hostile_model(models_dir, vocab, "div", HOSTILE["division"])
    assert cli(["generate", "the value of", "--target", str(path), "--chat", "--max-tokens", "2"]) == 0
    err = capsys.readouterr().err
    warn = [ln for ln in err.splitlines() if ln.startswith("tandem: warning:")]
    assert len(warn) == 1 and str(path) in warn[0] and "ZeroDivisionError" in warn[0]
    assert "Traceback" not in err


# -- Ctrl+C -------------------------------------------------------------------------------------
def test_ctrl_c_prints_the_partial_result_and_exits_130(capsys, monkeypatch, tiny_target):
    from engine.decoding.engine import Engine
    from engine.decoding.events import TokenEvent

    original = Engine.stream

    def stream_then_interrupt(self, *a, **kw):
        n = 0
        for ev in original(self, *a, **kw):
            if isinstance(ev, TokenEvent):
                n += 1
                if n == 5:
                    os.kill(os.getpid(), signal.SIGINT)  # the user's first Ctrl+C
            yield ev

    monkeypatch.setattr(Engine, "stream", stream_then_interrupt)
    code = cli(["generate", "the value of", "--target", str(tiny_target), "--max-tokens", "500", "--json"])
    out, err = capsys.readouterr()
    assert code == 130
    result = json.loads(out)
    assert 5 <= result["stats"]["generated_tokens"] < 500 and result["text"]
    assert "tandem: interrupted" in err and "Traceback" not in err


def test_bench_sweep_is_checked_before_loading(capsys):
    assert cli(["bench", "--target", "missing.gguf", "--lookahead", "1,x"]) == 2
    _one_error_line(capsys.readouterr().err, "--lookahead")
    assert cli(["bench", "--target", "missing.gguf", "--temperature", "nan"]) == 2
    _one_error_line(capsys.readouterr().err, "temperature")


def test_metrics_written_by_a_run_parse_strictly(tiny_target, tmp_path):
    from engine import Engine

    log = tmp_path / "m.jsonl"
    eng = Engine(tiny_target, n_ctx=256, metrics_log=log)
    try:
        eng.generate("the value of", max_tokens=2, temperature=0.7, seed=1)
    finally:
        eng.close()

    def refuse(name):
        raise ValueError(name)

    for line in log.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line, parse_constant=refuse)
        assert all(not isinstance(v, float) or math.isfinite(v) for v in rec["stats"].values())


@pytest.mark.parametrize("ctx", ["1", "64", "200"])
def test_a_small_context_never_aborts_the_process(tiny_target, ctx):
    """Found by the fuzz test: --ctx 64 with a 100-token prompt hit GGML_ASSERT (SIGABRT)
    because llama.cpp caps its batch at the requested context. A subprocess, so a
    regression fails this test instead of killing the run."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    prompt = " ".join(["the value of the item"] * 40)
    r = subprocess.run([sys.executable, "-m", "engine.cli", "generate", prompt, "--target", str(tiny_target),
                        "--ctx", ctx, "--max-tokens", "2", "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode in (0, 2), r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    if r.returncode == 2:
        _one_error_line(r.stderr, "context")


def test_a_busy_machine_does_not_turn_a_real_template_into_chatml(monkeypatch):
    """The deadline is the rendering thread's CPU time: a render whose thread waits for the CPU
    (here: the clock runs 5 s per traced line while the thread's CPU time barely moves, as on a
    machine kept busy by other processes) still renders the model's own template. Measured: the
    default pair's template timed out at 2 s on the clock beside a test run and two busy loops."""
    from engine.decoding.prompting import template_sandbox

    t = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
    real_monotonic = time.monotonic
    ticks = {"n": 0}

    def busy_clock() -> float:  # 5 s pass on the clock between two traced lines
        ticks["n"] += 1
        return real_monotonic() + 5.0 * ticks["n"]

    monkeypatch.setattr(template_sandbox.time, "monotonic", busy_clock)
    monkeypatch.setattr(template_sandbox, "WALL_FACTOR", 10**9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = render(MSGS, t, source="/models/real.gguf", deadline_s=1.0)
    assert out == "<|user|>the value of"
