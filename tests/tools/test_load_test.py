"""The load test against Tandem's own server on a tiny model: every round's requests come
back, tokens and first-token times are counted, texts are compared with one client's, and the
table and files say it; an unreachable server is an error per request, not a crash."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from engine import Engine  # noqa: E402
from tools import load_test  # noqa: E402

PROMPTS = ["the value of", "def count items def count items", "return total and", "while item is not"]


@pytest.fixture(scope="module")
def url(tiny_target):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(tiny_target, n_ctx=512, metrics_log=False)
    srv = ServerThread(create_app(ServedModel(eng, "m", draft="lookup", lookahead="auto"),
                                  ServerConfig(parallel=2, list_catalog=False))).start()
    yield srv.url
    srv.stop()
    eng.close()


def test_rounds_at_one_and_two_clients_count_every_token_and_match_one_clients_texts(url):
    rounds = load_test.run(url, "m", PROMPTS, [1, 2], ["none", "lookup"], max_tokens=12, repeat=1)
    assert [(r.clients, r.draft) for r in rounds] == [(1, "none"), (1, "lookup"), (2, "none"), (2, "lookup")]
    for r in rounds:
        assert [s.prompt for s in r.sent] == [0, 1, 2, 3] and not any(s.error for s in r.sent)
        assert all(0 < s.tokens <= 12 and s.ttft is not None and s.ttft <= s.end - s.start for s in r.sent)
        assert r.rate > 0 and r.summary()["ttft_p95_s"] >= r.summary()["ttft_p50_s"]
    same = load_test.identical_to_alone(rounds)
    assert same["2/none"] == {"identical": 4, "compared": 4} and same["2/lookup"] == {"identical": 4, "compared": 4}
    md = load_test.table(rounds)
    assert md.count("\n") == 5 and "| 2 | lookup |" in md and "4/4" in md


def test_with_a_server_factory_every_round_has_a_fresh_server(tiny_target):
    """A draft model's suffix companion remembers answers: a server kept across rounds would
    draft a repeated prompt from its earlier answer."""
    import contextlib

    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    urls = []

    @contextlib.contextmanager
    def fresh():
        eng = Engine(tiny_target, n_ctx=512, metrics_log=False)
        try:
            with ServerThread(create_app(ServedModel(eng, "m", draft="lookup", lookahead="auto"),
                                         ServerConfig(parallel=2, list_catalog=False))) as srv:
                urls.append(srv.url)
                yield srv.url
        finally:
            eng.close()

    rounds = load_test.run(fresh, "m", PROMPTS[:2], [1, 2], ["none", "lookup"], max_tokens=6, repeat=1)
    assert len(rounds) == 4 and len(set(urls)) == 4 and not any(s.error for r in rounds for s in r.sent)


def test_the_servers_options_serve_the_pairs_draft_or_the_targets_choice():
    assert load_test.serve_options("qwen2.5-coder-1.5b", None, None, 4, 2048)[:2] == ["--pair", "qwen2.5-coder-1.5b"]
    opts = load_test.serve_options(None, "t.gguf", None, 2, 512)
    assert opts[:4] == ["--target", "t.gguf", "--draft", "lookup"] and "--no-history-draft" in opts
    assert opts[opts.index("--parallel") + 1] == "2" and opts[opts.index("--alias") + 1] == "m"


def test_a_server_that_is_not_there_gives_errors_per_request():
    rnd = load_test.run_round("http://127.0.0.1:9", "m", PROMPTS[:2], 2, "none", 4, timeout=5)
    assert len(rnd.sent) == 2 and all(s.error and s.tokens == 0 for s in rnd.sent)


def test_the_command_writes_its_table_and_rounds(tiny_target, tmp_path, capsys):
    out = tmp_path / "load"
    assert load_test.main(["--target", str(tiny_target), "--parallel", "2", "--ctx", "512", "--clients", "1,2",
                           "--drafts", "none,lookup", "--suite", "chat", "--limit", "2", "--max-tokens", "6",
                           "--repeat", "1", "--out", str(out)]) == 0
    data = json.loads((out / "rounds.json").read_text())
    assert len(data["rounds"]) == 4 and all(r["requests"] == 2 for r in data["rounds"])
    assert (out / "table.md").read_text().startswith("| clients | draft |")
    assert "| 1 | none |" in capsys.readouterr().out


def test_a_stream_that_ends_without_a_finish_reason_is_an_error_not_an_answer():
    """llama-cpp-python's server, by default, ends a running stream when another request comes
    (HTTP 200, no tokens, no finish_reason): counted as a lost request, not a short answer."""
    import httpx

    def handler(finish):
        chunk = {"choices": [{"delta": {"content": "hi"}, "finish_reason": finish}]}
        body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"
        return lambda request: httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})

    with httpx.Client(transport=httpx.MockTransport(handler(None))) as http:
        lost = load_test.stream_one(http, "http://x", "m", "hello", 8, None, 0)
    with httpx.Client(transport=httpx.MockTransport(handler("stop"))) as http:
        kept = load_test.stream_one(http, "http://x", "m", "hello", 8, None, 0)
    assert lost.error == "the stream ended without a finish_reason after 1 content chunks"
    assert kept.error is None and kept.text == "hi" and kept.tokens == 1


def test_the_table_gives_times_to_the_hundredth_and_a_dash_where_nothing_came():
    """The median of two repetitions' times is printed as a time, not as float noise (a table
    carried 38.215999999999994), and a cell where every request failed says so."""
    def round_(rep: int, ttft: float, draft: str = "none", error: str | None = None) -> load_test.Round:
        first = None if error else 1.0 + ttft
        return load_test.Round(4, draft, rep, [load_test.Sent(0, 1.0, first, 50.0, 0 if error else 10, error=error)])

    md = load_test.table([round_(0, 36.123), round_(1, 40.309), round_(0, 0, "lookup", "HTTP 500"),
                          round_(1, 0, "lookup", "HTTP 500")])
    none_row = next(line for line in md.splitlines() if "| none |" in line)
    lookup_row = next(line for line in md.splitlines() if "| lookup |" in line)
    assert "| 38.22 | 38.22 |" in none_row, none_row
    assert "| - | - |" in lookup_row and lookup_row.endswith("| 2 |"), lookup_row
