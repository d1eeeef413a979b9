"""Speculation with a draft of another vocabulary, bridged through text: exact output,
the text boundary, incremental re-tokenisation, the compatibility verdict, sampling."""

from __future__ import annotations

import numpy as np
import pytest

from engine import Engine
from engine.decoding.drafting.bridge_drafter import BridgeDrafter
from engine.decoding.decoder import Decoder
from engine.decoding.drafting.drafters import NO_RULES, ModelDrafter, Proposal
from engine.decoding.events import DoneEvent
from engine.llamacpp.llama import Model
from engine.decoding.drafting.lookahead import Fixed
from engine.llamacpp.runtime import RuntimeParams
from engine.decoding.sampling.sampler import Dist, SamplingParams
from engine.decoding.request import GenerationRequest
from engine.errors import IncompatiblePairError
from engine.models.compat import VocabInfo, check_pair, check_vocabs
from engine.models.tinymodel import NORMAL, respelled_vocab, write_model

from test_decoder import _chi_square, _exact_two_token_distribution


@pytest.fixture(scope="session")
def respelled(models_dir, vocab):
    """The tiny target's weights under another vocabulary: agrees with it on any text."""
    v, rows = respelled_vocab(vocab)
    return write_model(models_dir / "respelled.gguf", seed=1, n_layer=2, vocab=v, rows=rows, name="respelled")


@pytest.fixture(scope="session")
def respelled_other(models_dir, vocab):
    """Another vocabulary and other weights: disagrees with the target often."""
    v, rows = respelled_vocab(vocab)
    return write_model(models_dir / "respelled_other.gguf", seed=2, n_layer=1, vocab=v, rows=rows, name="respelled-other")


@pytest.fixture(scope="module")
def eng(tiny_target):
    e = Engine(tiny_target, n_ctx=1024, metrics_log=False)
    yield e
    e.close()


def test_verdict_says_bridged_with_the_cost(tiny_target, respelled):
    v = check_pair(tiny_target, respelled)
    assert v.compatible and v.bridged
    assert v.summary().startswith("bridged (text): vocabularies differ (token 261 differs")
    assert "tokenisation" in v.summary()
    assert not check_pair(tiny_target, tiny_target).bridged  # same vocabulary: ids as they are


def test_draft_without_byte_fallback_is_refused(eng, tiny_target, no_byte_fallback):
    v = check_pair(tiny_target, no_byte_fallback)
    assert not v.compatible
    assert "no byte fallback" in v.summary()
    with pytest.raises(IncompatiblePairError, match="no byte fallback"):
        eng.generate("the", draft_model=no_byte_fallback)
    assert eng.generate("the value of", max_tokens=3).stats.generated_tokens == 3  # nothing half-loaded


def test_byte_level_bpe_draft_is_bridged_and_spm_without_bytes_is_not():
    t = VocabInfo("t", "gpt2", [f"t{i}" for i in range(300)], 1, 2, False, False)
    bpe = VocabInfo("d", "gpt2", [f"d{i}" for i in range(900)], 0, 0, True, False)
    spm = VocabInfo("d", "llama", [f"d{i}" for i in range(900)], 1, 2, True, False, [NORMAL] * 900)
    assert check_vocabs(t, bpe).bridged
    refused = check_vocabs(t, spm)
    assert not refused.compatible and "0 of 256 byte tokens" in refused.summary()


def test_engine_picks_the_bridge_only_for_another_vocabulary(eng, respelled, tiny_draft):
    # (the engine's model drafters have the free drafters beside them: Auto may take those)
    assert isinstance(eng.decoder(respelled).drafter.model_drafter, BridgeDrafter)
    assert isinstance(eng.decoder(tiny_draft).drafter.model_drafter, ModelDrafter)
    assert eng.decoder(respelled).mode == "bridge"


@pytest.mark.parametrize("which", ["agreeing", "disagreeing"])
@pytest.mark.parametrize("k", [1, 3, 6])
def test_greedy_bridged_equals_target_alone(eng, respelled, respelled_other, which, k):
    draft = respelled if which == "agreeing" else respelled_other
    for prompt, chat in (("the value of", False), ("print the total", True), ("if data is None", False)):
        alone = eng.generate(prompt, max_tokens=60, chat=chat)
        bridged = eng.generate(prompt, draft_model=draft, lookahead=k, max_tokens=60, chat=chat)
        assert bridged.text == alone.text
        assert bridged.tokens == alone.tokens
        assert bridged.stats.drafted > 0
        if which == "agreeing":
            # the same model in another vocabulary: its proposals hold while the target writes
            # tokens its tokenizer would choose (this random model soon writes others: "with"
            # where the tokenizer spells "w", "it", "h")
            assert bridged.stats.accepted >= 2


def test_auto_lookahead_stays_exact(eng, respelled_other):
    alone = eng.generate("the value of", max_tokens=50)
    auto = eng.generate("the value of", draft_model=respelled_other, lookahead="auto", max_tokens=50)
    assert auto.text == alone.text


