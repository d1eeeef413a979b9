"""What the Responses, Ollama and Anthropic endpoints share with the OpenAI ones: a client
that leaves a stream cancels its generation, the Host check and the body limit apply, and
requests count in /metrics under their route."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from engine import Engine  # noqa: E402
from test_server import wait_until  # noqa: E402

MSGS = [{"role": "user", "content": "the value of the item"}]
STREAMS = {
    "/v1/responses": {"input": "the value of the item", "max_output_tokens": 900, "stream": True},
    "/api/chat": {"messages": MSGS, "options": {"num_predict": 900}},
    "/api/generate": {"prompt": "the value of the item", "options": {"num_predict": 900}},
    "/v1/messages": {"messages": MSGS, "max_tokens": 900, "stream": True},
}


@pytest.fixture(scope="module")
def served(tiny_target):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(tiny_target, n_ctx=1024, metrics_log=False)
    app = create_app(ServedModel(eng, "tiny-pair"), ServerConfig(max_body=4096))
    srv = ServerThread(app).start()
    yield SimpleNamespace(eng=eng, app=app, url=srv.url, queue=app.state.queue)
    srv.stop()
    eng.close()


@pytest.mark.parametrize("path", list(STREAMS))
def test_a_client_that_leaves_a_stream_cancels_its_generation(served, path):
    q = served.queue
    done = []

    def slow_model(job, ev):  # a tiny model is too fast to catch mid-answer
        if job.source == "server" and ev.kind == "token":
            time.sleep(0.005)
        elif job.source == "server" and ev.kind == "done":
            done.append(ev)

    q.add_listener(slow_model)
    try:
        body = {"model": "tiny-pair", "temperature": 0, **STREAMS[path]}
        with httpx.Client(timeout=60) as h:
            with h.stream("POST", served.url + path, json=body) as resp:
                assert resp.status_code == 200
                lines = 0
                for line in resp.iter_lines():
                    lines += bool(line.strip())
                    if lines >= 6:
                        break
        wait_until(lambda: bool(done), 30, "the cancelled generation to end")
        wait_until(lambda: not q.busy, 30, "the engine to be free")
        assert done[0].stats.finish_reason == "cancelled" and done[0].stats.generated_tokens < 900
    finally:
        q.remove_listener(slow_model)


@pytest.mark.parametrize("path", list(STREAMS))
def test_host_check_and_body_limit_apply(served, path):
    r = httpx.post(served.url + path, json={"model": "tiny-pair", **STREAMS[path]}, headers={"Host": "evil.example"})
    assert r.status_code == 403
    big = {"model": "tiny-pair", **STREAMS[path], "pad": "x" * 5000}
    assert httpx.post(served.url + path, json=big).status_code == 413


def test_requests_count_under_their_route(served):
    httpx.get(served.url + "/api/tags").raise_for_status()
    text = httpx.get(served.url + "/metrics").text
    assert 'endpoint="/api/tags"' in text


@pytest.mark.real
def test_real_smollm2_answers_the_same_through_every_api():
    """One greedy answer from the real SmolLM2 (drafting for itself), through the four APIs' own clients."""
    from conftest import require_real

    from engine.serving.server import ServedModel, ServerThread, create_app

    anthropic = pytest.importorskip("anthropic")
    ollama = pytest.importorskip("ollama")
    openai = pytest.importorskip("openai")
    path = require_real("smollm2-135m-instruct-q4_1")
    eng = Engine(path, n_ctx=1024, metrics_log=False)
    try:
        with ServerThread(create_app(ServedModel(eng, "smollm2", draft=path, lookahead=4))) as srv:
            q = [{"role": "user", "content": "Name three colours of the rainbow."}]
            oa = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=120)
            want = oa.chat.completions.create(model="smollm2", messages=q, max_tokens=32, temperature=0)
            text = want.choices[0].message.content
            assert text.strip()
            assert oa.responses.create(model="smollm2", input=q[0]["content"], max_output_tokens=32,
                                       temperature=0).output_text == text
            an = anthropic.Anthropic(base_url=srv.url, api_key="none", max_retries=0, timeout=120)
            m = an.messages.create(model="smollm2", max_tokens=32, messages=q, extra_body={"temperature": 0})
            assert m.content[0].text == text
            ol = ollama.Client(host=srv.url, timeout=120)
            r = ol.chat(model="smollm2", messages=q, options={"temperature": 0, "num_predict": 32}, stream=False)
            assert r.message.content == text
            oa.close()
            an.close()
    finally:
        eng.close()


def _drain(agen):
    import asyncio

    async def run():
        return [ev async for ev in agen]

    return asyncio.run(run())


def test_the_core_puts_a_pieces_tokens_on_its_first_event_and_names_tool_call_pieces():
    from engine.serving.server import answer

    tokens = [SimpleNamespace(token_id=1, text="")]
    head = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}
    args = {"index": 0, "function": {"arguments": "{}"}}
    evs = answer._group("Hi", [head, args], tokens, 5)
    assert evs == [answer.Text("Hi", tokens, 5), answer.CallStart(0, "call_1", "f", [], 5),
                   answer.CallArgs(0, "{}", [], 5)]
    evs = answer._group("", [args], tokens, 7)  # no text: the tokens ride on the call's piece
    assert evs == [answer.CallArgs(0, "{}", tokens, 7)]
    assert answer._group("", [], tokens, 0) == []  # nothing to send yet: the tokens wait


def test_a_failure_mid_stream_in_each_apis_shape():
    import json

    from engine.serving.server import answer
    from engine.serving.server.apis import anthropic, ollama, responses
    from engine.serving.server.errors import ApiError

    async def failing():
        yield answer.Text("Hi")
        yield answer.Failed(ApiError(503, "the server is stopping", type="server_error", code="server_shutdown"))

    chat = SimpleNamespace(provenance=False)
    msgs = _drain(anthropic.Messages(None).sse(failing(), chat, "msg_1", "m", None))
    last = json.loads(msgs[-1]["data"])
    assert msgs[-1]["event"] == "error" and last["error"]["type"] == "overloaded_error"
    lines = _drain(ollama.Ollama(None, None, None).lines(failing(), chat, "m", chat=True))
    assert json.loads(lines[-1]) == {"error": "the server is stopping"}
    req = responses.ResponsesRequest(input="x")
    events = _drain(responses.Responses(None).sse(failing(), chat, responses.ResponseShape(req, "m"), [], True))
    body = json.loads(events[-1]["data"])
    assert body["type"] == "response.failed" and body["response"]["error"]["code"] == "server_shutdown"
