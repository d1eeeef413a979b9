"""litellm (the provider-agnostic client many tools sit on) against `tandem serve`: chat
completion streamed and not, and embeddings, through its generic OpenAI-compatible provider
(`model="openai/<name>"`, `api_base=...`). Answers must equal the official `openai` SDK's."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

# litellm fetches its model price list from GitHub on import unless told to use its bundled copy
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
litellm = pytest.importorskip("litellm")
openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")

from engine import Engine  # noqa: E402

# litellm's own pydantic models warn about ReadOnly TypedDict items on import: not ours to fix
pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")

KEY = "litellm-key"
MSGS = [{"role": "user", "content": "the value of the item"}]


@pytest.fixture(scope="module")
def served(tiny_target):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    litellm.telemetry = False
    eng = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False)
    srv = ServerThread(create_app(ServedModel(eng, "tiny", draft="lookup", lookahead=4),
                                  ServerConfig(api_key=KEY))).start()
    sdk = openai.OpenAI(base_url=srv.url + "/v1", api_key=KEY, max_retries=0, timeout=60)
    yield SimpleNamespace(base=srv.url + "/v1", sdk=sdk)
    sdk.close()
    srv.stop()
    eng.close()


def ask(served, **kw):
    return dict(model="openai/tiny", api_base=served.base, api_key=KEY, messages=MSGS, max_tokens=24,
                temperature=0, num_retries=0, timeout=60, **kw)


def test_litellm_completion_streamed_and_not_equals_the_sdk(served):
    expected = served.sdk.chat.completions.create(model="tiny", messages=MSGS, max_tokens=24,
                                                  temperature=0).choices[0].message.content
    assert expected
    whole = litellm.completion(**ask(served))
    assert whole.choices[0].message.content == expected
    assert whole.choices[0].finish_reason in ("stop", "length")
    assert whole.usage.completion_tokens > 0
    chunks = list(litellm.completion(**ask(served, stream=True)))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == expected
    assert any(c.choices and c.choices[0].finish_reason in ("stop", "length") for c in chunks)


def test_litellm_embedding_equals_the_sdk(served):
    texts = ["the value of the item", "a different sentence"]
    expected = served.sdk.embeddings.create(model="tiny", input=texts, encoding_format="float")
    got = litellm.embedding(model="openai/tiny", api_base=served.base, api_key=KEY, input=texts, timeout=60)
    assert len(got.data) == 2
    for mine, theirs in zip(got.data, expected.data):
        vec = mine["embedding"] if isinstance(mine, dict) else mine.embedding
        assert vec == pytest.approx(theirs.embedding, abs=1e-6)
    assert got.usage.prompt_tokens == expected.usage.prompt_tokens > 0
