"""Fuzz the CLI (issue 12): arguments, option values and prompt bytes drawn at random.

Every run must end with exit code 0 or 2 and never print a traceback. Tiny models and at
most a few tokens keep each run short. Each fuzz runs a fixed number of cases (derandomized,
so every run of the suite tries the same ones): a time budget instead left hypothesis drawing
thousands of skipped cases after it ran out, 300 s and a timeout on a machine busy with other
work (about 30 s on an idle one now).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from engine.cli.main import main as cli  # noqa: E402

GENERATE_CASES = 40  # CLI runs of generate and race on tiny models
STATS_CASES = 80  # `tandem stats` over arbitrary log bytes (each run is quick)


def fuzz_settings(cases: int) -> settings:
    return settings(max_examples=cases, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
WORK = Path(tempfile.mkdtemp(prefix="tandem-fuzz-"))


def _argv_text(max_size: int = 30) -> st.SearchStrategy[str]:
    """What Python makes of arbitrary shell argument bytes (no NUL: argv cannot hold one)."""
    return st.binary(max_size=max_size).filter(lambda b: b"\x00" not in b).map(os.fsdecode)


NUMBER_TEXT = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "-inf", "inf", "1e309", "-0", "0", "1", "0.5", "2", "abc", ""]),
    st.integers(-(2**70), 2**70).map(str),
)
UNIT = st.floats(0, 1).map(repr)  # mostly valid values, so many runs get as far as generating
OPTIONS = {
    "--temperature": st.one_of(st.floats(0, 3).map(repr), NUMBER_TEXT),
    "--top-p": st.one_of(UNIT, NUMBER_TEXT),
    "--min-p": st.one_of(UNIT, NUMBER_TEXT),
    "--top-k": st.one_of(st.integers(-3, 300).map(str), NUMBER_TEXT),
    "--seed": st.one_of(st.integers(-(2**65), 2**65).map(str), NUMBER_TEXT),
    "--lookahead": st.sampled_from(["0", "1", "4", "16", "17", "-1", "auto", "AUTO", " 3 ", "x", ""]),
    "--max-tokens": st.sampled_from(["-1", "0", "1", "3", "x"]),
    "--ctx": st.sampled_from(["-5", "0", "1", "16", "64", "300", "2048", "99999999", "x"]),
    "--threads": st.sampled_from(["-1", "0", "1", "2", "100000", "x"]),
    "--stop": _argv_text(5),
    "--system": _argv_text(),
    "--tag": _argv_text(10),
}
SWITCHES = ["--chat", "--json", "--no-colour"]


@pytest.fixture(scope="module")
def targets(tiny_target, tiny_draft, other_vocab_model):
    bad = WORK / "not-a-model.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 20)
    return {"target": tiny_target, "draft": tiny_draft, "other": other_vocab_model, "bad": bad}


@st.composite
def generate_argv(draw, targets):
    kind = draw(st.sampled_from(["argv", "argv", "file", "file", "stdin", "missing"]))
    stdin = b""
    if kind == "argv":
        prompt = draw(_argv_text(40))
    elif kind == "file":
        f = WORK / f"p{draw(st.integers(0, 9))}.txt"
        f.write_bytes(draw(st.binary(max_size=80)))
        prompt = f"@{f}"
    elif kind == "stdin":
        prompt, stdin = "-", draw(st.binary(max_size=80))
    else:
        prompt = "@" + str(WORK / "no-such-prompt.txt")
    argv = [draw(st.sampled_from(["generate", "race"])), "--target",
            str(draw(st.sampled_from([targets["target"]] * 4 + [targets["bad"], WORK / "missing.gguf"])))]
    draft = draw(st.sampled_from([None, None, "none", "lookup", "lookup", str(targets["draft"]), str(targets["draft"]),
                                  str(targets["other"]), "nope.gguf"]))
    if draft is not None:
        argv += ["--draft", draft]
    for name in draw(st.lists(st.sampled_from(sorted(OPTIONS)), max_size=3, unique=True)):
        argv += [f"{name}={draw(OPTIONS[name])}"]  # '=' keeps values like '-1' from reading as flags
    argv += draw(st.lists(st.sampled_from(SWITCHES), max_size=2, unique=True))
    if not any(a.startswith("--max-tokens") for a in argv):
        argv += ["--max-tokens", "2"]
    argv += ["--", prompt] if prompt.startswith("-") and prompt != "-" else [prompt]
    return argv, stdin


def _run(argv: list[str], stdin: bytes) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli(argv)
            except SystemExit as e:  # argparse: bad flag syntax
                code = e.code if isinstance(e.code, int) else 2
    finally:
        sys.stdin = saved
    return code, err.getvalue()


@pytest.mark.slow
def test_fuzz_generate_and_race(targets):
    runs = []

    @fuzz_settings(GENERATE_CASES)
    @given(case=generate_argv(targets))
    def run(case):
        runs.append(case)
        argv, stdin = case
        code, err = _run(argv, stdin)
        assert code in (0, 2), (argv, code, err[-2000:])
        assert "Traceback" not in err, (argv, err[-2000:])
        if code == 2:
            assert [ln for ln in err.splitlines() if ln.startswith(("tandem: error:", "usage:", "tandem generate: error",
                                                                    "tandem race: error", "tandem: error"))], err

    run()
    assert len(runs) >= GENERATE_CASES  # hypothesis ran every case (no filter starved it)


@pytest.mark.slow
def test_fuzz_stats_on_arbitrary_log_bytes():
    runs = []
    log = WORK / "metrics.jsonl"
    good = b'{"target": "t.gguf", "draft": "d.gguf", "task": "x", "stats": {"generated_tokens": 3, "drafted": 4, "accepted": 2}}'
    pieces = st.one_of(st.binary(max_size=60), st.just(good), st.just(b'{"stats": {"decode_tokens_per_s": NaN}}'),
                       st.just(b'{"stats": {"generated_tokens": 1e999, "drafted": "x"}, "target": "\\ud800"}'),
                       st.just(b'{"stats": []}'), st.just(b'[[[[[[[[[[' * 50))

    @fuzz_settings(STATS_CASES)
    @given(lines=st.lists(pieces, max_size=8))
    def run(lines):
        runs.append(lines)
        log.write_bytes(b"\n".join(lines))
        code, err = _run(["stats", "--log", str(log)], b"")
        assert code == 0 and "Traceback" not in err, (lines, err[-2000:])

    run()
    assert len(runs) >= STATS_CASES
