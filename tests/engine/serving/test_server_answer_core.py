"""The answer core (`engine/serving/server/answer.py`): each prompt is tokenised once per
request whatever the API, and no API reads another's output back."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from engine import Engine  # noqa: E402

SERVER = Path(__file__).parents[3] / "engine" / "serving" / "server"
MSGS = [{"role": "user", "content": "the value of the item"}]


@pytest.fixture(scope="module")
def served(tiny_target, tiny_draft):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(tiny_target, n_ctx=1024, metrics_log=False, calibration=False)
    srv = ServerThread(create_app(ServedModel(eng, "m", draft=tiny_draft, lookahead=3), ServerConfig())).start()
    yield eng, srv.url
    srv.stop()
    eng.close()


def counted(monkeypatch):
    """A list that gets one entry per llama_tokenize call, from any thread."""
    from engine.llamacpp import llama

    calls: list[int] = []
    real = llama.llama_cpp.llama_tokenize

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(llama.llama_cpp, "llama_tokenize", counting)
    return calls


@pytest.mark.parametrize("path,body", [
    ("/v1/chat/completions", {"messages": MSGS, "max_tokens": 4}),
    ("/v1/chat/completions", {"messages": MSGS, "max_tokens": 4, "stream": True}),
    ("/v1/messages", {"messages": MSGS, "max_tokens": 4, "stream": True}),
    ("/v1/messages", {"messages": MSGS, "max_tokens": 4}),
    ("/v1/responses", {"input": MSGS, "max_output_tokens": 4, "stream": True}),
    ("/api/chat", {"messages": MSGS, "options": {"num_predict": 4}}),
    ("/api/chat", {"messages": MSGS, "stream": False, "options": {"num_predict": 4}}),
])
def test_the_prompt_is_tokenised_once_per_request(served, monkeypatch, path, body):
    eng, url = served
    calls = counted(monkeypatch)
    once = len(eng.tokens_for(MSGS, chat=True, limit=eng.n_ctx))  # what one reading of the prompt costs
    per_reading, calls[:] = len(calls), []
    assert once > 0 and per_reading >= 1
    r = httpx.post(url + path, json={"temperature": 0, **body}, timeout=120)
    assert r.status_code == 200, r.text
    assert len(calls) == per_reading, f"{path}: the prompt was tokenised {len(calls) / per_reading:g} times"


def test_no_api_reads_a_response_the_server_built():
    """No `json.loads` of a response body or stream chunk: the APIs write the core's events."""
    offenders = []
    for f in SERVER.rglob("*.py"):
        text = f.read_text()
        for pattern in (r"\.body_iterator", r"json\.loads\(\s*(resp|response)\.body", r"json\.loads\(\s*(data|line|chunk)\b",
                        r"json\.loads\(\s*line\("):
            if re.search(pattern, text):
                offenders.append(f"{f.relative_to(SERVER)}: {pattern}")
    assert not offenders, offenders


def test_the_server_package_has_rooms():
    """The server's top level holds the core and its neighbours; each API is a peer in `apis/`
    and the checks at the door are in `doors/` (issue #46: at most 16 entries at the top)."""
    top = [p for p in SERVER.iterdir() if (p.suffix == ".py" or (p / "__init__.py").exists())]
    assert len(top) <= 16, sorted(p.name for p in top)
    apis = {p.stem for p in (SERVER / "apis").glob("*.py")}
    assert {"openai", "responses", "anthropic", "ollama", "infill"} <= apis
    assert json.dumps(sorted(apis))  # listed for the failure message above


def test_a_stream_never_read_does_not_hold_the_line(tiny_target):
    """A streamed answer whose response is never iterated (its client left before the stream
    began) must not keep its place in line for good: the next request is answered."""
    import asyncio

    from engine.serving.server import ServedModel, ServerConfig
    from engine.serving.server.answer import AnswerCore
    from engine.serving.server.prom import ServerMetrics
    from engine.serving.server.schemas import ChatCompletionRequest

    class Client:
        async def is_disconnected(self) -> bool:
            return False

    eng = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False)
    try:
        core = AnswerCore(ServedModel(eng, "m"), ServerConfig(), eng.queue, ServerMetrics(eng.queue))

        async def two() -> str:
            await core.begin(ChatCompletionRequest(messages=MSGS, max_tokens=4, stream=True))  # never read
            later = await core.begin(ChatCompletionRequest(messages=MSGS, max_tokens=4, temperature=0))
            whole = await asyncio.wait_for(later.choice(0).whole(Client()), timeout=120)
            return whole.finish

        assert asyncio.run(two()) in ("stop", "length")
    finally:
        eng.close()
