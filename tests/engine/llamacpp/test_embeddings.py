"""Embeddings from the loaded target (engine/llamacpp/embedding.py) and `POST /v1/embeddings`
(engine/serving/server/embeddings.py): mean-pooled and normalised as llama-server computes them,
deterministic, batch = singles, base64 = floats, never overlapping or disturbing a generation."""

from __future__ import annotations

import base64
import ctypes
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from engine import Engine
from engine.llamacpp.embedding import EmbeddingContext
from engine.llamacpp.runtime import RuntimeParams

from conftest import require_real

TEXT = "the value of the item is the value"
OTHER = "a different sentence about other things"


@pytest.fixture(scope="module")
def eng(tiny_target):
    e = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False)
    yield e
    e.close()


def llama_mean_reference(model, tokens: list[int]) -> np.ndarray:
    """What llama-server answers for a generation model started with --embeddings --pooling mean:
    llama.cpp's own LLAMA_POOLING_TYPE_MEAN over one micro-batch, then the L2 norm."""
    import llama_cpp

    p = llama_cpp.llama_context_default_params()
    p.n_ctx = p.n_batch = p.n_ubatch = 256
    p.n_seq_max, p.n_threads, p.n_threads_batch = 1, 1, 1
    p.embeddings, p.pooling_type = True, llama_cpp.LLAMA_POOLING_TYPE_MEAN
    ctx = model.init_context(p)
    batch = llama_cpp.llama_batch_init(len(tokens), 0, 1)
    try:
        for i, t in enumerate(tokens):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = t, i, 1, 1
            batch.seq_id[i][0] = 0
        batch.n_tokens = len(tokens)
        assert llama_cpp.llama_decode(ctx, batch) == 0
        ptr = llama_cpp.llama_get_embeddings_seq(ctx, 0)
        v = np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), shape=(model.n_embd,)).copy()
    finally:
        llama_cpp.llama_batch_free(batch)
        llama_cpp.llama_free(ctx)
    return v / np.linalg.norm(v)


# -- the engine ---------------------------------------------------------------------------
def test_embedding_is_llama_cpps_mean_pooling_normalised(eng):
    toks = eng.embedding_tokens(TEXT)
    [v] = eng.embed([toks])
    assert v.dtype == np.float32 and v.shape == (eng.target.n_embd,)
    assert abs(float(np.dot(v, v)) - 1.0) < 1e-5
    np.testing.assert_allclose(v, llama_mean_reference(eng.target, toks), atol=2e-5)


def test_a_closed_model_is_refused_with_one_line(tiny_target):
    """The embedding context reaches the weights through Model's own methods: a closed model
    is a ModelLoadError naming its file, not a crash inside llama.cpp."""
    from engine.errors import ModelLoadError
    from engine.llamacpp.llama import Model

    m = Model(tiny_target)
    assert m.has_encoder is False
    m.close()
    with pytest.raises(ModelLoadError, match="model is closed"):
        EmbeddingContext(m, RuntimeParams(n_ctx=64))


def test_same_input_same_vector_and_batch_equals_singles(eng):
    a, b = eng.embedding_tokens(TEXT), eng.embedding_tokens(OTHER)
    singles = [eng.embed([a])[0], eng.embed([b])[0]]
    batch = eng.embed([a, b, a])
    np.testing.assert_array_equal(batch[0], singles[0])
    np.testing.assert_array_equal(batch[1], singles[1])
    np.testing.assert_array_equal(batch[2], singles[0])
    assert not np.allclose(singles[0], singles[1])  # the input matters


def test_chunked_read_equals_one_pass(tiny_target, eng):
    """An input longer than n_batch is read in chunks, each attending to the cached earlier
    ones: the same vector as reading it at once."""
    toks = eng.embedding_tokens(" ".join([TEXT, OTHER] * 8))
    assert len(toks) > 40
    small = EmbeddingContext(eng.target, RuntimeParams(n_ctx=512, n_batch=16, n_threads=1))
    try:
        chunked = small.embed(toks)
    finally:
        small.close()
    whole = eng.embed([toks])[0]
    # the same up to ggml's kernel choice per batch size (different summation order, measured
    # cos 0.9999996); a chunk that lost the earlier ones (no cache) gives cos 0.78
    assert float(np.dot(chunked, whole)) > 0.99999
    assert float(np.abs(chunked - whole).max()) < 1e-3


