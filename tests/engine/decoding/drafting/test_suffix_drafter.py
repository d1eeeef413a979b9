"""The suffix drafter: frequency-scored continuation of the longest match in this request
and in past answers, bounded history that outlives the process, and exactness on tiny models."""

from __future__ import annotations

import numpy as np
import pytest

from engine import Engine
from engine.decoding.decoder import Decoder
from engine.decoding.drafting.choice import DraftChoice, DraftKind
from engine.decoding.drafting.draft_context import DraftContext
from engine.decoding.drafting.lookahead import Fixed
from engine.decoding.drafting.suffix_drafter import SuffixDrafter
from engine.decoding.drafting.suffix_index import HashTable, bulk_hashes, suffix_hashes, walk
from engine.decoding.drafting.suffix_stores import AnswerStore
from engine.decoding.events import DoneEvent
from engine.decoding.quality import first_divergence
from engine.decoding.sampling.sampler import Sampler, SamplingParams
from engine.decoding.request import GenerationRequest
from engine.llamacpp.llama import Model
from engine.llamacpp.runtime import RuntimeParams

GREEDY = Sampler(SamplingParams())
ALL = DraftContext(trimmed_by_caller=True)  # propose all the drafter has (Auto trims)


def test_bulk_and_incremental_hashes_agree():
    toks = [5, 9, 2, 7, 7, 1, 3, 8, 4, 6, 0, 2, 5, 9, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    arr = np.asarray(toks)
    for end in range(1, len(toks) + 1):
        for n, h in suffix_hashes(toks, end).items():
            assert int(bulk_hashes(arr, n)[end - n]) == h


def test_table_finds_every_occurrence_oldest_first():
    t = HashTable()
    t.add(np.array([1, 2, 3, 1, 2, 4]), 0)
    t.add(np.array([1, 2, 5]), 10)
    assert t.find(2, suffix_hashes([1, 2], 2)[2]).tolist() == [2, 5, 12]
    assert t.find(3, suffix_hashes([9, 9, 9], 3)[3]).tolist() == []


def test_walk_follows_the_most_frequent_continuation_while_likely():
    rows = [[1, 2, 3], [1, 2, 4], [1, 2, 4], [1, 5, 6]]
    d = walk(rows, 3, 3, 0.1)
    assert d.tokens == [1, 2, 4] and d.probs == [1.0, 0.75, pytest.approx(2 / 3)]
    assert d.score == pytest.approx(1 + 0.75 + 0.5)
    # a continuation below the path probability is not drafted
    assert walk([[1], [2], [3], [4], [5], [6], [7], [8], [9], [10], [11]], 3, 3, 0.1).tokens == []


def test_past_answers_are_drafted_by_frequency():
    d = SuffixDrafter()
    for field in (200, 201, 202):
        d.finish([], [100, 5, 6, 7, field, 8, 9, 10, 11, 12])
    d.finish([], [100, 5, 6, 7, 203, 30, 31])
    d.begin([1, 2, 3])
    p = d.propose([1, 2, 3, 100, 5, 6, 7, 201], 8, GREEDY, ALL)
    assert d.last_source == "history"
    # 8 follows "7 201"; then the three answers agree (3 of 4 continue with 9 after "5 6 7 x 8")
    assert p.tokens[:4] == [8, 9, 10, 11] and p.dists == [None] * len(p.tokens)
    assert len(p.confidence) == len(p.tokens)


def test_draft_length_follows_match_length_and_acceptance():
    d = SuffixDrafter()
    d.finish([], list(range(10, 60)))
    d.begin([1])
    assert len(d.propose([1, 10], 16, GREEDY, ALL).tokens) == 1  # a one-token match drafts one
    assert len(d.propose([1, 10, 11, 12, 13], 16, GREEDY, ALL).tokens) == 4
    assert len(d.propose([1, 10, 11, 12, 13], 16, GREEDY).tokens) == 4  # run starts at 4
    d.feedback(4, 1)
    assert len(d.propose([1, 10, 11, 12, 13], 16, GREEDY).tokens) == 1  # shrinks to what held
    d.feedback(1, 1)
    d.feedback(2, 2)
    assert d.run == 4


def test_the_request_itself_is_drafted_from():
    d = SuffixDrafter(with_lookup=False)
    ctx = [1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3]
    d.begin(ctx[:9])
    p = d.propose(ctx, 8, GREEDY, ALL)
    assert p.tokens == [4, 5, 6] and d.last_source == "request"
    assert d.propose([50, 51], 8, GREEDY, ALL).tokens == []  # another context: starts over, no match


def test_each_step_takes_the_source_whose_proposals_hold():
    """Prompt lookup proposes too; a source whose proposals keep failing is trusted less, so
    the other one's proposal wins the step."""
    d = SuffixDrafter()
    prompt = [1, 2, 3, 4, 5, 7, 8, 1, 2, 3]
    d.begin(prompt)
    first = d.propose(prompt, 3, GREEDY, ALL)
    assert first.source == "suffix:request" and first.tokens == [4, 5, 7]
    for _ in range(4):
        p = d.propose(prompt, 3, GREEDY, ALL)
        if p.source != "suffix:request":
            break
        d.feedback(len(p.tokens), 0)  # the target keeps refusing the suffix's continuation
    p = d.propose(prompt, 3, GREEDY, ALL)
    assert p.source == "lookup" and d.last_source == "lookup" and p.tokens[:1] == [4]
    assert SuffixDrafter(with_lookup=False).propose(prompt, 3, GREEDY, ALL).source == "suffix:request"


def test_history_is_bounded_oldest_first():
    s = AnswerStore(max_tokens=200)
    for i in range(40):
        s.add([1000 + i] * 3 + [i, i + 1, i + 2])
    assert s.tokens <= 200 and s.table.entries < 9 * 200
    kept = [int(a[0]) - 1000 for a in s.answers()]
    assert kept == sorted(kept) and kept[-1] == 39 and kept[0] > 0


def test_history_file_round_trip_and_bad_file(tmp_path, caplog):
    path = tmp_path / "h.npy"
    a = SuffixDrafter(history_path=path, n_vocab=500)
    a.finish([], [100, 5, 6, 7, 8])
    b = SuffixDrafter(history_path=path, n_vocab=500)
    b.begin([1])
    assert b.propose([1, 100, 5, 6], 8, GREEDY, ALL).tokens == [7, 8]
    assert SuffixDrafter(history_path=path, n_vocab=50).answers.tokens == 0  # another vocabulary
    path.write_bytes(b"not numpy")
    c = SuffixDrafter(history_path=path, n_vocab=500)
    assert c.answers.tokens == 0 and "is damaged (not a NumPy array file)" in caplog.text
    c.finish([], [1, 2, 3])
    c.clear_history()
    assert not path.exists() and c.answers.tokens == 0


def test_suffix_is_a_draft_keyword():
    choice = DraftChoice.parse("Suffix")
    assert choice.kind is DraftKind.SUFFIX and choice.spec == "suffix" and choice.label == "suffix draft"


# -- through the engine: exactness, learning across requests and restarts ----------------------
PROMPTS = ["the value of", "def count items", "the value of", "return total and", "def count items"]


@pytest.fixture(scope="module")
def eng(tiny_target):
    e = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False)
    yield e
    e.close()


