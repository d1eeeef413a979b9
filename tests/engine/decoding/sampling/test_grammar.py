"""Constrained output (grammar.py): the output always matches the grammar or JSON schema, greedy
output with any draft equals greedy output without one, the grammar state advances only by
accepted tokens, and sampling draws exactly from the constrained target distribution."""

from __future__ import annotations

import json
from typing import Literal, Sequence

import numpy as np
import pytest
import scipy.stats as sps
from pydantic import BaseModel, ConfigDict

from engine import Engine, GenerationRequest
from engine.decoding.drafting.drafters import Drafter, Proposal
from engine.decoding.sampling.grammar import (GrammarError, GrammarState, check_grammar, json_schema_grammar, truncated,
                                     verify_constrained)
from engine.llamacpp.llama import Model
from engine.decoding.sampling.sampler import Dist, Sampler, SamplingParams, distribution
from engine.errors import TandemError


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Literal["the", "value", "item", "data"]
    count: int
    ok: bool


SCHEMA = Item.model_json_schema()
PROMPT = "the value of the item"


@pytest.fixture(scope="module")
def eng(tiny_target):
    e = Engine(tiny_target, n_ctx=512, metrics_log=False)
    yield e
    e.close()


@pytest.fixture(scope="module")
def model(tiny_target):
    m = Model(tiny_target)
    yield m
    m.close()


def tokens_of(eng, draft, **kw) -> tuple[list[int], str, object]:
    kw.setdefault("max_tokens", 200)
    r = eng.generate(PROMPT, draft_model=draft, lookahead=4 if draft is not None else 0, **kw)
    return r.tokens, r.text, r.stats


# -- checking ------------------------------------------------------------------------------
@pytest.mark.parametrize("bad, says", [
    ('root ::= "a', "grammar is not a valid GBNF grammar: unexpected end of input"),
    ('root ::= x', "Undefined rule identifier 'x'"),
    ('item ::= "a"', "root"),
    ("", "grammar is empty"),
])
def test_a_bad_grammar_is_one_clear_line(bad, says):
    with pytest.raises(GrammarError) as e:
        GenerationRequest("hi", grammar=bad)
    assert says in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("bad, says", [
    ({"type": "hiccup"}, "json_schema cannot be turned into a grammar"),
    ("{not json", "json_schema is not valid JSON"),
    (123, "json_schema must be a JSON object"),
])
def test_a_bad_schema_is_one_clear_line(bad, says):
    with pytest.raises(TandemError) as e:
        GenerationRequest("hi", json_schema=bad)
    assert says in str(e.value)


def test_json_schema_compiles_to_the_grammar_field_and_survives_copies():
    r = GenerationRequest("hi", json_schema=SCHEMA)
    assert r.grammar == json_schema_grammar(SCHEMA) and "root ::=" in r.grammar
    assert r.with_(max_tokens=5).grammar == r.grammar
    with pytest.raises(TandemError, match="not both"):
        GenerationRequest("hi", json_schema=SCHEMA, grammar='root ::= "a"')
    assert check_grammar('root ::= "a"') == 'root ::= "a"'


# -- greedy: always valid, the same with every draft ------------------------------------------
def test_greedy_json_is_valid_and_the_same_with_every_draft(eng, tiny_draft, tiny_target):
    outs = {}
    for name, draft in (("none", None), ("lookup", "lookup"), ("model", tiny_draft), ("self", tiny_target)):
        toks, text, stats = tokens_of(eng, draft, json_schema=SCHEMA)
        outs[name] = toks
        assert stats.finish_reason == "stop", (name, text)  # ends where the grammar ends (EOS)
        Item.model_validate_json(text)
        if name in ("model", "self"):
            assert stats.drafted > 0
        if name == "self":  # the draft model drafts within the grammar too, so it agrees with itself
            assert stats.accepted >= 0.9 * stats.drafted, (stats.accepted, stats.drafted)
    assert all(t == outs["none"] for t in outs.values()), outs
    free, _, _ = tokens_of(eng, None)
    assert free != outs["none"]  # the constraint changed what the target writes


def test_json_object_mode_writes_an_object(eng, tiny_target):
    for draft in (None, tiny_target):
        toks, text, stats = tokens_of(eng, draft, json_schema={"type": "object"}, max_tokens=40)
        assert text.lstrip().startswith("{")
        if stats.finish_reason == "stop":
            assert isinstance(json.loads(text), dict)


