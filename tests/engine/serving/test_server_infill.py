"""Fill-in-the-middle through the server: llama-server's /infill (as llama.vscode and llama.vim
call it) and /v1/completions with `suffix`, on a tiny scripted model that carries FIM tokens;
and /v1/completions with lists of prompts and token-id prompts."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from engine import Engine  # noqa: E402
from engine.models.tinymodel import FIM_TOKENS, chain_through, make_vocab, write_model  # noqa: E402
from engine.serving.server.apis.editor_limits import EditorLimits  # noqa: E402
from engine.decoding.prompting.fim_layout import ExtraChunk, infill_tokens  # noqa: E402

COPY = "abcdefghijklm"  # distinct characters: the scripted model writes them in order after FIM_MID
FIM_VOCAB = make_vocab(fim=True)


@pytest.fixture(scope="module")
def fim_model(tmp_path_factory):
    v = FIM_VOCAB
    ids = [v.id(FIM_TOKENS["fim_mid"])] + [v.id(c) for c in COPY] + [2]
    return write_model(tmp_path_factory.mktemp("fim") / "fim.gguf", vocab=v, chain=chain_through(ids), name="fim")


@pytest.fixture(scope="module")
def served(fim_model, tiny_target):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(fim_model, n_ctx=1024, metrics_log=False, calibration=False)
    app = create_app(ServedModel(eng, "fim", draft=fim_model, lookahead=4), ServerConfig())
    srv = ServerThread(app).start()
    plain = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False)  # no FIM tokens
    plain_srv = ServerThread(create_app(ServedModel(plain, "plain"), ServerConfig())).start()
    yield SimpleNamespace(eng=eng, url=srv.url, plain_url=plain_srv.url)
    srv.stop()
    plain_srv.stop()
    eng.close()
    plain.close()


def infill(url: str, **body):
    r = httpx.post(url + "/infill", json={"temperature": 0, **body}, timeout=120)
    return r.status_code, r.json()


def test_an_infill_cancelled_midway_is_an_error_not_an_empty_200(fim_model):
    """Whatever cancels a generation whose client still waits (not its editor's cut), the
    client is told: an empty 200 with stop_type 'none' read as 'nothing to suggest'."""
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(fim_model, n_ctx=1024, metrics_log=False, calibration=False)
    eng.queue.add_listener(lambda job, ev: job.cancel.cancel() if ev.kind == "token" else None)
    try:
        with ServerThread(create_app(ServedModel(eng, "fim"), ServerConfig())) as srv:
            code, body = infill(srv.url, input_prefix="x", input_suffix="y", n_predict=8)
            assert code == 503 and body["error"]["code"] == "cancelled", body
            with httpx.stream("POST", srv.url + "/infill", timeout=60, json={
                    "input_prefix": "x", "input_suffix": "y", "n_predict": 8, "temperature": 0, "stream": True}) as r:
                lines = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
            assert json.loads(lines[-1])["error"]["code"] == "cancelled", lines[-1]
    finally:
        eng.close()


# -- the prompt ----------------------------------------------------------------------------
class FakeVocab:
    """Each character one token (its code point); BOS 1."""

    add_bos, bos = True, 1

    def tokenize(self, text, *, add_special=True, parse_special=False):
        return [ord(c) for c in text]


def test_the_prompt_is_llama_servers_repo_level_layout():
    from engine.llamacpp.llama import FimTokens

    fim = FimTokens(pre=-1, suf=-2, mid=-3, pad=-4, rep=-5, sep=-6)
    got = infill_tokens(FakeVocab(), fim, "pre", "suf", [ExtraChunk("x = 1", "a.py")], [ord("t")], n_ctx=4096)
    t = FakeVocab().tokenize
    assert got == ([-5] + t("myproject\n") + [-6] + t("a.py\n") + t("x = 1") + [-6] + t("filename\n")
                   + [1, -1] + t("pre") + t("t") + [-2] + t("suf") + [-3])
    # without repo-level tokens: no repo name, chunks behind llama-server's snippet separator
    bare = FimTokens(pre=-1, suf=-2, mid=-3)
    got = infill_tokens(FakeVocab(), bare, "p", "s", [ExtraChunk("x")], n_ctx=4096)
    assert got == t("\n\n--- snippet ---\n\n") + t("x") + [1, -1] + t("p") + [-2] + t("s") + [-3]


def test_the_budgets_keep_the_prefix_end_the_suffix_start_and_the_extra_end():
    from engine.llamacpp.llama import FimTokens

    fim = FimTokens(pre=-1, suf=-2, mid=-3)
    n_ctx = 64  # budget batch 32: prefix 24, suffix 32/4 - 2 = 6, extra 64 - 32 - 2*4 = 24 tokens
    pre, suf, extra = "P" * 50 + "end", "start" + "S" * 50, "E" * 50 + "near"
    got = infill_tokens(FakeVocab(), fim, pre, suf, [ExtraChunk(extra)], n_ctx=n_ctx, n_predict=4)
    t = FakeVocab().tokenize
    snippet_and_extra = t("\n\n--- snippet ---\n\n") + t(extra)
    assert got == snippet_and_extra[-24:] + [1, -1] + t(pre)[-24:] + [-2] + t("startS") + [-3]


def test_prefix_and_suffix_may_mix_text_and_token_ids():
    from engine.llamacpp.llama import FimTokens

    fim = FimTokens(pre=-1, suf=-2, mid=-3)
    got = infill_tokens(FakeVocab(), fim, ["a", 500, "b"], [600], n_ctx=4096)
    assert got == [1, -1, ord("a"), 500, ord("b"), -2, 600, -3]


def test_the_fim_tokens_come_from_the_gguf_metadata(fim_model, tiny_target):
    from engine.llamacpp.llama import Model

    m = Model(fim_model, vocab_only=True)
    fim = m.fim_tokens()
    assert fim is not None
    assert [fim.pre, fim.suf, fim.mid, fim.pad, fim.rep, fim.sep] == [FIM_VOCAB.id(t) for t in FIM_TOKENS.values()]
    assert Model(tiny_target, vocab_only=True).fim_tokens() is None


def test_a_target_split_over_rpc_reports_the_same_fim_tokens(fim_model):
    from engine.llamacpp.llama import Model
    from engine.serving.remote_engine import RemoteTarget

    vocab = Model(fim_model, vocab_only=True)
    info = {"name": "fim", "architecture": "llama", "chat_template": None, "n_vocab": vocab.n_vocab, "n_gpu_layers": 0}
    remote = RemoteTarget(vocab, fim_model, info)  # the parent's view of a target held by a child process
    assert remote.fim_tokens() == vocab.fim_tokens() and (remote.add_bos, remote.bos) == (vocab.add_bos, vocab.bos)


# -- /infill ---------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["input_extra", "input_suffix", "input_prefix"])
def test_infill_is_identical_with_and_without_lookup_which_drafts_from_every_part(served, where):
    source = {"input_prefix": "x", "input_suffix": "y", "input_extra": []}
    if where == "input_extra":
        source["input_extra"] = [{"filename": "lib.py", "text": COPY}]
    else:
        source[where] = COPY
    answers = {d: infill(served.url, draft=d, n_predict=32, **source) for d in ("none", "lookup", "model")}
    assert all(status == 200 for status, _ in answers.values())
    texts = {d: b["content"] for d, (_, b) in answers.items()}
    assert texts["none"] == texts["lookup"] == texts["model"] == COPY
    assert answers["none"][1]["timings"]["draft_n"] == 0
    assert answers["lookup"][1]["timings"]["draft_n_accepted"] > 0  # lookup copied from `where`
    status, nothing = infill(served.url, draft="lookup", n_predict=32, input_prefix="x", input_suffix="y")
    assert nothing["content"] == COPY and nothing["timings"]["draft_n_accepted"] == 0  # no source: no copy


def test_infill_body_has_what_editors_read(served):
    status, b = infill(served.url, input_prefix="def f():\n", input_suffix="\n", prompt="  ", n_predict=4,
                       return_tokens=True)
    assert status == 200
    assert b["content"] == COPY[:4] and b["stop"] is True and b["stop_type"] == "limit"
    assert b["tokens_predicted"] == 4 and len(b["tokens"]) == 4 and b["tokens_evaluated"] > 4
    assert "<|fim_prefix|>" in b["prompt"] and b["prompt"].endswith("<|fim_middle|>")
    assert b["model"] == "fim" and b["generation_settings"]["n_predict"] == 4
    assert {"prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "predicted_per_second"} <= set(b["timings"])
    _, full = infill(served.url, input_prefix="a", input_suffix="b")
    assert full["content"] == COPY and full["stop_type"] == "eos" and full["stopping_word"] == ""
    _, word = infill(served.url, input_prefix="a", input_suffix="b", stop=["zz", "fg"])
    assert word["content"] == "abcde" and word["stop_type"] == "word" and word["stopping_word"] == "fg"


def test_llama_vscode_request_with_response_fields(served):
    fields = ["content", "timings/prompt_n", "timings/predicted_n", "truncated", "tokens_cached", "missing/field"]
    status, b = infill(served.url, input_prefix="a", input_suffix="b", input_extra=[{"text": "x"}], prompt="",
                       n_predict=128, top_k=40, top_p=0.99, stream=False, n_indent=0, t_max_prompt_ms=500,
                       t_max_predict_ms=1000, samplers=["top_k", "top_p", "infill"], cache_prompt=True,
                       response_fields=fields)
    assert status == 200
    assert set(b) == {"content", "timings/prompt_n", "timings/predicted_n", "truncated", "tokens_cached"}
    assert b["timings/predicted_n"] == len(COPY) and b["truncated"] is False


def test_n_indent_ends_the_answer_at_a_dedented_line(tmp_path):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    v = FIM_VOCAB
    ids = [v.id(FIM_TOKENS["fim_mid"]), v.id("a"), v.id("b"), v.byte(ord("\n")), v.id("c"), v.id("d"), 2]
    path = write_model(tmp_path / "lines.gguf", vocab=v, chain=chain_through(ids), name="lines")
    eng = Engine(path, n_ctx=512, metrics_log=False, calibration=False)
    try:
        with ServerThread(create_app(ServedModel(eng, "lines"), ServerConfig())) as srv:
            _, whole = infill(srv.url, input_prefix="x", input_suffix="y")
            _, cut = infill(srv.url, input_prefix="x", input_suffix="y", n_indent=1)
    finally:
        eng.close()
    assert whole["content"] == "ab\ncd" and whole["stop_type"] == "eos"
    assert cut["content"] == "ab\n" and cut["stop_type"] == "limit"  # "cd" is indented 0 < 1


def test_n_predict_zero_reads_the_prompt_and_writes_nothing(served):
    # llama.vscode's warm-up of its ring buffer: empty prefix and suffix, the chunks, nothing to write
    status, b = infill(served.url, input_prefix="", input_suffix="", input_extra=[{"filename": "a.py", "text": "x"}],
                       prompt="", n_predict=0, samplers=[], cache_prompt=True, t_max_prompt_ms=1, t_max_predict_ms=1)
    assert status == 200 and b["content"] == "" and b["tokens_predicted"] == 0 and b["stop_type"] == "limit"
    assert "a.py" in b["prompt"]


def test_streamed_infill_adds_up_to_the_answer_and_ends_with_the_final_body(served):
    parts, final = [], None
    body = {"input_prefix": "a", "input_suffix": "b", "stream": True, "temperature": 0}
    with httpx.stream("POST", served.url + "/infill", json=body, timeout=120) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: "):
                msg = json.loads(line[6:])
                if msg["stop"]:
                    final = msg
                else:
                    parts.append(msg["content"])
    assert "".join(parts) == COPY
    assert final is not None and final["content"] == "" and final["tokens_predicted"] == len(COPY)


@pytest.mark.parametrize("body, fragment", [
    ({"input_suffix": "b"}, "input_prefix: this field is required"),
    ({"input_prefix": "a", "input_suffix": "b", "input_extra": [{"filename": "x"}]}, "input_extra[0].text"),
    ({"input_prefix": "a", "input_suffix": "b", "input_extra": "text"}, "input_extra"),
    ({"input_prefix": "a", "input_suffix": "b", "n": 2}, "one completion per request"),
    ({"input_prefix": [1, -5], "input_suffix": "b"}, "not a token id"),
    ({"input_prefix": [99999], "input_suffix": "b"}, "outside the vocabulary"),
])
def test_bad_infill_requests_get_one_line(served, body, fragment):
    r = httpx.post(served.url + "/infill", json=body, timeout=60)
    assert r.status_code == 400, r.text
    assert fragment in r.json()["error"]["message"]


def test_a_model_without_fim_tokens_is_refused_in_one_line(served):
    for path, body in (("/infill", {"input_prefix": "a", "input_suffix": "b"}),
                       ("/v1/completions", {"prompt": "a", "suffix": "b", "max_tokens": 2})):
        r = httpx.post(served.plain_url + path, json=body, timeout=60)
        assert r.status_code == 400
        assert r.json()["error"]["message"].startswith("this model has no fill-in-the-middle tokens")
    ok = httpx.post(served.plain_url + "/v1/completions", json={"prompt": "a", "suffix": "", "max_tokens": 2})
    assert ok.status_code == 200  # an empty suffix is no suffix


def test_real_smollm2_has_no_fim_tokens_and_is_refused():
    from conftest import require_real
    from engine.llamacpp.llama import Model

    path = require_real("smollm2-135m-instruct-q4_1")
    assert Model(path, vocab_only=True).fim_tokens() is None  # SmolLM2 has <repo_name> but no FIM prefix/suffix


# -- /v1/completions ---------------------------------------------------------------------------
def test_completions_suffix_fills_in_the_middle_like_infill(served):
    r = httpx.post(served.url + "/v1/completions", timeout=60,
                   json={"prompt": "def f():", "suffix": "return x", "max_tokens": 32, "temperature": 0})
    assert r.status_code == 200
    _, b = infill(served.url, input_prefix="def f():", input_suffix="return x", n_predict=32)
    assert r.json()["choices"][0]["text"] == b["content"] == COPY


def text_of(url, prompt, **kw):
    r = httpx.post(url + "/v1/completions", json={"prompt": prompt, "max_tokens": 6, "temperature": 0, **kw}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_list_of_prompts_gets_one_choice_each_in_order(served):
    tok = served.eng.target.tokenize
    prompts = ["the value", tok("of the item"), "is"]
    singles = [text_of(served.url, p)["choices"][0]["text"] for p in prompts]
    both = text_of(served.url, prompts, n=2)
    assert [c["index"] for c in both["choices"]] == list(range(6))
    assert [c["text"] for c in both["choices"]] == [s for s in singles for _ in range(2)]
    one = [text_of(served.url, p)["usage"]["prompt_tokens"] for p in prompts]
    assert both["usage"]["prompt_tokens"] == sum(one)  # each prompt once, not once per choice


def test_token_id_prompts_match_their_text(served):
    tok = served.eng.target.tokenize("the value of")
    as_text = text_of(served.url, "the value of")["choices"][0]["text"]
    assert text_of(served.url, tok)["choices"][0]["text"] == as_text
    assert [c["text"] for c in text_of(served.url, [tok, tok])["choices"]] == [as_text, as_text]


def test_a_streamed_list_of_prompts_sends_each_choice_in_order(served):
    prompts = ["the value", "is"]
    full = [c["text"] for c in text_of(served.url, prompts)["choices"]]
    pieces: dict[int, str] = {}
    body = {"prompt": prompts, "max_tokens": 6, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    usage = None
    with httpx.stream("POST", served.url + "/v1/completions", json=body, timeout=60) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                msg = json.loads(line[6:])
                for c in msg["choices"]:
                    pieces[c["index"]] = pieces.get(c["index"], "") + c["text"]
                usage = msg.get("usage") or usage
    assert [pieces[i] for i in range(2)] == full
    assert usage["prompt_tokens"] == sum(text_of(served.url, p)["usage"]["prompt_tokens"] for p in prompts)


@pytest.mark.parametrize("prompt, fragment", [
    ([], "must be a string, a list of strings"),
    ([[]], "empty token list"),
    ([1, True], "True is not a token id"),
    ([[1, 2], [3, -1]], "prompt 1: -1 is not a token id"),
    ([99999], "token id 99999 is outside the vocabulary"),
])
def test_bad_prompts_get_one_line(served, prompt, fragment):
    r = httpx.post(served.url + "/v1/completions", json={"prompt": prompt, "max_tokens": 2}, timeout=60)
    assert r.status_code == 400 and fragment in r.json()["error"]["message"]


# -- the editors' stops -------------------------------------------------------------------------
def test_n_indent_cuts_the_first_line_indented_less():
    lim = EditorLimits(n_indent=4)
    pieces = ["    x = 1", "\n", "    y", "\n", "re", "turn"]
    out = [lim.feed(p) for p in pieces]
    assert lim.stopped and lim.text == "    x = 1\n    y\n"  # the dedented line is cut after its indentation
    assert [stop for _, stop in out] == [False] * 4 + [True, True]


def test_t_max_predict_ms_stops_at_a_new_line_once_the_time_is_up():
    now = [0.0]
    lim = EditorLimits(t_max_predict_ms=100, clock=lambda: now[0])
    assert lim.feed("a") == ("a", False)
    now[0] = 0.5
    assert lim.feed("b") == ("b", False)  # over time, but no new line yet
    assert lim.feed("c\n") == ("c\n", True)
