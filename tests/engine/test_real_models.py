"""The real SmolLM2-135M (fetched into the store from its PyPI mirror) through the engine."""

from __future__ import annotations

import pytest

from conftest import require_real
from engine import Engine

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def smol():
    path = require_real("smollm2-135m-instruct-q4_1")
    e = Engine(path, n_ctx=1024, metrics_log=False)
    yield e, path
    e.close()


def test_chat_with_itself_as_draft_accepts_nearly_everything(smol):
    eng, path = smol
    r = eng.generate("Name three colours of the rainbow.", chat=True, draft_model=path, lookahead=4, max_tokens=48)
    assert r.stats.generated_tokens > 5
    assert r.text.strip()
    # batched and single-token decodes differ slightly on quantized models, so "close to 1"
    assert r.stats.acceptance_rate > 0.9
    assert r.stats.mean_tokens_per_step > 2.5


def test_speculative_greedy_matches_or_parts_at_a_near_tie(smol):
    """Identity on real quantized models holds except where the target's top two logits are
    within the batched-vs-single numeric noise of llama.cpp (measured: 0.05-0.15)."""
    from engine.decoding.quality import first_divergence

    eng, path = smol
    q = "Write a haiku about the sea."
    base = eng.generate(q, chat=True, max_tokens=40)
    fast = eng.generate(q, chat=True, draft_model=path, lookahead=4, max_tokens=40)
    div = first_divergence(eng.target, eng.tokens_for(q, chat=True), base.tokens, fast.tokens)
    if div is not None:
        assert div.margin < 0.25, f"parted at token {div.index} with margin {div.margin:.3f}"


def test_lookup_drafts_from_the_prompt_on_a_copy_task(smol):
    # SmolLM2-135M copies loosely (it renames functions), so only some drafts land; the
    # acceptance targets for lookup are measured on the 1.5B target by the benchmark.
    eng, _ = smol
    code = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
    r = eng.generate(f"Repeat this code exactly:\n{code}", chat=True, draft_model="lookup", lookahead=8, max_tokens=60)
    assert r.stats.drafted > 10
    assert r.stats.accepted > 5
    assert r.stats.provenance_counts["draft"] > 5
