"""The engine's prompt cache: a prompt that starts as one read before (another request's, another
draft choice's, another process's) is read only past the shared part, and the answer is the
one a cold read gives. Files made for another context size, or damaged, are refused."""

from __future__ import annotations

import logging

import pytest

from engine import Engine
from engine.decoding.events import DoneEvent, PrefillEvent
from engine.decoding.prompt_cache import CacheLimits
from engine.decoding.prompt_cache_files import read_header
from engine.measure import bench
from engine.measure import suites as bench_suites
from engine.measure.bench import plan_configs
from engine.measure.racing import race
from engine.decoding.request import GenerationRequest

LIMITS = CacheLimits(min_tokens=16)  # the tiny model's prompts are short: keep them anyway
DOC = list(range(300, 450))  # a "document" of 150 tokens
DOC2 = list(range(200, 300))
ASK1, ASK2 = [400, 401, 402], [410, 411, 412, 413]


def _engine(path, *, limits=LIMITS, n_ctx=512):
    return Engine(path, n_ctx=n_ctx, metrics_log=False, calibration=False, prompt_cache=limits)


def _run(eng, prompt, draft=None, **kw):
    """(tokens not read, tokens read, the answer)."""
    first, answer = None, None
    for ev in eng.stream(prompt, draft_model=draft, lookahead=3, max_tokens=12, **kw):
        if isinstance(ev, PrefillEvent) and first is None:
            first = ev
        elif isinstance(ev, DoneEvent):
            answer = ev.tokens
    assert first is not None
    return first.cached, first.total, answer


@pytest.fixture(scope="module")
def cold_answers(tiny_target):
    """What a cold read answers, per prompt (an engine with no prompt cache, emptied each time)."""
    eng = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False, prompt_cache=False)
    memo: dict[tuple, list[int]] = {}

    def answer(prompt):
        key = tuple(prompt)
        if key not in memo:
            eng.forget_prompts()
            memo[key] = _run(eng, prompt)[2]
        return memo[key]

    yield answer
    eng.close()


def _files(eng):
    return sorted(eng.prompt_cache.folder.glob("*.kv"))


def test_a_shared_prefix_is_restored_after_another_prompt(tiny_target, tiny_draft, cold_answers):
    eng = _engine(tiny_target)
    try:
        assert _run(eng, DOC + ASK1)[:2] == (0, len(DOC + ASK1) - 1)
        assert _run(eng, DOC2 + ASK1)[0] == 0  # another document: the decoder's own cache now holds it
        cached, read, answer = _run(eng, DOC + ASK2)  # the first document again, another question
        assert cached == len(DOC) and read == len(ASK2) - 1
        assert answer == cold_answers(DOC + ASK2)
        # another draft choice (its own target context, empty) finds it too, and stays exact
        cached, _, answer = _run(eng, DOC + ASK1, draft=str(tiny_draft))
        assert cached == len(DOC + ASK1) - 1
        assert answer == cold_answers(DOC + ASK1)
        cached, _, answer = _run(eng, DOC2 + ASK2, draft="lookup")
        assert cached == len(DOC2) and answer == cold_answers(DOC2 + ASK2)
    finally:
        eng.close()


def test_generate_keeps_the_prompt_as_a_read_stream_does(tiny_target, cold_answers):
    """`Engine.generate` (the Python API) reads the stream to its end: left at its `DoneEvent`,
    the state was never kept (the copy comes after the answer is out)."""
    eng = _engine(tiny_target)
    try:
        eng.generate(DOC + ASK1, max_tokens=12)
        assert eng.prompt_cache.memory_used > 0
        eng.generate(DOC2 + ASK1, max_tokens=12)
        cached, _, answer = _run(eng, DOC + ASK2)
        assert cached == len(DOC) and answer == cold_answers(DOC + ASK2)
    finally:
        eng.close()


def test_the_answers_stats_say_how_much_of_the_prompt_came_from_the_cache(tiny_target):
    """The stats line under an answer (the app's, the CLI's) names the prompt tokens not read again."""
    from engine.measure.report import stats_line

    eng = _engine(tiny_target)
    try:
        first = eng.generate(DOC + ASK1, max_tokens=4)
        eng.generate(DOC2 + ASK1, max_tokens=4)
        again = eng.generate(DOC + ASK2, max_tokens=4)
    finally:
        eng.close()
    assert first.stats.cached_tokens == 0 and "from cache" not in stats_line(first.stats)
    assert again.stats.cached_tokens == len(DOC) and again.stats.prompt_tokens == len(DOC + ASK2)
    assert f"first token {again.stats.time_to_first_token_s:.2f} s ({len(DOC)} of {len(DOC + ASK2)} prompt tokens " \
           "from cache)" in stats_line(again.stats)
    assert "from cache" not in stats_line({**again.stats.to_dict(), "cached_tokens": 40})  # a template's start: not said


