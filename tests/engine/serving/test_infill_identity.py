"""Greedy /infill writes the same tokens with `draft: "lookup"` as with `none` (issue 45, item 12),
on editor-like requests to a random-weight FIM model, where prompt lookup's drafts are often
rejected and rolled back, and with the server's cache holding the other mode's run. Where two
runs part, the target's top-two margin there says whether it was a near-tie (llama.cpp's
batched and single-token passes round apart) or a bug; tiny F32 models do not part at all."""

from __future__ import annotations

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from engine import Engine  # noqa: E402
from engine.models.tinymodel import make_vocab, write_model  # noqa: E402
from engine.decoding.prompting.fim_layout import ExtraChunk, infill_tokens  # noqa: E402

CODE = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
CASES = [  # what llama.vscode and llama.vim send: prefix, suffix, chunks of other files, editor stops
    {"input_prefix": CODE + "\n\ndef mul(a, b):\n    ", "input_suffix": "\n\nprint(mul(2, 3))\n"},
    {"input_prefix": "import os\n" + CODE, "input_suffix": CODE, "input_extra": [{"filename": "lib.py", "text": CODE}],
     "n_indent": 4},
    {"input_prefix": CODE * 3, "input_suffix": "", "prompt": "def", "stop": ["\n\n\n"]},
    {"input_prefix": "x = 1\n", "input_suffix": "y = 2\n", "input_extra": [{"text": "z = 3\n" * 20}]},
    {"input_prefix": CODE + CODE.replace("a", "x"), "input_suffix": "return", "n_indent": 1},
    {"input_prefix": "# the same words over and over\n" + "return a + b\n" * 8, "input_suffix": "\n"},
]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    path = write_model(tmp_path_factory.mktemp("fim_random") / "fim-random.gguf", vocab=make_vocab(fim=True),
                       seed=3, name="fim-random")
    eng = Engine(path, n_ctx=2048, metrics_log=False, calibration=False)
    srv = ServerThread(create_app(ServedModel(eng, "fim", lookahead=4), ServerConfig())).start()
    yield eng, srv.url
    srv.stop()
    eng.close()


def run(url: str, case: dict, draft: str) -> dict:
    r = httpx.post(url + "/infill", timeout=120, json={**case, "draft": draft, "temperature": 0, "n_predict": 48,
                                                       "return_tokens": True, "cache_prompt": True})
    assert r.status_code == 200, r.text
    return r.json()


def parting(eng: Engine, case: dict, ref: list[int], other: list[int]) -> str:
    """Where `other` parts from `ref`, and the target's margin there (the /infill prompt rebuilt)."""
    target = eng.target
    typed = target.tokenize(case["prompt"], add_special=False, parse_special=True) if case.get("prompt") else []
    extra = [ExtraChunk(c["text"], c.get("filename", "tmp")) for c in case.get("input_extra", [])]
    prompt = infill_tokens(target, target.fim_tokens(), case["input_prefix"], case["input_suffix"], extra, typed,
                           n_ctx=eng.n_ctx, n_predict=48)
    div = eng.first_divergence(prompt, ref, other)
    return "one is the other's prefix" if div is None else div.describe(target)


def test_greedy_infill_is_the_same_with_lookup_whatever_the_cache_holds(served):
    eng, url = served
    drafted = accepted = 0
    for i, case in enumerate(CASES):
        order = ["none", "lookup", "lookup", "none"] if i % 2 == 0 else ["lookup", "none", "none", "lookup"]
        runs = [(draft, run(url, case, draft)) for draft in order]  # each after the other's run in the cache
        ref = next(b for d, b in runs if d == "none")
        for draft, b in runs:
            if (b["tokens"], b["content"]) != (ref["tokens"], ref["content"]):
                where = parting(eng, case, ref["tokens"], b["tokens"])
                pytest.fail(f"case {i}: {draft} wrote {b['content']!r}, none {ref['content']!r}: {where}")
            assert b["stop_type"] == ref["stop_type"]
            if draft == "lookup":
                drafted += b["timings"]["draft_n"]
                accepted += b["timings"]["draft_n_accepted"]
    assert 0 < accepted < drafted  # lookup drafted, and some drafts were rolled back

