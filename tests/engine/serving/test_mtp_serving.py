"""`--draft mtp` and `"draft": "mtp"` on a tiny hybrid Qwen3.5 with an MTP layer: the CLI and
the server write what the target alone writes, and say it in one line when a file has no
MTP layers."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from engine import Engine
from engine.cli.main import main as cli
from engine.models.tinymodel import main as tinymodel

MSGS = [{"role": "user", "content": "the value of the data"}]


def _generate(capsys, target, draft: str) -> dict:
    code = cli(["generate", "the value of the data is", "--target", str(target), "--draft", draft,
                "--max-tokens", "24", "--lookahead", "3", "--json", "--threads", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out.strip().splitlines()[-1])


def test_cli_generate_with_mtp_writes_what_the_target_alone_writes(capsys, tiny_hybrid):
    alone = _generate(capsys, tiny_hybrid, "none")
    mtp = _generate(capsys, tiny_hybrid, "mtp")
    assert mtp["text"] == alone["text"]
    assert mtp["stats"]["drafted"] > 0 and mtp["stats"]["mode"] == "mtp"


def test_cli_mtp_on_a_file_without_mtp_layers_is_one_line_exit_2(capsys, tiny_hybrid_draft):
    code = cli(["generate", "the value", "--target", str(tiny_hybrid_draft), "--draft", "mtp", "--max-tokens", "3"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "has no MTP layers" in err and len(err.splitlines()) == 1


def test_server_draft_mtp_equals_none_and_is_refused_without_mtp_layers(tiny_hybrid, tiny_hybrid_draft):
    from engine.serving.server import ServedModel, create_app

    eng = Engine(tiny_hybrid, n_ctx=512, n_threads=1, metrics_log=False, calibration=False)
    other = Engine(tiny_hybrid_draft, n_ctx=256, n_threads=1, metrics_log=False, calibration=False)
    try:
        with TestClient(create_app(ServedModel(eng, "hybrid", draft="mtp"))) as tc:
            answers = {}
            for draft in ("none", "mtp"):
                r = tc.post("/v1/chat/completions", json={"messages": MSGS, "draft": draft, "max_tokens": 20,
                                                          "temperature": 0, "lookahead": 3})
                assert r.status_code == 200, r.text
                answers[draft] = r.json()
            assert answers["mtp"]["choices"][0]["message"] == answers["none"]["choices"][0]["message"]
            assert answers["mtp"]["timings"]["draft"] == "mtp" and answers["mtp"]["timings"]["draft_n"] > 0
        with TestClient(create_app(ServedModel(other, "plain", draft="lookup"))) as tc:
            r = tc.post("/v1/chat/completions", json={"messages": MSGS, "draft": "mtp", "max_tokens": 2})
            assert r.status_code == 400 and r.json()["error"]["param"] == "draft"
            assert "has no MTP layers" in r.json()["error"]["message"]
    finally:
        eng.close()
        other.close()


def test_tinymodel_writes_each_architecture(tmp_path, capsys):
    from engine.models.gguf_header import read_header

    assert tinymodel(["--arch", "qwen35", "--mtp", "--seed", "5", str(tmp_path / "q.gguf")]) == 0
    assert read_header(tmp_path / "q.gguf").mtp_layers == 1
    assert tinymodel(["--arch", "lfm2", str(tmp_path / "l.gguf")]) == 0
    assert read_header(tmp_path / "l.gguf").architecture == "lfm2"
    assert tinymodel(["--arch", "gemma4-assistant", str(tmp_path / "a.gguf")]) == 0
    assert read_header(tmp_path / "a.gguf").architecture == "gemma4-assistant"
    assert tinymodel(["--arch", "lfm2", "--mtp", str(tmp_path / "x.gguf")]) == 2
    assert "qwen35 only" in capsys.readouterr().err