def test_short_prompts_are_not_kept(tiny_target):
    eng = _engine(tiny_target, limits=CacheLimits(min_tokens=256, disk_bytes=0))
    try:
        _run(eng, DOC + ASK1)
        assert eng.prompt_cache.memory_used == 0
    finally:
        eng.close()


def test_a_new_engine_reads_the_cache_from_disk(tiny_target, cold_answers):
    first = _engine(tiny_target)
    _run(first, DOC + ASK1)
    first.close()  # finishes writing its files
    eng = _engine(tiny_target)
    try:
        assert eng.prompt_cache.memory_used == 0
        cached, _, answer = _run(eng, DOC + ASK2)
        assert cached == len(DOC) and answer == cold_answers(DOC + ASK2)
        assert eng.prompt_cache.memory_used > 0  # read from disk, now in memory too
    finally:
        eng.close()


def test_a_file_made_for_another_context_size_is_refused_and_removed(tiny_target, cold_answers):
    first = _engine(tiny_target, n_ctx=512)
    _run(first, DOC + ASK1)
    first.close()
    made = _files(first)
    assert len(made) == 1
    eng = _engine(tiny_target, n_ctx=1024)
    try:
        cached, _, answer = _run(eng, DOC + ASK1)
        assert cached == 0 and answer == cold_answers(DOC + ASK1)
        eng.prompt_cache.flush()
        identities = [read_header(p).identity for p in _files(eng)]  # the old file, or this answer's under its name
        assert identities and all("|n_ctx1024|" in i for i in identities), identities
    finally:
        eng.close()