def test_generation_is_unchanged_by_embeddings_and_back(tiny_target):
    """Greedy output before and after an embedding is identical (the embedding context leaves
    the generation context alone), and an embedding is the same after a generation."""
    e = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False)
    try:
        assert e._embedder is None  # nothing made until asked
        first = e.generate(TEXT, max_tokens=24, temperature=0, draft_model="lookup").text
        v1 = e.embed([e.embedding_tokens(OTHER)])[0]
        assert e._embedder is not None
        second = e.generate(TEXT, max_tokens=24, temperature=0, draft_model="lookup").text
        v2 = e.embed([e.embedding_tokens(OTHER)])[0]
        assert first == second and first
        np.testing.assert_array_equal(v1, v2)
    finally:
        e.close()
    assert e._embedder is None  # freed with the engine
    with pytest.raises(Exception, match="closed"):
        e.embed([[1, 2, 3]])


def test_a_cancelled_embedding_stops_and_the_next_one_is_unchanged(eng):
    from engine.decoding.cancel import CancelToken
    from engine.errors import Cancelled

    toks = eng.embedding_tokens(TEXT)
    expected = eng.embed([toks])[0]
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        eng.embed([toks], cancel=token)
    np.testing.assert_array_equal(eng.embed([toks])[0], expected)  # nothing left behind in its cache


# -- the server ---------------------------------------------------------------------------
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
KEY = "k"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def served(tiny_target):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    e = Engine(tiny_target, n_ctx=256, metrics_log=False, calibration=False)
    app = create_app(ServedModel(e, "tiny", draft="lookup", lookahead=4), ServerConfig(api_key=KEY))
    srv = ServerThread(app).start()
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key=KEY, max_retries=0, timeout=60)
    yield SimpleNamespace(eng=e, url=srv.url, client=client, queue=app.state.queue)
    client.close()
    srv.stop()
    e.close()


def post(served, body, **kw):
    return httpx.post(served.url + "/v1/embeddings", headers=AUTH, json={"model": "tiny", **body}, timeout=60, **kw)


def test_openai_sdk_single_batch_and_token_inputs(served):
    eng = served.eng
    one = served.client.embeddings.create(model="tiny", input=TEXT)  # the SDK asks for base64 and decodes it
    assert len(one.data) == 1 and one.data[0].index == 0 and one.model == "tiny"
    assert len(one.data[0].embedding) == eng.target.n_embd
    toks = eng.embedding_tokens(TEXT)
    assert one.usage.prompt_tokens == one.usage.total_tokens == len(toks)
    many = served.client.embeddings.create(model="tiny", input=[TEXT, OTHER], encoding_format="float")
    assert [d.index for d in many.data] == [0, 1]
    np.testing.assert_allclose(many.data[0].embedding, one.data[0].embedding, atol=1e-7)
    other = served.client.embeddings.create(model="tiny", input=OTHER, encoding_format="float")
    np.testing.assert_allclose(many.data[1].embedding, other.data[0].embedding, atol=1e-7)
    by_ids = served.client.embeddings.create(model="tiny", input=toks, encoding_format="float")
    np.testing.assert_allclose(by_ids.data[0].embedding, one.data[0].embedding, atol=1e-7)
    lists = served.client.embeddings.create(model="tiny", input=[toks, toks], encoding_format="float")
    assert len(lists.data) == 2 and lists.usage.prompt_tokens == 2 * len(toks)


def test_base64_decodes_to_the_float_vector(served):
    floats = post(served, {"input": TEXT}).json()["data"][0]["embedding"]
    b64 = post(served, {"input": TEXT, "encoding_format": "base64"}).json()["data"][0]["embedding"]
    assert isinstance(b64, str)
    decoded = np.frombuffer(base64.b64decode(b64), dtype="<f4")
    np.testing.assert_array_equal(decoded, np.asarray(floats, dtype=np.float32))
    assert abs(float(np.dot(decoded, decoded)) - 1.0) < 1e-5


