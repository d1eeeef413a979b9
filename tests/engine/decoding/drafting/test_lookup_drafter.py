"""Prompt lookup: pointer following, substitution learning, run-length adaptation.

Simulated against a known "target output" (greedy verification by comparison), so each
behaviour is measured in isolation from any model.
"""

from __future__ import annotations

from engine.decoding.drafting.lookup_drafter import PromptLookupDrafter
from engine.llamacpp.context import common_prefix
from engine.decoding.sampling.sampler import Sampler


def simulate(drafter, prompt, truth, k=8):
    """Run draft/verify steps where the target writes `truth`; return (drafted, accepted, steps)."""
    drafter.begin(prompt)
    s = Sampler()
    out: list[int] = []
    drafted = accepted = steps = 0
    while len(out) < len(truth):
        prop = drafter.propose(prompt + out, k, s)
        a = 0
        for d in prop.tokens:
            if len(out) + a < len(truth) and truth[len(out) + a] == d:
                a += 1
            else:
                break
        drafter.feedback(len(prop.tokens), a)
        drafted += len(prop.tokens)
        accepted += a
        out += truth[len(out) : len(out) + a + 1]
        steps += 1
    return drafted, accepted, steps


def test_common_prefix():
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([], [1]) == 0


def test_lookup_copies_the_prompt():
    source = list(range(100, 160))
    prompt = [1, 2, 3] + source + [7, 8] + source[:3]
    truth = source[3:]
    drafted, accepted, steps = simulate(PromptLookupDrafter(), prompt, truth)
    assert accepted / drafted > 0.9
    assert steps < len(truth) / 3  # several tokens per step


def test_lookup_learns_substitutions():
    """A rename: the target writes 999 wherever the source had 105. After the first
    occurrence the drafter should propose 999 itself."""
    source = []
    for i in range(12):  # 12 "lines" each mentioning the renamed variable 105
        source += [200 + i, 105, 300 + i, 400 + i]
    prompt = [1] + source + [2] + source[:1]
    truth = [999 if t == 105 else t for t in source[1:]]
    learning = PromptLookupDrafter()
    d1, a1, s1 = simulate(learning, prompt, truth)

    class NoLearning(PromptLookupDrafter):
        def _anchor(self):
            self.diverged = None  # never remembers where a copy broke, so never learns
            super()._anchor()

    d0, a0, s0 = simulate(NoLearning(), prompt, truth)
    assert learning.subs  # it learned (105,) -> (999,)
    assert a1 > a0 and s1 < s0
    assert a1 / d1 > 0.8


def test_lookup_forgets_a_wrong_substitution():
    d = PromptLookupDrafter()
    source = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
    d.begin(source + [0] + source[:2])
    d.subs[(12,)] = (99,)
    prop = d.propose(source + [0] + source[:2], 4, Sampler())
    assert prop.tokens[0] == 99
    # the target wrote the original token: the rule goes away
    d.feedback(4, 0)
    d.propose(source + [0] + source[:2] + [12], 4, Sampler())
    assert (12,) not in d.subs


def test_lookup_proposes_nothing_without_a_match():
    d = PromptLookupDrafter()
    prompt = list(range(50))
    assert d.propose(prompt, 8, Sampler()).tokens == []
    drafted, _, _ = simulate(PromptLookupDrafter(), prompt, list(range(500, 540)))
    assert drafted == 0  # free text never matched: nothing drafted, nothing wasted


def test_run_length_adapts():
    d = PromptLookupDrafter(start_run=4)
    d.feedback(4, 4)
    assert d.run == 8
    d.feedback(8, 3)
    assert d.run == 3
    d.feedback(3, 0)
    assert d.run == 1


def test_lookup_rejoins_the_source_after_an_insertion():
    """Type hints: the target inserts tokens the source never had, then copies on."""
    lines = []
    for i in range(10):
        lines.append([500 + i, 40, 600 + i, 41, 42])  # "def f_i ( a_i ) :"
        lines.append([700 + i, 43, 800 + i])  # "return x_i ;"
    source = [t for line in lines for t in line]
    prompt = [1] + source + [2] + source[:3]
    truth = []
    for i in range(10):
        truth += [500 + i, 40, 600 + i, 90, 91, 41, 42] if i else [90, 91, 41, 42]  # ": int" inserted
        truth += [700 + i, 43, 800 + i]
    drafted, accepted, steps = simulate(PromptLookupDrafter(), prompt, truth)

    class NoRejoin(PromptLookupDrafter):
        def __init__(self):
            super().__init__(rejoin_window=0)

    d0, a0, s0 = simulate(NoRejoin(), prompt, truth)
    assert accepted > a0 and steps < s0
    assert steps < len(truth) * 0.45  # 97 tokens in 41 steps here; 66 before the prompt-first anchoring


def _follow(drafter, prompt, written):
    """Propose after each of `written` (the target accepts what was written); return the last
    proposal."""
    drafter.begin(prompt)
    s = Sampler()
    prop = None
    for i in range(len(written) + 1):
        prop = drafter.propose(prompt + written[:i], 4, s)
    return prop


def test_copies_of_the_output_are_trusted_less_than_copies_of_the_prompt():
    """An edit copies its prompt for hundreds of tokens; code repeating a pattern of its own
    output parts from it within a few. The same streak gets a lower stated confidence when
    the pointer copies the output, so the calibration learns the two apart."""
    source = list(range(100, 140))
    from_prompt = _follow(PromptLookupDrafter(), [1, 2] + source + [3], source[:5])
    pattern = list(range(200, 220))
    from_output = _follow(PromptLookupDrafter(), [1, 2, 3], pattern + pattern[:5])
    assert from_prompt.tokens[:2] == source[5:7] and from_output.tokens[:2] == pattern[5:7]
    assert from_output.confidence[0] < from_prompt.confidence[0]
    assert from_prompt.confidence[0] >= 0.8 and from_output.confidence[0] <= 0.7


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5), max_size=60), st.lists(st.integers(0, 5), max_size=60), st.integers(1, 5))
def test_the_ngram_search_finds_what_a_table_of_every_ngram_holds(first, then, n):
    """`NgramIndex.ends` (a search at each question) against the table the drafter used to build
    of every n-gram's end positions, over a list that grows as a run's context does."""
    from engine.decoding.drafting.lookup_drafter import NgramIndex

    index, toks = NgramIndex(), []
    for part in (first, then):
        index.extend(part)
        toks += part
        table: dict[tuple, list[int]] = {}
        for end in range(n, len(toks) + 1):
            table.setdefault(tuple(toks[end - n:end]), []).append(end)
        for gram in {tuple(toks[i:i + n]) for i in range(len(toks) - n + 1)} | {(9,) * n}:
            assert index.ends(list(gram)) == table.get(gram, [])
