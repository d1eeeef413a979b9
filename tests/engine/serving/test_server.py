"""The OpenAI-compatible server, driven by the official `openai` client against a real
uvicorn server on a free port, with a tiny generated target + draft pair."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from engine import Engine  # noqa: E402
KEY = "test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
MSGS = [{"role": "user", "content": "the value of the item"}]
ROOT = Path(__file__).resolve().parents[3]


def wait_until(cond, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def reference(eng, prompt, **kw):
    """`engine.generate`'s answer, taken through the engine's queue so no request overlaps it."""
    q = eng.queue
    job = q.submit("test", bounded=False)
    done = None
    for ev in q.stream(eng, prompt, job, **kw):
        if ev.kind == "done":
            done = ev
    return done


@pytest.fixture(scope="module")
def served(tiny_target, tiny_draft):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(tiny_target, n_ctx=1024, metrics_log=False)
    app = create_app(ServedModel(eng, "tiny-pair", draft=tiny_draft, lookahead=4, aliases=("gpt-3.5-turbo",),
                                 catalog_id="tiny-catalog-id"),
                     ServerConfig(api_key=KEY, max_waiting=32, list_catalog=False))
    srv = ServerThread(app).start()
    yield SimpleNamespace(eng=eng, app=app, url=srv.url, queue=app.state.queue)
    srv.stop()
    assert not srv.running
    eng.close()


@pytest.fixture
def client(served):
    c = openai.OpenAI(base_url=served.url + "/v1", api_key=KEY, max_retries=0, timeout=60)
    yield c
    c.close()


def chat(client, messages=MSGS, **kw):
    extra = {k: kw.pop(k) for k in ("draft", "lookahead", "provenance", "repeat_penalty") if k in kw}
    kw.setdefault("max_tokens", 24)
    kw.setdefault("temperature", 0)
    kw.setdefault("model", "tiny-pair")
    return client.chat.completions.create(messages=messages, extra_body=extra or None, **kw)


# -- answers ------------------------------------------------------------------------------
@pytest.mark.parametrize("draft", ["none", "lookup", "suffix", "model"])
def test_greedy_chat_is_identical_to_engine_generate(served, client, draft):
    ref = reference(served.eng, MSGS, chat=True, max_tokens=24)
    r = chat(client, draft=draft)
    assert r.object == "chat.completion" and r.model == "tiny-pair"
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == ref.text
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == len(ref.tokens) == 24
    assert r.usage.prompt_tokens == ref.stats.prompt_tokens
    assert r.usage.total_tokens == r.usage.prompt_tokens + 24
    assert r.model_extra["timings"]["draft"] == {"none": "target", "lookup": "lookup", "suffix": "suffix", "model": "model"}[draft]


def test_streaming_chat_and_the_include_usage_chunk(served, client):
    ref = reference(served.eng, MSGS, chat=True, max_tokens=24)
    chunks = list(chat(client, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == ref.text
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finish) == 1 and finish[0].choices[0].finish_reason == "length"
    last = chunks[-1]
    assert last.choices == [] and last.usage.completion_tokens == 24
    assert last.usage.prompt_tokens == ref.stats.prompt_tokens
    t = last.model_extra["timings"]
    assert t["predicted_n"] == 24 and t["predicted_per_second"] > 0 and t["prompt_ms"] >= 0


def test_streaming_without_include_usage_has_no_usage_chunk(client):
    chunks = list(chat(client, stream=True, max_tokens=6))
    assert all(c.choices for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "length"
    assert "timings" in chunks[-1].model_extra  # as llama.cpp's server: the finishing chunk has them


def test_text_completions_match_engine_generate(served, client):
    prompt = "def count(items):"
    ref = reference(served.eng, prompt, max_tokens=16)
    r = client.completions.create(model="tiny-pair", prompt=prompt, max_tokens=16, temperature=0)
    assert r.object == "text_completion" and r.choices[0].text == ref.text
    assert r.usage.completion_tokens == 16
    streamed = client.completions.create(model="tiny-pair", prompt=prompt, max_tokens=16, temperature=0, stream=True)
    assert "".join(c.choices[0].text for c in streamed if c.choices) == ref.text


def test_stop_strings_end_the_answer_without_the_stop_text(served, client):
    full = chat(client, max_tokens=24).choices[0].message.content
    stop = full.split()[3]
    r = chat(client, max_tokens=24, stop=[stop])
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].message.content == full[: full.index(stop)]


# -- Tandem's per-request extensions ----------------------------------------------------------
def test_per_request_lookahead_and_draft_show_in_timings(client):
    t = chat(client, draft="model", lookahead=3).model_extra["timings"]
    assert t["lookahead"] == "3" and t["draft"] == "model"
    assert 0 < t["draft_n"] <= 3 * t["steps"] and 0 <= t["draft_n_accepted"] <= t["draft_n"]
    assert t["acceptance_rate"] == pytest.approx(t["draft_n_accepted"] / t["draft_n"])
    assert sum(t["provenance_counts"].values()) == t["predicted_n"] == 24
    t0 = chat(client, draft="model", lookahead=0).model_extra["timings"]
    assert t0["lookahead"] == "0" and t0["draft_n"] == 0 and t0["steps"] == 24
    assert chat(client, draft="model", lookahead="auto").model_extra["timings"]["lookahead"].startswith("auto")
    none = chat(client, draft="none", lookahead=8).model_extra["timings"]
    assert none["draft"] == "target" and none["draft_n"] == 0 and none["lookahead"] == "0"
    assert chat(client, draft="lookup", lookahead=5).model_extra["timings"]["draft"] == "lookup"


def test_provenance_of_every_streamed_token(client):
    chunks = list(chat(client, stream=True, draft="model", lookahead=4, provenance=True,
                       stream_options={"include_usage": True}))
    items = [p for c in chunks if c.choices for p in (c.choices[0].model_extra.get("provenance") or [])]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "".join(p["text"] for p in items) == text
    counts = {k: sum(1 for p in items if p["provenance"] == k) for k in ("draft", "target", "bonus", "plain")}
    t = chunks[-1].model_extra["timings"]
    assert len(items) == t["predicted_n"] == 24
    assert counts == {k: t["provenance_counts"].get(k, 0) for k in counts}
    assert t["draft_n"] > 0 and counts["target"] > 0  # drafts were made, and the target corrected some
    full = chat(client, draft="model", lookahead=4, provenance=True)
    assert "".join(p["text"] for p in full.choices[0].model_extra["provenance"]) == full.choices[0].message.content


def test_cached_prefix_is_reused_across_turns(client):
    first = chat(client, draft="none", max_tokens=8)
    turn2 = MSGS + [{"role": "assistant", "content": first.choices[0].message.content},
                    {"role": "user", "content": "and the count"}]
    r = chat(client, turn2, draft="none", max_tokens=8)
    cached = r.usage.prompt_tokens_details.cached_tokens
    t = r.model_extra["timings"]
    assert cached >= first.usage.prompt_tokens - 1 and t["cache_n"] == cached
    assert t["prompt_n"] == r.usage.prompt_tokens - cached


# -- refusals ---------------------------------------------------------------------------------
def test_api_key_is_required_when_set(served):
    bad = openai.OpenAI(base_url=served.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as e:
        bad.chat.completions.create(model="tiny-pair", messages=MSGS, max_tokens=2)
    assert e.value.status_code == 401
    r = httpx.post(served.url + "/v1/chat/completions", json={"messages": MSGS})
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    assert httpx.get(served.url + "/v1/models").status_code == 401
    assert httpx.get(served.url + "/health").status_code == 200  # health checks need no key


LONG = " ".join(["the"] * 1500)
BAD = [
    ("{", None, "not valid JSON"),
    ("[1, 2]", None, "JSON object"),
    ({}, "messages", "required"),
    ({"messages": []}, "messages", "at least one message"),
    ({"messages": [{"role": "user", "content": LONG}]}, "messages", "but the context holds 1024"),
    ({"lookahead": 17}, "lookahead", "0..16"),
    ({"lookahead": "fast"}, "lookahead", "auto"),
    ({"draft": "banana"}, "draft", "model"),
    ({"n": 17}, "n", "less than or equal"),
    ({"top_logprobs": 2}, None, "top_logprobs needs logprobs"),
    ({"logit_bias": {"abc": 1}}, "logit_bias", "token ids"),
    ({"logit_bias": {"5": 200}}, "logit_bias", "-100..100"),
    ({"logit_bias": {"99999999": 5}}, "logit_bias", "outside the vocabulary"),
    ({"presence_penalty": 3}, "presence_penalty", "less than or equal"),
    ({"repeat_penalty": 0}, "repeat_penalty", "greater than"),
    ({"temperature": -1}, "temperature", "greater than or equal"),
    ({"max_tokens": 0}, "max_tokens", "greater than or equal"),
    ({"messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role", "user"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, "messages[0].content",
     "part 0 (image_url): an image url must be a data:image/...;base64,... URI"),
    ({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]}, "messages[0].content", "text and image_url parts"),
    ({"functions": [{"name": "f"}]}, "functions", "send 'tools'"),
]


@pytest.mark.parametrize("body,param,fragment", BAD, ids=[b[2] for b in BAD])
def test_bad_requests_get_a_400_openai_error(served, body, param, fragment):
    if isinstance(body, dict):
        full = {"model": "tiny-pair", "messages": MSGS, "max_tokens": 4, **body}
        full = {k: v for k, v in full.items() if not (body == {} and k == "messages")}
        content = json.dumps(full)
    else:
        content = body
    r = httpx.post(served.url + "/v1/chat/completions", content=content,
                   headers={**AUTH, "Content-Type": "application/json"}, timeout=30)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["type"] == "invalid_request_error" and err["param"] == param
    assert fragment in err["message"], err["message"]
    assert httpx.get(served.url + "/health").json()["status"] == "ok"


def test_the_over_long_prompt_error_names_both_sizes(served):
    r = httpx.post(served.url + "/v1/completions", json={"prompt": LONG, "max_tokens": 2}, headers=AUTH)
    msg = r.json()["error"]["message"]
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"
    n = served.eng.tokens_for(LONG)
    assert f"the prompt is {len(n)} tokens but the context holds 1024" in msg


def test_draft_model_is_refused_when_the_server_has_none(tiny_target):
    from fastapi.testclient import TestClient

    from engine.serving.server import ServedModel, create_app

    eng = Engine(tiny_target, n_ctx=256, metrics_log=False)
    try:
        with TestClient(create_app(ServedModel(eng, "t", draft="lookup"))) as tc:
            r = tc.post("/v1/chat/completions", json={"messages": MSGS, "draft": "model", "max_tokens": 2})
            assert r.status_code == 400 and r.json()["error"]["param"] == "draft"
            ok = tc.post("/v1/chat/completions", json={"messages": MSGS, "max_tokens": 3, "temperature": 0})
            assert ok.json()["timings"]["draft"] == "lookup"  # the server's default draft
    finally:
        eng.close()


def test_unknown_endpoints_get_openai_shaped_404(served):
    r = httpx.get(served.url + "/v1/nothing", headers=AUTH)
    assert r.status_code == 404 and "no such endpoint" in r.json()["error"]["message"]


# -- the queue ------------------------------------------------------------------------------
def test_a_full_queue_answers_503_with_retry_after(served, client):
    q = served.queue
    old = q.max_waiting
    q.max_waiting = 1
    blocker = q.submit("test", bounded=False)
    q.wait_turn(blocker)  # the engine is busy with something else
    try:
        with ThreadPoolExecutor(1) as ex:
            waiting = ex.submit(chat, client, max_tokens=4)
            wait_until(lambda: q.waiting == 1, what="the first request to queue")
            r = httpx.post(served.url + "/v1/chat/completions", json={"messages": MSGS, "max_tokens": 4}, headers=AUTH)
            assert r.status_code == 503
            assert int(r.headers["Retry-After"]) >= 1
            assert r.json()["error"]["code"] == "queue_full" and r.json()["error"]["type"] == "server_error"
            q.finish(blocker)
            blocker = None
            assert waiting.result(timeout=30).usage.completion_tokens == 4  # the waiting one was served
    finally:
        if blocker is not None:
            q.finish(blocker)
        q.max_waiting = old


def test_a_client_that_disconnects_cancels_its_generation(served, client):
    q = served.queue
    done = []

    def slow_model(job, ev):  # a tiny model is too fast to catch mid-answer: slow it to ~200 tok/s
        if job.source == "server" and ev.kind == "token":
            time.sleep(0.005)
        elif job.source == "server" and ev.kind == "done":
            done.append(ev)

    q.add_listener(slow_model)
    cancelled_before = served.app.state.metrics.cancelled._value.get()
    try:
        body = {"messages": MSGS, "stream": True, "max_tokens": 900, "temperature": 0, "draft": "none"}
        with httpx.Client(timeout=30) as h:
            with h.stream("POST", served.url + "/v1/chat/completions", json=body, headers=AUTH) as resp:
                assert resp.status_code == 200
                n = 0
                for line in resp.iter_lines():
                    n += line.startswith("data: ")
                    if n >= 4:
                        break
        t_closed = time.monotonic()
        wait_until(lambda: bool(done), 10, "the cancelled generation to end")
        wait_until(lambda: not q.busy, 5, "the engine to be free")
        assert done[0].stats.finish_reason == "cancelled"
        assert 3 <= done[0].stats.generated_tokens < 900
        assert time.monotonic() - t_closed < 4.0  # far less than the ~4.5 s the whole answer takes
        wait_until(lambda: served.app.state.metrics.cancelled._value.get() == cancelled_before + 1, 5,
                   "the stream's disconnect to be counted as cancelled")
    finally:
        q.remove_listener(slow_model)
    t0 = time.monotonic()
    assert chat(client, max_tokens=4).usage.completion_tokens == 4
    assert time.monotonic() - t0 < 5.0


def test_twenty_concurrent_clients_are_answered_in_order(served, client):
    q = served.queue
    prompts = [f"the {w} of the item" for w in ("value", "count", "total", "data", "result", "name", "list", "self",
                                                   "class", "print", "while", "return", "import", "items", "None",
                                                   "True", "False", "which", "from", "this")]
    drafts = ["model", "lookup", "none"]
    expected = [reference(served.eng, [{"role": "user", "content": p}], chat=True, max_tokens=12).text for p in prompts]
    assert len(set(expected)) > 5
    started: list[str] = []

    def record(job, ev):
        if job.source == "server" and ev.kind == "prefill" and ev.done == 0:
            started.append(job.info["request_id"])

    q.add_listener(record)
    blocker = q.submit("test", bounded=False)
    q.wait_turn(blocker)  # hold the engine so all twenty line up, in the order they were sent
    ex = ThreadPoolExecutor(20)
    try:
        futures = []
        for i, p in enumerate(prompts):
            futures.append(ex.submit(chat, client, [{"role": "user", "content": p}], max_tokens=12,
                                     draft=drafts[i % 3]))
            wait_until(lambda: q.waiting == i + 1, timeout=60, what=f"request {i} to queue")
        q.finish(blocker)
        blocker = None
        results = [f.result(timeout=120) for f in futures]
    finally:
        if blocker is not None:  # let the queued requests run before waiting for their threads
            q.finish(blocker)
        ex.shutdown(wait=True)
        q.remove_listener(record)
    assert [r.choices[0].message.content for r in results] == expected
    assert started == [r.id.removeprefix("chatcmpl-") for r in results]
    assert not q.busy


# -- models, health, metrics ---------------------------------------------------------------
def test_models_health_and_metrics(served, client, tiny_target):
    models = client.models.list().data
    assert models[0].id == "tiny-pair" and models[0].model_extra["loaded"] is True
    assert models[0].model_extra["target"] == tiny_target.name
    assert client.models.retrieve("tiny-pair").model_extra["n_ctx"] == 1024
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")
    h = httpx.get(served.url + "/health").json()
    assert h == {"status": "ok", "model": "tiny-pair", "busy": False, "running": False, "waiting": 0, "preparing": 0}

    def metric(text: str, name: str) -> float:
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))

    before = httpx.get(served.url + "/metrics", headers=AUTH).text
    chat(client, draft="model", lookahead=4)
    after = httpx.get(served.url + "/metrics", headers=AUTH).text
    assert metric(after, "tandem_tokens_generated_total") - metric(before, "tandem_tokens_generated_total") == 24
    assert metric(after, "tandem_draft_tokens_total") > metric(before, "tandem_draft_tokens_total")
    assert metric(after, "tandem_speculative_steps_total") > metric(before, "tandem_speculative_steps_total")
    assert metric(after, 'tandem_requests_total{code="200",endpoint="/v1/chat/completions"}') >= 1
    assert "tandem_requests_waiting 0.0" in after


def test_model_aliases_and_unknown_names(served, client, tiny_target):
    assert [m.id for m in client.models.list().data] == ["tiny-pair", "gpt-3.5-turbo"]
    for name in ("tiny-pair", tiny_target.name, tiny_target.stem, "tiny-catalog-id", "gpt-3.5-turbo"):
        assert chat(client, model=name, max_tokens=2).usage.completion_tokens == 2
        assert client.models.retrieve(name).model_extra["loaded"] is True
    with pytest.raises(openai.NotFoundError) as e:
        chat(client, model="gpt-4o", max_tokens=2)
    assert e.value.status_code == 404
    assert e.value.body["code"] == "model_not_found" and e.value.body["param"] == "model"
    assert e.value.body["type"] == "invalid_request_error" and "gpt-4o" in e.value.body["message"]
    r = httpx.post(served.url + "/v1/completions", headers=AUTH, json={"model": "nope", "prompt": "x", "max_tokens": 1})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"


def test_any_model_name_answers_to_every_name(tiny_target):
    from fastapi.testclient import TestClient
    from engine.serving.server import ServedModel, ServerConfig, create_app

    body = {"messages": MSGS, "max_tokens": 2, "model": "gpt-4o-mini"}
    eng = Engine(tiny_target, n_ctx=256, metrics_log=False)
    try:
        for any_name, status in ((False, 404), (True, 200)):
            app = create_app(ServedModel(eng, "t", draft="lookup"), ServerConfig(any_model_name=any_name, list_catalog=False))
            with TestClient(app) as tc:
                assert tc.post("/v1/chat/completions", json=body).status_code == status
                assert tc.get("/v1/models/gpt-4o-mini").status_code == status
                assert [m["id"] for m in tc.get("/v1/models").json()["data"]] == ["t"]
    finally:
        eng.close()


def test_serve_alias_and_any_model_name_flags_reach_the_server(monkeypatch, tiny_target):
    from engine.cli import serve
    from engine.cli.main import main

    seen = {}
    monkeypatch.setattr("engine.serving.server.serve_forever",
                        lambda app, *a, **k: seen.update(served=app.state.served, config=app.state.config))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["serve", "--target", str(tiny_target), "--draft", "lookup", "--port", str(port),
                 "--alias", "a1", "--alias", "gpt-4", "--any-model-name"]) == 0
    assert seen["served"].aliases == ("a1", "gpt-4") and seen["config"].any_model_name is True
    assert serve.catalog_id_of(tiny_target) is None


def test_serve_chooses_its_slots_for_the_machine_unless_told(monkeypatch, tiny_target, capsys):
    """--parallel auto (the default) takes the machine's default, as the app's switch offers it,
    and says so on the start line; a number is kept; a word that is neither is one line."""
    from engine.cli.main import main
    from engine.models import hardware

    seen = []
    monkeypatch.setattr("engine.serving.server.serve_forever", lambda app, *a, **k: seen.append(app.state.config))
    monkeypatch.setattr(hardware, "default_parallel", lambda hw=None: 3)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    common = ["serve", "--target", str(tiny_target), "--draft", "lookup", "--port", str(port), "--ctx", "256"]
    assert main(common) == 0
    assert seen[-1].parallel == 3 and ", 3 slots (--parallel auto: " in capsys.readouterr().err
    assert main([*common, "--parallel", "1"]) == 0
    assert seen[-1].parallel == 1 and "slots" not in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main([*common, "--parallel", "many"])
    assert e.value.code == 2 and "give a whole number of slots or 'auto', got 'many'" in capsys.readouterr().err
    assert main([*common, "--parallel", "0"]) == 2 and "--parallel must be" in capsys.readouterr().err
    assert len(seen) == 2


# -- the command -----------------------------------------------------------------------------
@pytest.fixture
def busy_port():
    s = socket.socket()
    s.bind(("0.0.0.0", 0))
    s.listen(1)
    yield s.getsockname()[1]
    s.close()


def test_serve_on_a_busy_port_is_one_line_and_exit_2(tiny_target, busy_port, capsys):
    from engine.cli.main import main

    assert main(["serve", "--target", str(tiny_target), "--port", str(busy_port)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"tandem: error: cannot listen on 127.0.0.1:{busy_port}: Address already in use"]


def test_serve_off_loopback_without_a_key_warns(tiny_target, busy_port, capsys):
    from engine.cli.main import main

    assert main(["serve", "--target", str(tiny_target), "--host", "0.0.0.0", "--port", str(busy_port)]) == 2
    err = capsys.readouterr().err
    assert "tandem: warning: listening on 0.0.0.0 without --api-key" in err
    main(["serve", "--target", str(tiny_target), "--host", "0.0.0.0", "--port", str(busy_port), "--api-key", "k"])
    assert "warning" not in capsys.readouterr().err


def test_serve_with_a_missing_model_is_one_line(tmp_path, capsys):
    from engine.cli.main import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["serve", "--target", str(tmp_path / "nope.gguf"), "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tandem: error:") and "nope.gguf" in err[0]


def test_tandem_serve_runs_and_stops_on_ctrl_c(tiny_target, tiny_draft):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "serve", "--target", str(tiny_target), "--draft",
                             str(tiny_draft), "--port", str(port), "--ctx", "512", "--lookahead", "3"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        url = f"http://127.0.0.1:{port}"

        def up() -> bool:
            try:
                return httpx.get(url + "/health", timeout=1).status_code == 200
            except httpx.HTTPError:
                assert proc.poll() is None, proc.stderr.read()
                return False

        wait_until(up, 60, "tandem serve to answer")
        r = httpx.post(url + "/v1/chat/completions", json={"messages": MSGS, "max_tokens": 5, "temperature": 0}, timeout=30)
        assert r.status_code == 200
        assert r.json()["model"] == tiny_target.stem and r.json()["timings"]["lookahead"] == "3"
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f"on http://127.0.0.1:{port}/v1" in err


# -- the real SmolLM2 ------------------------------------------------------------------------
@pytest.mark.real
def test_real_smollm2_through_the_server_with_itself_as_draft():
    from conftest import require_real

    from engine.serving.server import ServedModel, ServerThread, create_app

    path = require_real("smollm2-135m-instruct-q4_1")
    eng = Engine(path, n_ctx=1024, metrics_log=False)
    try:
        app = create_app(ServedModel(eng, "smollm2", draft=path, lookahead=4))
        with ServerThread(app) as srv:
            c = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=120)
            q = [{"role": "user", "content": "Name three colours of the rainbow."}]
            ref = reference(eng, q, chat=True, max_tokens=32)
            plain = c.chat.completions.create(model="smollm2", messages=q, max_tokens=32, temperature=0,
                                              extra_body={"draft": "none"})
            assert plain.choices[0].message.content == ref.text  # same path, same numerics: identical
            chunks = list(c.chat.completions.create(model="smollm2", messages=q, max_tokens=32, temperature=0,
                                                    stream=True, stream_options={"include_usage": True}))
            text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
            t = chunks[-1].model_extra["timings"]
            assert text.strip() and t["draft"] == "model" and t["lookahead"] == "4"
            assert t["acceptance_rate"] > 0.9 and t["mean_tokens_per_step"] > 2.5  # a model drafting for itself
    finally:
        eng.close()


# -- CORS ------------------------------------------------------------------------------------
ORIGIN = "http://app.example:3000"


def test_cors_preflight_errors_and_streams_carry_the_headers(tiny_target, monkeypatch):
    from fastapi.testclient import TestClient
    from engine.serving.server import ServedModel, ServerConfig, create_app
    from engine.serving.server.apis.openai import Completions

    eng = Engine(tiny_target, n_ctx=256, metrics_log=False)
    try:
        app = create_app(ServedModel(eng, "t", draft="lookup"), ServerConfig(cors_origins=(ORIGIN,), list_catalog=False))
        with TestClient(app) as tc:
            pre = tc.options("/v1/chat/completions", headers={
                "Origin": ORIGIN, "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, content-type"})
            assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == ORIGIN
            assert "POST" in pre.headers["access-control-allow-methods"]
            assert "authorization" in pre.headers["access-control-allow-headers"].lower()
            h = {"Origin": ORIGIN}
            ok = tc.post("/v1/chat/completions", headers=h, json={"messages": MSGS, "max_tokens": 2})
            bad = tc.post("/v1/chat/completions", headers=h, json={"messages": MSGS, "model": "nope"})
            missing = tc.get("/v1/nothing", headers=h)
            with tc.stream("POST", "/v1/chat/completions", headers=h,
                           json={"messages": MSGS, "max_tokens": 2, "stream": True}) as sse:
                assert sse.headers["access-control-allow-origin"] == ORIGIN
                assert "[DONE]" in sse.read().decode()
            for r, code in ((ok, 200), (bad, 404), (missing, 404)):
                assert r.status_code == code and r.headers["access-control-allow-origin"] == ORIGIN
            other = tc.get("/v1/models", headers={"Origin": "http://evil.example"})
            assert "access-control-allow-origin" not in other.headers

            async def broken(self, *a, **k):
                raise RuntimeError("boom")

            monkeypatch.setattr(Completions, "generate", broken)
            bug = tc.post("/v1/chat/completions", headers=h, json={"messages": MSGS})
            assert bug.status_code == 500 and bug.json()["error"]["type"] == "server_error"
            assert bug.headers["access-control-allow-origin"] == ORIGIN
        with TestClient(create_app(ServedModel(eng, "t", draft="lookup"))) as tc:  # no origin set: no CORS
            r = tc.options("/v1/chat/completions", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"})
            assert r.status_code == 405 and "access-control-allow-origin" not in r.headers
    finally:
        eng.close()


def test_cors_star_needs_a_key_or_the_explicit_flag_even_on_loopback():
    """A page in the visitor's own browser reaches a loopback server too: '*' needs a key."""
    from engine.serving.server.config import check_cors

    assert "--api-key" in check_cors(("*",), api_key=None)
    assert check_cors(("*",), api_key=None, allow_any_origin=True) is None
    assert check_cors(("*",), api_key="k") is None
    assert "scheme" in check_cors(("localhost:3000",), api_key="k")
    assert check_cors((ORIGIN,), api_key=None) is None


