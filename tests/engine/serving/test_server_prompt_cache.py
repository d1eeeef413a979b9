"""The prompt cache through `tandem serve` (issue #47 item 3): a document asked about again
after a request about another document, with another draft choice, or after the server
restarts, is not read again; `timings.cache_n` says how much was not."""

from __future__ import annotations

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from engine import Engine  # noqa: E402

DOC_A = "the value of the count of items " * 60  # ~360 tokens: long enough to be kept
DOC_B = "an item and its value in the list " * 60


def ask(url: str, doc: str, draft: str = "none") -> dict:
    r = httpx.post(url + "/v1/chat/completions", timeout=300, json={
        "messages": [{"role": "user", "content": doc + "\nWhat is it about?"}], "max_tokens": 4, "temperature": 0,
        "draft": draft})
    assert r.status_code == 200, r.text
    return r.json()


def serve(target, draft):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(target, n_ctx=2048, metrics_log=False, calibration=False)
    return eng, ServerThread(create_app(ServedModel(eng, "m", draft=draft, lookahead=3), ServerConfig())).start()


def test_a_document_is_read_once_across_requests_draft_choices_and_a_restart(tiny_target, tiny_draft):
    eng, srv = serve(tiny_target, tiny_draft)
    try:
        cold = ask(srv.url, DOC_A)
        n = cold["usage"]["prompt_tokens"]
        assert n > 300 and cold["timings"]["cache_n"] == 0
        other = ask(srv.url, DOC_B)
        assert other["timings"]["cache_n"] < n // 4  # another document: read
        again = ask(srv.url, DOC_A, draft="model")  # another draft choice: another decoder, same cache
        assert again["timings"]["cache_n"] >= n - 2 and again["timings"]["prompt_n"] <= 2
        assert again["choices"][0]["message"]["content"] == cold["choices"][0]["message"]["content"]
    finally:
        srv.stop()
        eng.close()  # waits for the cache's files
    eng, srv = serve(tiny_target, tiny_draft)  # a restart: the state comes from disk
    try:
        after = ask(srv.url, DOC_A, draft="lookup")
        assert after["timings"]["cache_n"] >= n - 2, after["timings"]
        assert after["choices"][0]["message"]["content"] == cold["choices"][0]["message"]["content"]
    finally:
        srv.stop()
        eng.close()