class Adversary(Drafter):
    """Proposes the right next token, then a grammar-allowed wrong one, then a forbidden one:
    each step's verification accepts one draft and rejects the next. A decoder that let a
    rejected draft into the grammar state would be checking the next rows against text that
    was never written."""

    kind = "adversary"

    def __init__(self, right: Sequence[int], prompt_len: int, wrong: int, forbidden: int):
        self.right, self.prompt_len, self.wrong, self.forbidden = list(right), prompt_len, wrong, forbidden
        self.proposed = 0

    def propose(self, context, k, sampler, rules=None):
        pos = len(context) - self.prompt_len
        if pos >= len(self.right):
            return Proposal()
        self.proposed += 1
        toks = [self.right[pos], self.wrong, self.forbidden][:k]
        return Proposal(toks, [None] * len(toks))


def test_rejected_drafts_never_enter_the_grammar_state(eng, model):
    grammar = 'root ::= ("ab" | "ba")+ "."'
    ref, text, stats = tokens_of(eng, None, grammar=grammar, max_tokens=12)
    assert set(text) <= set("ab.") and text
    a, b, dot = (next(t for t in range(model.n_vocab) if model.piece(t) == c) for c in (b"a", b"b", b"."))
    for wrong in (a, b, dot):
        adv = Adversary(ref, len(eng.tokens_for(PROMPT, chat=False)), wrong, model.bos)
        got, text2, st = tokens_of(eng, adv, grammar=grammar, max_tokens=12)
        assert got == ref, (wrong, text, text2)
        assert adv.proposed and st.drafted > st.accepted > 0


def test_the_grammar_state_advances_only_by_what_is_accepted(model):
    g = GrammarState(model, 'root ::= "ab" "c"')
    a, b, c, x = (next(t for t in range(model.n_vocab) if model.piece(t) == s) for s in (b"a", b"b", b"c", b"x"))
    rows = np.zeros((3, model.n_vocab), dtype=np.float32)
    rows[0, a] = rows[1, x] = rows[2, c] = 5.0  # the target wants "a", then "x" (forbidden): the grammar says "b"
    r = verify_constrained([a, c], [None, None], rows, Sampler(), g)
    assert (r.accepted, r.token, r.corrected) == (1, b, True)
    assert g.allows(c) and not g.allows(a) and not g.allows(b)  # committed: "ab"; the rejected "c" draft never entered
    g.close()


# -- sampling: exactly the constrained distribution ------------------------------------------
def allowed_ids(model, chars: bytes) -> np.ndarray:
    """Tokens whose text is one of `chars` (computed apart from the grammar sampler)."""
    return np.array([t for t in range(model.n_vocab) if len(model.piece(t)) == 1 and model.piece(t) in
                     [bytes([c]) for c in chars]])


@pytest.mark.parametrize("params", [SamplingParams(temperature=0.8, seed=7),
                                    SamplingParams(temperature=1.0, top_p=0.6, seed=8),
                                    SamplingParams(temperature=0.7, top_k=3, min_p=0.05, seed=9),
                                    SamplingParams(temperature=1.3, top_k=5, top_p=0.8, seed=10),
                                    SamplingParams(temperature=0.9, min_p=0.3, seed=11),
                                    SamplingParams(temperature=0.6, top_p=0.65, min_p=0.2, seed=12)])