@pytest.mark.parametrize("lookahead", [3, 8, "auto"])
def test_greedy_suffix_equals_target_alone(eng, lookahead):
    drafted = 0
    for prompt in PROMPTS:  # repeats: the second time the answer is drafted from history
        base = eng.generate(prompt, max_tokens=40)
        fast = eng.generate(prompt, draft_model="suffix", lookahead=lookahead, max_tokens=40)
        div = first_divergence(eng.target, eng.tokens_for(prompt), base.tokens, fast.tokens)
        assert div is None or div.margin < 1e-4, f"parted at token {div.index} (margin {div.margin})"
        drafted += fast.stats.drafted
        assert fast.stats.mode == "suffix"
        by = fast.stats.accepted_by  # which drafter supplied each accepted token
        assert sum(by.values()) == fast.stats.accepted and set(by) <= {"lookup", "suffix:request", "suffix:history"}
    assert drafted > 0


def test_sampling_with_suffix_drafts_matches_target(tiny_target):
    from test_decoder import _chi_square, _exact_two_token_distribution

    params = SamplingParams(temperature=1.0, top_k=6)
    target = Model(tiny_target)
    prompt = target.tokenize("the value of")
    exact = _exact_two_token_distribution(target, prompt, params)
    drafter = SuffixDrafter()
    # past answers that continue the prompt's last two tokens: mostly with a pair the target
    # rarely writes (drafts often rejected: the residual draw decides), sometimes likely ones
    pairs = sorted(exact, key=lambda ab: -exact[ab])
    unlikely = next(ab for ab in pairs[3:] if ab[0] != pairs[0][0])
    for a, b in [unlikely] * 3 + pairs[:3]:
        drafter.finish([], [prompt[-2], prompt[-1], a, b])
    dec = Decoder(target, drafter, runtime=RuntimeParams(n_ctx=256))
    n = 1500
    counts: dict[tuple[int, int], int] = {}
    drafted = 0
    for seed in range(n):  # every answer is learnt too: the drafts keep changing
        cfg = GenerationRequest(prompt, lookahead=Fixed(2), max_tokens=2,
                                sampling=SamplingParams(temperature=1.0, top_k=6, seed=seed))
        done = [e for e in dec.run(prompt, cfg) if isinstance(e, DoneEvent)][0]
        drafted += done.stats.drafted
        counts[tuple(done.tokens)] = counts.get(tuple(done.tokens), 0) + 1
    dec.close()
    assert drafted >= n  # every run drafted (max_tokens=2 leaves room for one draft token)
    assert _chi_square(counts, exact, n) > 0.01


