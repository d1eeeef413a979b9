"""A model whose logits are not numbers (NaN weights, a corrupt row) is named in one typed
error: `NonFiniteLogits` from the API, one line and exit 2 from the CLI, a 5xx JSON error
from the server; greedy and sampled, with and without a draft. Never a ValueError from
the sampler's kernels, an IndexError, nor a greedy answer made of the NaN token."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from engine import Engine
from engine.errors import NonFiniteLogits, TandemError
from engine.models.gguf_header import read_header

PROMPT = "the value of the item"


def poisoned(src: Path, dst: Path, rows: list[int] | None = None, value: float = math.nan) -> Path:
    """A copy of the tiny model `src` whose output weights are `value` in `rows` (all: None):
    every logits row then holds that token's score as NaN, as a damaged file makes it."""
    h = read_header(src)
    t = next(t for t in h.tensors if t.name == "output.weight")
    n_embd, n_vocab = t.shape  # GGUF order: the fastest dimension first
    data = bytearray(src.read_bytes())
    for r in range(n_vocab) if rows is None else rows:
        at = h.data_offset + t.offset + r * n_embd * 4
        data[at : at + n_embd * 4] = np.full(n_embd, value, dtype=np.float32).tobytes()
    dst.write_bytes(bytes(data))
    return dst


@pytest.fixture(scope="module")
def nan_target(tiny_target, vocab, tmp_path_factory) -> Path:
    """The tiny target with one corrupt row: the word every answer would start with."""
    return poisoned(tiny_target, tmp_path_factory.mktemp("nan") / "nan-target.gguf", [vocab.id("▁the")])


@pytest.fixture(scope="module")
def nan_draft(tiny_draft, tmp_path_factory) -> Path:
    return poisoned(tiny_draft, tmp_path_factory.mktemp("nan") / "nan-draft.gguf")  # every row NaN


# -- the guard itself ----------------------------------------------------------------------------
def test_the_row_guard_refuses_nan_and_plus_inf_and_lets_bans_through():
    from engine.decoding.sampling.finite import check_top

    for bad, kind in ((math.nan, "NaN"), (math.inf, "infinite")):
        with pytest.raises(NonFiniteLogits, match=f"the model produced {kind} logits") as e:
            check_top(bad)
        assert e.value.kind == kind and isinstance(e.value, TandemError)
    for ok in (-math.inf, 0.0, 1e30, -3.5):
        check_top(ok)


@pytest.mark.parametrize("temperature", [0.0, 0.8, 1.0, 1.5])
@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_verify_and_the_sampler_refuse_a_non_finite_row(temperature, bad):
    from engine.decoding.sampling.sampler import Sampler, SamplingParams, verify

    rows = np.zeros((2, 300), dtype=np.float32)
    rows[0, 17] = bad  # the first row: the one every verification reads
    sampler = Sampler(SamplingParams(temperature=temperature, seed=1))
    with pytest.raises(NonFiniteLogits):
        verify([0], [None], rows, sampler)
    with pytest.raises(NonFiniteLogits):
        sampler.pick(rows[0])
    rows[0, 17] = 0.0
    rows[0, 5] = -math.inf  # a banned token is no error
    assert verify([0], [None], rows, sampler).accepted in (0, 1)


# -- the API -------------------------------------------------------------------------------------
@pytest.mark.parametrize("temperature", [0.0, 0.8])
@pytest.mark.parametrize("draft", ["none", "model", "lookup"])
def test_a_nan_target_raises_one_typed_error_naming_it(nan_target, tiny_draft, temperature, draft):
    eng = Engine(nan_target, n_ctx=512, metrics_log=False)
    try:
        d = {"none": None, "model": tiny_draft, "lookup": "lookup"}[draft]
        with pytest.raises(NonFiniteLogits) as e:
            eng.generate(PROMPT, max_tokens=12, temperature=temperature, seed=3, draft_model=d,
                         lookahead=4 if d is not None else 0)
        msg = str(e.value)
        assert msg.startswith("tiny-target (nan-target.gguf): the model produced NaN logits"), msg
        assert str(nan_target.parent) not in msg  # the file's name, not where it lives
        # the engine stays usable: the same error again, not a crash or a stuck queue
        with pytest.raises(NonFiniteLogits):
            eng.generate(PROMPT, max_tokens=4, temperature=temperature, seed=3)
    finally:
        eng.close()