@pytest.mark.parametrize("spread", ["flat", "peaked"])
def test_sampled_tokens_follow_the_constrained_target_distribution(model, params, spread):
    """Flat: the best-ranked tokens cannot settle the filters (the whole row is masked);
    peaked: they can (grammar.truncated). Both must be the masked row's usual distribution."""
    ok = allowed_ids(model, b"abcd")
    rng = np.random.default_rng(1)
    row = rng.normal(0.0, 1.0 if spread == "flat" else 0.3, model.n_vocab).astype(np.float32)
    row[ok] = np.linspace(0.5, 2.0, ok.shape[0]) + (0.0 if spread == "flat" else 6.0)
    row[rng.choice(model.n_vocab, 5)] += 3.0  # forbidden tokens the target likes best
    masked = np.full_like(row, -np.inf)
    masked[ok] = row[ok]
    p = distribution(masked, params)  # the target's usual sampler over the masked row
    expected = np.array([p.prob(int(t)) for t in ok])
    forbidden = int(max(set(range(model.n_vocab)) - set(ok.tolist()), key=lambda t: row[t]))
    if spread == "peaked" and (params.top_k or params.top_p < 1.0 or params.min_p > 0.0):
        g = GrammarState(model, "root ::= [a-d]")
        assert truncated(g, row, params) is not None  # the fast path is what is tested here
        g.close()
    qfull = Dist(np.concatenate([ok[:3], [forbidden]]), np.array([0.1, 0.2, 0.3, 0.4]))
    n = 3000
    for case in ("bonus", "allowed draft", "forbidden draft", "full q"):
        s, g = Sampler(params), GrammarState(model, "root ::= [a-d]")
        counts = np.zeros(ok.shape[0])
        for _ in range(n):
            if case == "bonus":
                r = verify_constrained([], [], row[None, :], s, g.clone())
            else:
                q = qfull if case == "full q" else None
                d = {"allowed draft": int(ok[1]), "forbidden draft": forbidden}.get(case) or s.draw(qfull)
                r = verify_constrained([d], [q], np.vstack([row, row]), s, g.clone())
            first = d if case != "bonus" and r.accepted else r.token
            counts[np.nonzero(ok == first)[0][0]] += 1  # a token outside `ok` fails here
        keep = expected > 0
        assert counts[~keep].sum() == 0, (case, counts)
        assert sps.chisquare(counts[keep], expected[keep] * n).pvalue > 0.005, (case, params, counts, expected)
        g.close()


def test_the_parse_error_is_found_when_llama_cpps_log_is_already_full():
    """The log keeps its newest 40 lines: a full log (a server test ran first) must not hide
    the reason a grammar failed (CI saw 'llama.cpp could not parse it' instead)."""
    from engine.llamacpp import llama

    for i in range(llama.log_tail.maxlen + 5):
        llama._log_callback(2, f"earlier chatter {i}\n".encode(), None)
    with pytest.raises(GrammarError, match="root"):
        GenerationRequest("hi", grammar='item ::= "a"')


def test_a_forbidden_token_is_an_error_not_an_abort(model):
    g = GrammarState(model, 'root ::= "a"')
    b = next(t for t in range(model.n_vocab) if model.piece(t) == b"b")
    with pytest.raises(GrammarError, match="does not follow the grammar"):
        g.accept(b)  # llama.cpp itself would terminate the process
    g.close()


def test_the_truncated_fast_path_equals_masking_the_whole_row(model):
    """Whenever grammar.truncated decides from the best-ranked tokens, its distribution is
    `distribution(masked row)` itself (same tokens, same probabilities), on rows where many
    allowed tokens lie outside the ranks it checks."""
    letters = allowed_ids(model, b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    g = GrammarState(model, "root ::= [a-zA-Z]")
    rng = np.random.default_rng(5)
    settled = 0
    for trial in range(300):
        params = SamplingParams(temperature=float(rng.uniform(0.3, 1.5)), top_k=int(rng.choice([0, 0, 3, 40])),
                                top_p=float(rng.choice([1.0, 0.5, 0.8, 0.95])), min_p=float(rng.choice([0.0, 0.05, 0.3])))
        if not (params.top_k or params.top_p < 1.0 or params.min_p > 0.0):
            continue
        row = rng.normal(0.0, rng.uniform(0.2, 3.0), model.n_vocab)
        row[rng.choice(letters, 6, replace=False)] += rng.uniform(0.0, 8.0)
        row = row.astype(np.float32)  # as logits come
        masked = np.full(model.n_vocab, -np.inf)
        masked[letters] = row[letters]
        want = distribution(masked, params)
        got = truncated(g, row, params)
        if got is None:
            continue
        settled += 1
        w = {int(i): float(p) for i, p in zip(want.ids, want.probs) if p > 0}
        h = {int(i): float(p) for i, p in zip(got.ids, got.probs) if p > 0}
        assert w.keys() == h.keys(), (trial, params, sorted(w), sorted(h))
        assert all(abs(w[i] - h[i]) < 1e-9 for i in w), (trial, params)
    assert settled > 50  # the fast path was taken often enough to be what is tested
    g.close()