def test_history_survives_a_restart_and_clears(tiny_target):
    e = Engine(tiny_target, n_ctx=256, metrics_log=False, calibration=False)
    first = e.generate("the value of", draft_model="suffix", lookahead=8, max_tokens=30)
    path = e.draft_history_path()
    assert path.exists()
    e.close()
    e = Engine(tiny_target, n_ctx=256, metrics_log=False, calibration=False)
    again = e.generate("the value of", draft_model="suffix", lookahead=8, max_tokens=30)
    assert again.tokens == first.tokens
    assert again.stats.accepted >= len(first.tokens) // 2  # the last answer, drafted from the file
    e.clear_draft_history()
    assert not path.exists()
    e.close()
    off = Engine(tiny_target, n_ctx=256, metrics_log=False, calibration=False, history_draft=False)
    cold = off.generate("the value of", draft_model="suffix", lookahead=8, max_tokens=30)
    assert not path.exists() and cold.stats.accepted < again.stats.accepted
    off.close()


def test_cli_learns_answers_unless_told_not_to(tiny_target, capsys):
    from engine import paths
    from engine.cli.main import main as cli

    folder = paths.draft_history_dir()
    args = ["generate", "the value of", "--target", str(tiny_target), "--draft", "suffix", "--max-tokens", "6"]
    assert cli([*args, "--no-history-draft"]) == 0
    assert not list(folder.glob("*.npy"))
    assert cli(args) == 0
    assert len(list(folder.glob("*.npy"))) == 1
    capsys.readouterr()
    assert cli(["race", "the value of", "--target", str(tiny_target), "--draft", "suffix", "--max-tokens", "30"]) == 0
    out = capsys.readouterr().out
    assert "TARGET + SUFFIX" in out and "drafted by   : " in out and "accepted tokens" in out  # who drafted what


def test_the_bench_plans_the_suffix_draft_beside_lookup():
    """The bench runs the suffix draft (each run of requests with its own memory, from empty:
    tests/engine/measure/test_bench_runs.py) and compares it with prompt lookup."""
    from engine.measure.bench import plan_configs

    assert [c.name for c in plan_configs("suffix", sweep=(4,))] == ["target", "suffix k=4", "suffix auto", "lookup"]