def test_proposal_after_a_token_it_merges_with(tiny_target, respelled, vocab):
    target = Model(tiny_target)
    d = BridgeDrafter(Model(respelled), target, RuntimeParams(n_ctx=128))
    space, the = vocab.id("▁"), vocab.id("▁the")
    # " " then "the of": the target would spell " the" as one token, but " " is written
    ids, ends = d._to_target([1, space], b"the of")
    assert b"".join(target.piece(t) for t in ids) == b"the of"
    assert ids[0] == vocab.id("the") and ends[-1] == len(b"the of")
    # " the" then " of it": no merge, the proposal's own tokens follow
    ids, _ = d._to_target([1, the], b" of it")
    assert ids == [vocab.id("▁of"), vocab.id("▁it")]
    d.close()


def test_draft_text_is_retokenised_incrementally(eng, respelled_other, monkeypatch):
    dec = eng.decoder(respelled_other)
    drafter = dec.drafter.model_drafter
    assert isinstance(drafter, BridgeDrafter)
    lengths: list[int] = []
    real = drafter._draft_enc.encode
    monkeypatch.setattr(drafter._draft_enc, "encode", lambda text: lengths.append(len(text)) or real(text))
    out = eng.generate("the value of", draft_model=respelled_other, lookahead=2, max_tokens=120)
    assert len(out.text) > 300
    assert max(lengths[2:]) < 80  # after the prompt, only the newest few tokens' text
    assert len(drafter._marks) > 10  # the stable point moved along with the output


def test_incomplete_character_waits_for_the_draft():
    from engine.decoding.drafting.bridge_drafter import _split_complete

    e = "é".encode()
    assert _split_complete(b"ab" + e[:1]) == (b"ab", e[:1])
    assert _split_complete(b"ab" + e) == (b"ab" + e, b"")
    assert _split_complete("€".encode()[:2]) == (b"", "€".encode()[:2])


class _BrokenQ(BridgeDrafter):
    """Claims q(x) = 0.5 for its deterministic proposal: accepts too often (broken on purpose)."""

    def propose(self, context, k, sampler, rules=NO_RULES):
        p = super().propose(context, k, sampler, rules)
        return Proposal(p.tokens, [Dist(np.array([t]), np.array([0.5])) for t in p.tokens], p.confidence)


def _sample_counts(target: Model, drafter, prompt, n: int) -> dict:
    dec = Decoder(target, drafter, runtime=RuntimeParams(n_ctx=256))
    counts: dict[tuple[int, int], int] = {}
    for seed in range(n):
        cfg = GenerationRequest(prompt, lookahead=Fixed(2), max_tokens=2,
                                sampling=SamplingParams(temperature=1.0, top_k=6, seed=seed))
        done = [e for e in dec.run(prompt, cfg) if isinstance(e, DoneEvent)][0]
        assert len(done.tokens) == 2
        counts[tuple(done.tokens)] = counts.get(tuple(done.tokens), 0) + 1
    dec.close()
    return counts


@pytest.mark.parametrize("which", ["agreeing", "disagreeing"])
def test_bridged_sampling_matches_target(tiny_target, respelled, respelled_other, which):
    target = Model(tiny_target)
    prompt = target.tokenize("the value of")
    exact = _exact_two_token_distribution(target, prompt, SamplingParams(temperature=1.0, top_k=6))
    draft = Model(respelled if which == "agreeing" else respelled_other)
    n = 2500
    counts = _sample_counts(target, BridgeDrafter(draft, target, RuntimeParams(n_ctx=256)), prompt, n)
    assert _chi_square(counts, exact, n) > 0.01


def test_broken_bridging_rule_is_caught(tiny_target, respelled):
    target = Model(tiny_target)
    prompt = target.tokenize("the value of")
    exact = _exact_two_token_distribution(target, prompt, SamplingParams(temperature=1.0, top_k=6))
    n = 2500
    counts = _sample_counts(target, _BrokenQ(Model(respelled), target, RuntimeParams(n_ctx=256)), prompt, n)
    assert _chi_square(counts, exact, n) < 0.01


def test_auto_declines_a_bridged_draft_that_does_not_pay(tiny_target, respelled):
    from engine.decoding.drafting.cost_model import CostModel
    from engine.decoding.drafting.lookahead import Auto

    target = Model(tiny_target)
    cost = CostModel()  # a draft step (with its re-tokenisation) as dear as four target passes
    cost.import_costs({"verify_s": {"1": 0.01, "2": 0.02, "4": 0.04, "8": 0.08, "16": 0.16}, "draft_token_s": 0.04})
    dec = Decoder(target, BridgeDrafter(Model(respelled), target, RuntimeParams(n_ctx=256)),
                  runtime=RuntimeParams(n_ctx=256), cost=cost)
    prompt = target.tokenize("the value of")
    done = [e for e in dec.run(prompt, GenerationRequest(prompt, lookahead=Auto(), max_tokens=40))
            if isinstance(e, DoneEvent)][0]
    alone = Decoder(target, None, runtime=RuntimeParams(n_ctx=256))
    ref = [e for e in alone.run(prompt, GenerationRequest(prompt, max_tokens=40)) if isinstance(e, DoneEvent)][0]
    assert done.stats.drafted == 0 and done.stats.k_counts == {"0": done.stats.steps}
    assert done.tokens == ref.tokens
    dec.close()
    alone.close()
