"""What tools written for llama-server or with a fixed model name expect: llama-server's
`/tokenize`, `/detokenize` and `/props`, `--alias '*'` (any model name), and a loopback CORS
origin answered under each loopback name (localhost, 127.0.0.1, [::1])."""

from __future__ import annotations

import socket

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from engine import Engine  # noqa: E402
from engine.serving.server import ServedModel, ServerConfig, create_app  # noqa: E402

TEXT = "the value of the item"


@pytest.fixture(scope="module")
def eng(tiny_target):
    e = Engine(tiny_target, n_ctx=256, metrics_log=False)
    yield e
    e.close()


@pytest.fixture(scope="module")
def tc(eng):
    app = create_app(ServedModel(eng, "tiny", draft="lookup", lookahead=4),
                     ServerConfig(list_catalog=False, temperature=0.5, api_key="k"))
    with TestClient(app, headers={"Authorization": "Bearer k"}) as c:
        yield c


# -- /tokenize, /detokenize -----------------------------------------------------------------------
def test_tokenize_and_detokenize_round_trip_as_llama_server_does(tc, eng):
    r = tc.post("/tokenize", json={"content": TEXT})
    assert r.status_code == 200
    tokens = r.json()["tokens"]
    assert tokens == eng.target.tokenize(TEXT, add_special=False, parse_special=True) and len(tokens) > 3
    # as llama-server: the pieces joined, a SentencePiece word's leading space included
    assert tc.post("/detokenize", json={"tokens": tokens}).json() == {"content": " " + TEXT}
    with_bos = tc.post("/tokenize", json={"content": TEXT, "add_special": True}).json()["tokens"]
    assert with_bos == [eng.target.bos] + tokens
    # llama-server's default parses control-token text; parse_special false keeps it text
    assert tc.post("/tokenize", json={"content": "<|im_end|>"}).json()["tokens"] == [4]
    assert len(tc.post("/tokenize", json={"content": "<|im_end|>", "parse_special": False}).json()["tokens"]) > 1
    # control tokens come back as their text, as llama-server's detokenize writes them
    assert tc.post("/detokenize", json={"tokens": [4] + tokens}).json()["content"] == "<|im_end|> " + TEXT
    # llama.cpp's mixed form: texts and token ids in order
    assert tc.post("/tokenize", json={"content": [TEXT, 4]}).json()["tokens"] == tokens + [4]


def test_tokenize_with_pieces_gives_bytes_where_a_piece_is_not_whole_utf8(tc, eng):
    r = tc.post("/tokenize", json={"content": "the é", "with_pieces": True}).json()["tokens"]
    assert all(set(t) == {"id", "piece"} for t in r)
    pieces = [t["piece"] for t in r]
    assert [p for p in pieces if isinstance(p, str)][0].strip() == "the"
    assert [0xC3] in pieces and [0xA9] in pieces  # é by byte fallback: one byte per token
    assert tc.post("/detokenize", json={"tokens": [t["id"] for t in r]}).json()["content"] == " the é"


@pytest.mark.parametrize("path, body, says", [
    ("/detokenize", {"tokens": [1, 99999]}, "99999 is not a token id of this model"),
    ("/detokenize", {"tokens": [-1]}, "-1 is not a token id"),
    ("/tokenize", {"content": ["x", 99999]}, "99999 is not a token id"),
    ("/tokenize", {}, "content"),
    ("/tokenize", {"content": 5}, "content"),
    ("/detokenize", {"tokens": "1 2"}, "tokens"),
])
def test_bad_token_requests_are_one_clear_400(tc, path, body, says):
    r = tc.post(path, json=body)
    assert r.status_code == 400, r.text
    assert says in r.json()["error"]["message"]


def test_the_token_endpoints_need_the_key(tc):
    for method, path in (("POST", "/tokenize"), ("POST", "/detokenize"), ("GET", "/props")):
        r = tc.request(method, path, json={"content": "x", "tokens": []}, headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 401


# -- /props ---------------------------------------------------------------------------------------
def test_props_reports_the_model_context_slots_and_defaults(tc, eng, tiny_target):
    p = tc.get("/props").json()
    assert p["model_path"] == str(tiny_target) and p["model_path"].endswith(".gguf")
    assert p["total_slots"] == 1 and p["model_alias"] == "tiny"
    d = p["default_generation_settings"]
    assert d["n_ctx"] == eng.n_ctx == 256 and d["speculative"] is True and d["is_processing"] is False
    assert d["params"]["temperature"] == 0.5 and d["params"]["speculative.n_max"] == 4
    assert d["params"]["tandem.draft"] == "lookup"
    assert p["chat_template"] == eng.target.chat_template and "im_start" in p["chat_template"]
    assert p["modalities"] == {"vision": False, "audio": False} and p["build_info"].startswith("tandem-")


# -- --alias '*' ----------------------------------------------------------------------------------
def test_alias_star_answers_every_name_and_says_so(monkeypatch, tiny_target, capsys):
    from engine.cli.main import main

    seen = {}
    monkeypatch.setattr("engine.serving.server.serve_forever",
                        lambda app, *a, **k: seen.update(app=app))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["serve", "--target", str(tiny_target), "--draft", "none", "--port", str(port),
                 "--alias", "gpt-4o", "--alias", "*"]) == 0
    assert seen["app"].state.served.aliases == ("gpt-4o",) and seen["app"].state.config.any_model_name is True
    assert "answering to every model name" in capsys.readouterr().err
    assert seen["app"].state.served.listed_ids() == [tiny_target.stem, "gpt-4o"]  # '*' is not a name to list


def test_an_empty_alias_is_one_line(capsys, tmp_path):
    from engine.cli.main import main

    assert main(["serve", "--target", str(tmp_path / "missing.gguf"), "--alias", " "]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "--alias" in err[0]


# -- CORS: one local page, three names -------------------------------------------------------------
@pytest.mark.parametrize("allowed", ["http://localhost:3000", "http://127.0.0.1:3000", "http://[::1]:3000"])
def test_a_loopback_origin_is_allowed_under_each_loopback_name(eng, allowed):
    app = create_app(ServedModel(eng, "tiny"), ServerConfig(list_catalog=False, cors_origins=(allowed,)))
    with TestClient(app) as c:
        for origin in ("http://localhost:3000", "http://127.0.0.1:3000", "http://[::1]:3000"):
            pre = c.options("/v1/chat/completions", headers={"Origin": origin, "Access-Control-Request-Method": "POST"})
            assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == origin
            assert c.get("/v1/models", headers={"Origin": origin}).headers["access-control-allow-origin"] == origin
        for other in ("http://localhost:3001", "https://localhost:3000", "http://localhost.evil.example:3000"):
            assert "access-control-allow-origin" not in c.get("/v1/models", headers={"Origin": other}).headers