@pytest.mark.parametrize("body, code, words", [
    ({"input": ""}, "invalid_value", "empty string"),
    ({"input": []}, "invalid_value", "empty list"),
    ({"input": [TEXT, ""]}, "invalid_value", "input 1 is an empty string"),
    ({"input": [[]]}, "invalid_value", "empty token list"),
    ({"input": [1, "a"]}, "invalid_value", "input 0 is int"),
    ({"input": [[1, -2]]}, "invalid_value", "not a token id"),
    ({"input": {"content": "x"}}, "invalid_value", "a string, a list of strings"),
    ({"input": [10**6]}, "invalid_value", "outside the vocabulary"),
    ({"input": TEXT, "encoding_format": "int8"}, "invalid_value", "encoding_format"),
    ({"input": TEXT, "dimensions": 8}, "invalid_value", "cannot be shortened"),
    ({"input": "word " * 400}, "context_length_exceeded", "too large for the context of 256"),
    ({"input": [list(range(5, 300))]}, "context_length_exceeded", "input 0 is 295 tokens, too large"),
])
def test_bad_requests_get_one_clear_400(served, body, code, words):
    r = post(served, body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert words in err["message"] and (err["code"] == code or code == "invalid_value")


def test_dimensions_equal_to_the_size_and_unknown_model(served):
    n = served.eng.target.n_embd
    assert post(served, {"input": TEXT, "dimensions": n}).status_code == 200
    r = post(served, {"input": TEXT, "model": "nope"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    assert httpx.post(served.url + "/v1/embeddings", json={"input": TEXT}).status_code == 401


def test_embeddings_wait_for_a_running_turn_and_leave_generation_unchanged(served):
    """An embeddings request queues behind a turn held on the engine (a generation in progress)
    and runs only once it ends; greedy chat output is the same before and after it."""
    chat = dict(model="tiny", messages=[{"role": "user", "content": TEXT}], max_tokens=24, temperature=0)
    before = served.client.chat.completions.create(**chat).choices[0].message.content
    job = served.queue.submit("test", bounded=False)
    answer: list = []
    with served.queue.turn(job):
        t = threading.Thread(target=lambda: answer.append(post(served, {"input": OTHER})))
        t.start()
        time.sleep(1.0)
        assert not answer and served.queue.waiting == 1  # in line, not running beside the turn
    t.join(30)
    assert answer and answer[0].status_code == 200
    after = served.client.chat.completions.create(**chat).choices[0].message.content
    assert before == after and before


# -- a real model -------------------------------------------------------------------------
@pytest.mark.real
def test_smollm2_embeddings_are_deterministic_and_normalised():
    path = require_real("smollm2-135m-instruct-q4_1")
    e = Engine(path, n_ctx=512, metrics_log=False, calibration=False)
    try:
        texts = ["I believe the meaning of life is", "This is a test"]
        toks = [e.embedding_tokens(t) for t in texts]
        batch = e.embed(toks)
        for t, v in zip(toks, batch):
            assert v.shape == (576,) and abs(float(np.dot(v, v)) - 1.0) < 1e-4
            np.testing.assert_array_equal(e.embed([t])[0], v)
            np.testing.assert_allclose(v, llama_mean_reference(e.target, t), atol=1e-4)
        before = e.generate(texts[0], max_tokens=16, temperature=0).text
        e.embed(toks)
        assert e.generate(texts[0], max_tokens=16, temperature=0).text == before
    finally:
        e.close()


def test_an_encoder_is_pooled_as_it_declares_in_one_batch(tiny_bert):
    """An embedding model (a BERT encoder declaring mean pooling) is pooled by llama.cpp, the
    input in one micro-batch, as llama-server pools it; the server's mean-pooling refusal for it
    is unchanged (/v1/embeddings serves generation models)."""
    import llama_cpp

    from engine.llamacpp.embedding import embedding_refusal, own_pooling
    from engine.llamacpp.llama import Model

    m = Model(tiny_bert)
    ctx = EmbeddingContext(m, RuntimeParams(n_ctx=4096, n_batch=16, n_threads=1))
    try:
        assert own_pooling(m) == llama_cpp.LLAMA_POOLING_TYPE_MEAN and "not a causal" in embedding_refusal(m)
        assert ctx.n_ctx == ctx.n_batch == 512  # the model's trained context, read at once
        toks = m.tokenize(" ".join([TEXT, OTHER] * 3))
        assert len(toks) > 16
        v = ctx.embed(toks)
        mean = np.zeros(m.n_embd)  # llama.cpp's own states, averaged here: the same vector
        p = llama_cpp.llama_context_default_params()
        p.n_ctx = p.n_batch = p.n_ubatch = 512
        p.n_seq_max, p.n_threads, p.n_threads_batch = 1, 1, 1
        p.embeddings, p.pooling_type = True, llama_cpp.LLAMA_POOLING_TYPE_NONE
        raw = m.init_context(p)
        batch = llama_cpp.llama_batch_init(len(toks), 0, 1)
        try:
            for i, t in enumerate(toks):
                batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = t, i, 1, 1
                batch.seq_id[i][0] = 0
            batch.n_tokens = len(toks)
            assert llama_cpp.llama_decode(raw, batch) == 0
            ptr = llama_cpp.llama_get_embeddings(raw)
            mean = np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)),
                                         shape=(len(toks), m.n_embd)).mean(axis=0)
        finally:
            llama_cpp.llama_batch_free(batch)
            llama_cpp.llama_free(raw)
        np.testing.assert_allclose(v, mean / np.linalg.norm(mean), atol=2e-5)
        np.testing.assert_array_equal(ctx.embed(toks), v)
    finally:
        ctx.close()
        m.close()
