"""The lazy grammar: free until a trigger is written, then the grammar; a trigger whose text
does not fit the grammar is passed over (llama.cpp's own lazy sampler would abort the process
there); greedy output is the same with a draft model, prompt lookup and none, and, where no
trigger is written, the same as with no grammar at all."""

from __future__ import annotations

import re

import pytest

from engine import Engine
from engine.decoding.sampling.lazy_grammar import LazyGrammarState
from engine.errors import TandemError
from engine.models.tinymodel import NORMAL, Vocab, make_vocab, write_model

GRAMMAR = 'root ::= [^{]{0,16} "{" [a-z]+ "}"'
TRIGGERS = (r"(\{)[a-z]",)
PROMPTS = ["the value of", "def count items", "return total and"]


@pytest.fixture(scope="module")
def eng(tiny_target):
    e = Engine(tiny_target, n_ctx=512, metrics_log=False)
    yield e
    e.close()


@pytest.fixture(scope="module")
def braces(tmp_path_factory):
    """A model whose vocabulary has the tokens "{ab" and "{ab1" (fed by id below)."""
    base = make_vocab()
    vocab = Vocab(base.tokens + ["{ab", "{ab1"], base.scores + [0.0, 0.0], base.types + [NORMAL, NORMAL])
    path = write_model(tmp_path_factory.mktemp("lazy") / "braces.gguf", vocab=vocab, name="braces")
    e = Engine(path, n_ctx=128, metrics_log=False)
    yield e, {ch: vocab.byte(ord(ch)) for ch in "x{Q} a"} | {"{ab": vocab.id("{ab"), "{ab1": vocab.id("{ab1")}
    e.close()


def test_free_until_the_trigger_then_the_grammar(braces):
    eng, ids = braces
    state = LazyGrammarState(eng.target, GRAMMAR, TRIGGERS)
    try:
        for ch in "x {Q} ":
            assert state.allows(ids[ch])  # nothing is constrained before the trigger
            state.accept(ids[ch])
        assert not state.active  # "{Q": not a trigger
        clone = state.clone()
        clone.accept(ids["{ab"])  # the trigger, in one token with the text after it
        assert clone.active and not state.active  # clones advance apart
        assert clone.start == len("x {Q} ")
        assert not clone.allows(ids["Q"]) and not clone.allows(ids["{"]) and not clone.allows(ids[" "])
        assert clone.allows(ids["}"]) and clone.allows(ids["x"])
        clone.close()
    finally:
        state.close()


def test_a_trigger_whose_token_breaks_the_grammar_stays_free(braces):
    """"{ab1" triggers on "{a", but its token holds "1" too, which the grammar forbids: the
    replay is checked first and the answer stays free (llama.cpp's lazy sampler aborts here)."""
    eng, ids = braces
    state = LazyGrammarState(eng.target, GRAMMAR, TRIGGERS)
    try:
        for t in (ids["x"], ids["{ab1"], ids[" "], ids["x"]):
            state.accept(t)
        assert not state.active and state.allows(ids["Q"])
        state.accept(ids["{ab"])  # a later trigger that fits still starts the grammar
        assert state.active and state.start == len("x{ab1 x")
    finally:
        state.close()


def test_greedy_output_with_a_lazy_grammar_is_the_same_with_every_draft(eng, tiny_draft):
    for prompt in PROMPTS:
        free = eng.generate(prompt, max_tokens=40)
        base = eng.generate(prompt, max_tokens=40, grammar=GRAMMAR, grammar_triggers=TRIGGERS)
        if not re.search(r"\{[a-z]", base.text):  # never triggered: exactly the free answer
            assert base.tokens == free.tokens
        for draft in (tiny_draft, "lookup"):
            fast = eng.generate(prompt, max_tokens=40, grammar=GRAMMAR, grammar_triggers=TRIGGERS,
                                draft_model=draft, lookahead=4)
            assert fast.tokens == base.tokens


def test_triggers_are_checked(eng):
    with pytest.raises(TandemError, match="need a grammar"):
        eng.generate("x", max_tokens=2, grammar_triggers=("a",))
    with pytest.raises(TandemError, match="not a regular expression"):
        eng.generate("x", max_tokens=2, grammar=GRAMMAR, grammar_triggers=("(",))


def test_a_trigger_after_a_long_free_answer(braces):
    """The state keeps only the tokens a trigger could start in (clones stay cheap), and the
    place is still counted from the answer's start."""
    eng, ids = braces
    state = LazyGrammarState(eng.target, GRAMMAR, TRIGGERS)
    try:
        for _ in range(3000):
            state.accept(ids["x"])
        assert len(state.tokens) <= 1024 + 1
        state.clone().close()
        state.accept(ids["{ab"])
        assert state.active and state.start == 3000
    finally:
        state.close()