@pytest.mark.parametrize("damage", ["flip", "cut"])
def test_a_damaged_file_is_warned_about_removed_and_rebuilt(tiny_target, cold_answers, caplog, damage):
    first = _engine(tiny_target)
    _run(first, DOC + ASK1)
    first.close()
    (path,) = _files(first)
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[-100] ^= 0xFF  # a byte inside the state: only the checksum can tell
    else:
        data = data[: len(data) // 2]
    path.write_bytes(bytes(data))
    eng = _engine(tiny_target)
    try:
        with caplog.at_level(logging.WARNING, logger="engine.decoding.prompt_cache"):
            cached, _, answer = _run(eng, DOC + ASK2)
        assert cached == 0 and answer == cold_answers(DOC + ASK2)
        warned = [r for r in caplog.records if "damaged" in r.getMessage()]
        assert len(warned) == 1 and path.name in warned[0].getMessage()
        eng.prompt_cache.flush()
        assert not path.exists() and len(_files(eng)) == 1  # removed; this answer's state written instead
    finally:
        eng.close()


def test_the_memory_budget_drops_the_least_recently_used(tiny_target, cold_answers):
    probe = _engine(tiny_target, limits=CacheLimits(min_tokens=16, disk_bytes=0))
    _run(probe, DOC + ASK1)
    one = probe.prompt_cache.memory_used  # one state's size
    probe.close()
    eng = _engine(tiny_target, limits=CacheLimits(min_tokens=16, disk_bytes=0, memory_bytes=int(one * 1.5)))
    try:
        _run(eng, DOC + ASK1)
        _run(eng, DOC2 + ASK1)  # over budget: the first document's state goes
        assert eng.prompt_cache.memory_used <= int(one * 1.5)
        eng.forget_prompts()  # the decoder's own KV cache holds the second document: empty it
        assert _run(eng, DOC + ASK2)[0] == 0
        eng.forget_prompts()
        cached, _, answer = _run(eng, DOC2 + ASK2)
        assert cached == 0  # ... and reading the first one again pushed the second one out
        assert answer == cold_answers(DOC2 + ASK2)
    finally:
        eng.close()


def test_a_hybrid_target_restores_only_an_exact_prefix(tiny_hybrid):
    cold = Engine(tiny_hybrid, n_ctx=512, metrics_log=False, calibration=False, prompt_cache=False)
    eng = _engine(tiny_hybrid)
    try:
        _run(eng, DOC + ASK1)
        eng.forget_prompts()
        cached, _, answer = _run(eng, DOC + ASK1, draft="lookup")  # regenerate, another draft choice
        assert cached == len(DOC + ASK1) - 1
        assert answer == _run(cold, DOC + ASK1)[2]
        eng.forget_prompts()
        cold.forget_prompts()
        cached, _, answer = _run(eng, DOC + ASK2)  # its state cannot be cut back to the document
        assert cached == 0 and answer == _run(cold, DOC + ASK2)[2]
    finally:
        eng.close()
        cold.close()


def test_a_request_may_ask_for_no_prompt_cache(tiny_target):
    eng = _engine(tiny_target)
    try:
        _run(eng, DOC + ASK1)
        kept = eng.prompt_cache.memory_used
        cached, _, _ = _run(eng, DOC + ASK2, draft="lookup", prompt_cache=False)
        assert cached == 0 and eng.prompt_cache.memory_used == kept  # neither read nor added to
    finally:
        eng.close()


def test_the_race_reads_both_sides_from_an_empty_cache(tiny_target, tiny_draft):
    eng = _engine(tiny_target)
    try:
        prompt = DOC + ASK1
        _run(eng, prompt)
        _run(eng, prompt, draft=str(tiny_draft))  # both sides' prompt is cached now
        kept = eng.prompt_cache.memory_used
        firsts: dict[str, PrefillEvent] = {}

        def seen(side, ev):
            if isinstance(ev, PrefillEvent):
                firsts.setdefault(side, ev)

        result = race(eng, GenerationRequest(prompt, draft=str(tiny_draft), lookahead=3, max_tokens=8), on_event=seen)
        assert result is not None
        assert {s: (e.cached, e.total) for s, e in firsts.items()} == {
            "target": (0, len(prompt) - 1), "speculative": (0, len(prompt) - 1)}
        assert eng.prompt_cache.memory_used == kept
    finally:
        eng.close()


def test_the_bench_reads_every_prompt_whole(tiny_target, tiny_draft):
    eng = _engine(tiny_target)
    try:
        prompt = DOC + ASK1
        _run(eng, prompt)  # cached before the bench starts
        totals = []
        real = eng.stream

        def spy(req, **kw):
            evs = list(real(req, **kw))
            totals.append(next(e for e in evs if isinstance(e, PrefillEvent)).total)
            return iter(evs)

        eng.stream = spy  # type: ignore[method-assign]
        suite = bench_suites.Suite("one", [bench_suites.BenchPrompt("a", prompt, False)])
        bench.run_bench(eng, [suite], plan_configs(str(tiny_draft), modes=("target", "auto"), sweep=(2,)),
                        repeat=1, max_tokens=4, check_quality=False)
        assert totals and set(totals) == {len(prompt) - 1}, totals
    finally:
        eng.close()


def test_clear_prompt_cache_forgets_memory_and_files(tiny_target):
    eng = _engine(tiny_target)
    try:
        _run(eng, DOC + ASK1)
        eng.prompt_cache.flush()
        assert eng.prompt_cache.memory_used > 0 and _files(eng)
        eng.clear_prompt_cache()
        assert eng.prompt_cache.memory_used == 0 and not _files(eng)
        eng.forget_prompts()
        assert _run(eng, DOC + ASK2)[0] == 0
    finally:
        eng.close()


def test_another_file_of_the_same_name_and_size_never_gets_its_states(tmp_path, vocab):
    """Two models that share a file name and a size (another fine-tune saved over the same name,
    a test's scripted model) are told apart by their content: a state saved for one is never
    restored into the other (its KV would be another model's: a wrong answer)."""
    from engine.models.tinymodel import write_model

    a = write_model(tmp_path / "a" / "model.gguf", seed=11, n_layer=2, name="same", vocab=vocab)
    b = write_model(tmp_path / "b" / "model.gguf", seed=12, n_layer=2, name="same", vocab=vocab)
    assert a.stat().st_size == b.stat().st_size and a.read_bytes() != b.read_bytes()
    prompt = DOC + ASK1
    eng = _engine(a)
    _run(eng, prompt)
    eng.close()  # its state is on disk now
    cold = Engine(b, n_ctx=512, metrics_log=False, calibration=False, prompt_cache=False)
    want = _run(cold, prompt)[2]
    cold.close()
    other = _engine(b)
    try:
        cached, _, answer = _run(other, prompt)
        assert cached == 0 and answer == want
    finally:
        other.close()