def test_serve_refuses_star_cors_on_the_network_in_one_line(tiny_target, capsys):
    from engine.cli.main import main

    assert main(["serve", "--target", str(tiny_target), "--host", "0.0.0.0", "--port", "8080",
                 "--cors-origin", "*"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--api-key" in err[0]


# -- honest streaming ------------------------------------------------------------------------
@pytest.mark.parametrize("early", [False, True])
def test_the_role_chunk_waits_for_the_prompt_unless_early(tiny_target, early):
    """The worker is held at the event that completes the prompt: the role chunk arrives
    only once it is let go, or (with early_role_chunk) while it is still held."""
    import threading
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(tiny_target, n_ctx=256, metrics_log=False)
    gate, held = threading.Event(), threading.Event()

    def hold_prompt(job, ev):
        if job.source == "server" and ev.kind == "prefill" and ev.done >= ev.total:
            held.set()
            gate.wait(10)

    eng.queue.add_listener(hold_prompt)
    app = create_app(ServedModel(eng, "t", draft="lookup"), ServerConfig(early_role_chunk=early, list_catalog=False))
    first: list[tuple[str, bool]] = []
    try:
        with ServerThread(app) as srv, httpx.Client(timeout=30) as h:
            body = {"messages": [{"role": "user", "content": "a fresh prompt " + str(early)}], "stream": True,
                    "max_tokens": 3}

            def read() -> None:
                with h.stream("POST", srv.url + "/v1/chat/completions", json=body) as resp:
                    for line in resp.iter_lines():
                        if line.startswith("data: "):
                            first.append((line, gate.is_set()))
                            if len(first) == 1 and early:
                                gate.set()

            reader = threading.Thread(target=read)
            reader.start()
            wait_until(held.is_set, 10, "the prompt to be read")
            time.sleep(0.5)
            got_while_held = list(first)
            gate.set()
            reader.join(30)
    finally:
        gate.set()
        eng.queue.remove_listener(hold_prompt)
        eng.close()
    assert '"role":"assistant"' in first[0][0] and first[-1][0] == "data: [DONE]"
    if early:
        assert first[0][1] is False  # the role chunk came while the prompt's end was still held
    else:
        assert got_while_held == [] and first[0][1] is True


# -- sampling controls -----------------------------------------------------------------------
@pytest.mark.parametrize("draft", ["none", "lookup", "suffix", "model"])
def test_logit_bias_bans_a_token_on_every_path(served, client, draft):
    plain = reference(served.eng, MSGS, chat=True, max_tokens=12)
    ban = plain.tokens[0]
    r = chat(client, max_tokens=12, draft=draft, logit_bias={str(ban): -100})
    want = reference(served.eng, MSGS, chat=True, max_tokens=12, logit_bias={ban: -100.0})
    assert r.choices[0].message.content == want.text != plain.text
    assert ban not in want.tokens


@pytest.mark.parametrize("draft", ["none", "model"])
def test_chat_logprobs_are_the_targets_streaming_and_not(served, client, draft, tiny_draft):
    want = []
    for ev in served.eng.stream(MSGS, chat=True, max_tokens=10, logprobs=2):
        if ev.kind == "token":
            want.append(ev)
    r = chat(client, max_tokens=10, draft=draft, logprobs=True, top_logprobs=2)
    content = r.choices[0].logprobs.content
    # A token verified in a batch and the same token decoded alone go through different
    # matrix kernels, which round differently (4e-4 apart on AVX2 without AVX-512): allow
    # LOGPROB_TOL, and show the test still fails on a logprob from a neighbouring row or
    # from the draft's distribution, which lie much further away than that.
    assert [c.logprob for c in content] == pytest.approx([t.logprob for t in want], abs=LOGPROB_TOL)
    prompt = served.eng.tokens_for(MSGS, chat=True)
    gen = [t.token_id for t in want]
    right = _row_logprobs(served.eng.target, prompt, gen, shift=0)
    assert right == pytest.approx([t.logprob for t in want], abs=LOGPROB_TOL)
    from engine.llamacpp.llama import Model

    draft_model = Model(tiny_draft)
    try:
        wrong = {"the previous row": _row_logprobs(served.eng.target, prompt, gen, shift=-1),
                 "the next row": _row_logprobs(served.eng.target, prompt, gen, shift=1),
                 "the draft's row": _row_logprobs(draft_model, prompt, gen, shift=0)}
    finally:
        draft_model.close()
    for what, lps in wrong.items():
        assert max(abs(a - b) for a, b in zip(lps, right)) > 20 * LOGPROB_TOL, f"{what} is too close to tell apart"
    assert "".join(c.token for c in content) == r.choices[0].message.content
    assert all(len(c.top_logprobs) == 2 and c.top_logprobs[0].logprob >= c.top_logprobs[1].logprob for c in content)
    assert content[0].top_logprobs[0].token == content[0].token  # greedy: the chosen one is the best
    streamed = [c for ch in chat(client, max_tokens=10, draft=draft, logprobs=True, stream=True)
                for c in ((ch.choices[0].logprobs.content or []) if ch.choices and ch.choices[0].logprobs else [])]
    assert [c.logprob for c in streamed] == pytest.approx([c.logprob for c in content], abs=1e-4)
    assert chat(client, max_tokens=3).choices[0].logprobs is None


LOGPROB_TOL = 2e-3


def _row_logprobs(model, prompt: list[int], gen: list[int], shift: int) -> list[float]:
    """log p(gen[i]) read from the row `shift` positions away from the one that predicts it,
    all rows from one batched decode of prompt + gen."""
    from engine.llamacpp.context import Context
    from engine.llamacpp.runtime import RuntimeParams

    seq = prompt + gen
    ctx = Context(model, RuntimeParams(n_ctx=256, n_batch=256))
    try:
        rows = np.asarray(ctx.decode(seq, logits="all"), dtype=np.float64)
    finally:
        ctx.close()
    top = rows.max(axis=1, keepdims=True)
    logp = rows - top - np.log(np.exp(rows - top).sum(axis=1, keepdims=True))
    first = len(prompt) - 1  # the row that predicts gen[0]
    return [float(logp[min(max(first + i + shift, 0), len(seq) - 1), t]) for i, t in enumerate(gen)]


def test_text_completion_logprobs_shape(served, client):
    r = client.completions.create(model="tiny-pair", prompt="the value", max_tokens=5, temperature=0, logprobs=3)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 5
    assert "".join(lp.tokens) == r.choices[0].text and lp.text_offset[0] == 0
    assert all(len(t) <= 3 and max(t.values()) <= 0 for t in lp.top_logprobs)


def test_n_choices_are_generated_one_after_another(served, client):
    r = chat(client, n=3, max_tokens=6, temperature=1.0, seed=11, draft="none")  # a draft samples another path
    assert [c.index for c in r.choices] == [0, 1, 2] and r.usage.completion_tokens == 18
    for i, c in enumerate(r.choices):
        want = reference(served.eng, MSGS, chat=True, max_tokens=6, temperature=1.0, seed=11 + i)
        assert c.message.content == want.text
    chunks = list(chat(client, n=2, max_tokens=4, stream=True, stream_options={"include_usage": True}))
    text = {0: "", 1: ""}
    for ch in chunks:
        for c in ch.choices:
            text[c.index] += c.delta.content or ""
    greedy = reference(served.eng, MSGS, chat=True, max_tokens=4).text
    assert text == {0: greedy, 1: greedy} and chunks[-1].usage.completion_tokens == 8
    assert sum(1 for ch in chunks for c in ch.choices if c.finish_reason) == 2


def test_penalties_are_honoured_not_ignored(served, client):
    plain = chat(client, max_tokens=30, draft="none").choices[0].message.content
    pen = chat(client, max_tokens=30, draft="model", frequency_penalty=1.5, presence_penalty=1.0)
    want = reference(served.eng, MSGS, chat=True, max_tokens=30,
                     penalties=__import__("engine.decoding.sampling.logit_controls", fromlist=["Penalties"]).Penalties(
                         frequency=1.5, presence=1.0))
    assert pen.choices[0].message.content == want.text != plain
    rep = chat(client, max_tokens=30, repeat_penalty=1.5)
    assert rep.choices[0].message.content != plain


def test_the_other_apis_answer_on_the_same_server(served):
    """/v1/responses, /v1/messages and /api/chat are served (tests/test_server_*_api.py test them)."""
    for path, body in (("/v1/responses", {"input": "x", "max_output_tokens": 2}),
                       ("/v1/messages", {"max_tokens": 2, "messages": [{"role": "user", "content": "x"}]}),
                       ("/api/chat", {"stream": False, "messages": MSGS, "options": {"num_predict": 2}})):
        r = httpx.post(served.url + path, headers=AUTH, json={"model": "tiny-pair", **body}, timeout=60)
        assert r.status_code == 200, (path, r.text)
