"""The run's verifier (engine/decoding/sampling/verifier.py): one object owns the sampler, the
logits processors, the grammar state and logprobs, and gives the decoder a verdict and the
rows logprobs read, whichever of these a request uses."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from engine.decoding.sampling.grammar import GrammarState, verify_constrained
from engine.decoding.sampling.logit_controls import Penalties, RowProcessors
from engine.decoding.sampling.sampler import Dist, Sampler, SamplingParams, distribution, verify
from engine.decoding.sampling.verifier import Verifier
from engine.errors import NonFiniteLogits
from engine.llamacpp.llama import Model

NAMED = SimpleNamespace(name="Tiny", path=None)  # what an error names: the target


def _rows(n: int, vocab: int = 32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, vocab)).astype(np.float32)


@pytest.fixture(scope="module")
def model(tiny_target):
    m = Model(tiny_target)
    yield m
    m.close()


def test_plain_greedy_is_the_acceptance_rule_and_no_rows_unless_asked():
    logits = _rows(3)
    best = [int(t) for t in np.argmax(logits, axis=1)]
    v = Verifier(NAMED)
    result, rows = v.verify([best[0], (best[1] + 1) % 32], [None, None], logits, [1, 2, 3])
    assert (result.accepted, result.token, result.corrected) == (1, best[1], True)
    assert rows is None and v.row_processor is None and v.grammar is None


def test_processors_change_every_row_and_logprobs_read_the_processed_rows():
    logits = _rows(2)
    top = int(np.argmax(logits[0]))
    v = Verifier(NAMED, processors=RowProcessors.for_request({top: -100.0}, None), logprobs=2)
    assert v.row_processor is not None
    result, rows = v.verify([], [], logits[:1], [7, 8])
    assert result.token != top  # the ban holds at the verify row
    assert rows is not None and rows[0][top] == pytest.approx(logits[0][top] - 100.0)
    lp, alts = v.token_logprobs(rows[0], result.token)
    assert len(alts) == 2 and alts[0][0] == result.token and lp == pytest.approx(alts[0][1])


def test_sampled_draws_equal_the_bare_rule_for_the_same_seed():
    params = SamplingParams(temperature=0.9, top_k=8, seed=1234)
    bare = Sampler(params)
    v = Verifier(NAMED, params)
    for i in range(30):
        logits = _rows(3, seed=i)
        drafts = [int(np.argmax(logits[0])), int(np.argmax(logits[1]))]
        mine, _ = v.verify(drafts, [None, None], logits, [])
        ref = verify(drafts, [None, None], logits, bare)
        assert (mine.accepted, mine.token, mine.corrected) == (ref.accepted, ref.token, ref.corrected)


def test_a_grammar_is_owned_advanced_and_its_rows_masked(model):
    text = 'root ::= "ab" "c"*'
    v = Verifier(model, grammar=text, logprobs=0)
    ref = GrammarState(model, text)
    try:
        logits = _rows(2, vocab=model.n_vocab, seed=3)
        result, rows = v.verify([], [], logits[:1], [])
        expect = verify_constrained([], [], logits[:1], Sampler(), ref, [])
        assert result.token == expect.token
        assert rows is not None and len(rows) == 1 and np.isinf(rows[0]).any()  # masked for logprobs
        nxt, _ = v.verify([], [], logits[1:], [])
        assert nxt.token == verify_constrained([], [], logits[1:], Sampler(), ref).token  # both advanced alike
    finally:
        v.close()
        ref.close()


def test_logits_that_are_not_numbers_name_the_target():
    logits = _rows(1)
    logits[0, 3] = np.nan
    with pytest.raises(NonFiniteLogits, match="Tiny"):
        Verifier(NAMED).verify([], [], logits, [])


@pytest.mark.parametrize("params", [SamplingParams(temperature=0.8, top_k=5, top_p=0.9, min_p=0.05, seed=21),
                                    SamplingParams(temperature=1.2, top_k=0, top_p=0.8, min_p=0.1, seed=22)])
def test_the_chats_whole_sampling_set_keeps_the_targets_distribution_for_any_draft(params):
    """What the app's chat can now ask at once (top-k, top-p, min-p and llama.cpp's repeat
    penalty): the first token emitted, whatever the draft proposed, follows the target's
    distribution over its penalised row; a token the filters drop never appears."""
    from scipy import stats as sps

    logits = np.log(np.array([0.22, 0.2, 0.16, 0.12, 0.1, 0.08, 0.06, 0.04, 0.02])).astype(np.float32)
    context = [1, 1, 4]  # seen tokens: the penalty lowers 1 and 4
    penalties = Penalties(repeat=1.3)
    row = logits.astype(np.float64).copy()
    penalties(row, context)
    p = distribution(row, params)
    support = [t for t in range(row.shape[0]) if p.prob(t) > 0]
    assert 1 < len(support) < row.shape[0], "the filters drop some tokens and keep several"
    n = 5000
    for qv in (np.full(9, 1 / 9), np.array([0, 0, 0, 0, 0, 0, 0, 0.5, 0.5]), np.array([0.05, 0.6, 0, 0, 0.35, 0, 0, 0, 0])):
        q = Dist(np.arange(9), qv)
        v = Verifier(NAMED, params, RowProcessors.for_request(None, penalties))
        counts = np.zeros(9)
        for _ in range(n):
            d = v.sampler.draw(q)
            r, _rows_read = v.verify([d], [q], np.vstack([logits, logits]), context)
            counts[d if r.accepted else r.token] += 1
        assert counts[[t for t in range(9) if t not in support]].sum() == 0, (qv, counts)
        expected = np.array([p.prob(t) for t in support]) * n
        assert sps.chisquare(counts[support], expected).pvalue > 0.001, (qv, counts)