def test_a_nan_target_under_a_grammar_raises_the_same_error(nan_target):
    eng = Engine(nan_target, n_ctx=512, metrics_log=False)
    try:
        for temperature in (0.0, 0.8):
            with pytest.raises(NonFiniteLogits, match="the model produced NaN logits"):
                eng.generate(PROMPT, max_tokens=8, temperature=temperature, seed=1, grammar='root ::= [a-z ]+')
    finally:
        eng.close()


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_a_nan_draft_is_named_as_the_draft(tiny_target, nan_draft, temperature):
    eng = Engine(tiny_target, n_ctx=512, metrics_log=False)
    try:
        with pytest.raises(NonFiniteLogits) as e:
            eng.generate(PROMPT, max_tokens=12, temperature=temperature, seed=3, draft_model=nan_draft, lookahead=4)
        assert str(e.value).startswith("draft model tiny-draft (nan-draft.gguf): the model produced NaN logits")
    finally:
        eng.close()


def test_a_healthy_model_is_untouched_by_the_guard(tiny_target, tiny_draft):
    """Greedy with a draft still writes exactly what the target alone writes."""
    eng = Engine(tiny_target, n_ctx=512, metrics_log=False)
    try:
        alone = eng.generate(PROMPT, max_tokens=24, temperature=0.0).text
        paired = eng.generate(PROMPT, max_tokens=24, temperature=0.0, draft_model=tiny_draft, lookahead=4).text
        assert alone and paired == alone
    finally:
        eng.close()


# -- the CLI -------------------------------------------------------------------------------------
@pytest.mark.parametrize("extra", [[], ["--temperature", "0.8", "--seed", "2"], ["--draft", "DRAFT", "--lookahead", "4"],
                                   ["--draft", "DRAFT", "--lookahead", "4", "--temperature", "0.8"]])
def test_cli_generate_says_it_in_one_line_and_exits_2(nan_target, tiny_draft, capsys, extra):
    from engine.cli.main import main as cli

    extra = [str(tiny_draft) if a == "DRAFT" else a for a in extra]
    rc = cli(["generate", PROMPT, "--target", str(nan_target), "--max-tokens", "12", "--ctx", "512", *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2, err
    assert len(err) == 1 and err[0].startswith("tandem: error: tiny-target (nan-target.gguf): the model produced NaN"), err


# -- the server ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def nan_server(nan_target, tiny_draft):
    pytest.importorskip("fastapi")
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(nan_target, n_ctx=512, metrics_log=False)
    app = create_app(ServedModel(eng, "nan-target", draft=tiny_draft, lookahead=4), ServerConfig(list_catalog=False))
    srv = ServerThread(app).start()
    yield srv.url
    srv.stop()
    eng.close()


@pytest.mark.parametrize("draft", ["none", "model"])
@pytest.mark.parametrize("temperature", [0, 0.8])
def test_the_server_answers_a_5xx_json_error_naming_the_model(nan_server, temperature, draft):
    httpx = pytest.importorskip("httpx")
    body = {"model": "nan-target", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 12,
            "temperature": temperature, "seed": 1, "draft": draft}
    r = httpx.post(nan_server + "/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 500, r.text
    err = r.json()["error"]
    assert err["type"] == "server_error" and "the model produced NaN logits" in err["message"], err
    assert err["message"].startswith("tiny-target (nan-target.gguf)") and "Traceback" not in r.text
    assert "internal error" not in err["message"]  # not a bug report: the model file's fault


def test_a_streamed_answer_ends_with_the_error_chunk(nan_server):
    httpx = pytest.importorskip("httpx")
    body = {"model": "nan-target", "prompt": PROMPT, "max_tokens": 12, "temperature": 0.8, "stream": True}
    with httpx.stream("POST", nan_server + "/v1/completions", json=body, timeout=120) as r:
        data = [ln[len("data: "):] for ln in r.iter_lines() if ln.startswith("data: ")]
    errors = [json.loads(d)["error"] for d in data if d != "[DONE]" and "error" in json.loads(d)]
    assert len(errors) == 1 and "the model produced NaN logits" in errors[0]["message"], data
    assert "[DONE]" not in data
