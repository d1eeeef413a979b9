"""Hybrid targets (tiny Qwen3.5 with an MTP layer, tiny LFM2) speculate exactly: with their
own MTP head, a same-family draft and prompt lookup, greedy output is the target's alone and
sampled output keeps the target's distribution; the MTP head (and Gemma 4's assistant, a
separate MTP drafter reading the target's cache) pairs each token with the hidden state of
the position before it."""

from __future__ import annotations

import llama_cpp
import numpy as np
import pytest

from engine import Engine
from engine.decoding import decoder as decoder_module
from engine.decoding.decoder import Decoder
from engine.decoding.drafting.lookahead import Fixed
from engine.decoding.drafting.mtp_drafter import MTPDrafter
from engine.decoding.events import DoneEvent
from engine.decoding.sampling.sampler import SamplingParams
from engine.decoding.request import GenerationRequest
from engine.errors import UnsupportedModelError
from engine.llamacpp.context import Context
from engine.llamacpp.llama import Model
from engine.llamacpp.mtp import HeadPart, HiddenStates, MtpContext
from engine.llamacpp.runtime import RuntimeParams

from test_decoder import _chi_square, _exact_two_token_distribution

# One thread: a tiny model's step is microseconds, and two threads on a busy machine wait on
# each other for milliseconds (measured: 0.15 ms vs 49 ms per decode under load).
PROMPTS = ["the value of the data is the value of", "def count items in the list"]


@pytest.fixture(scope="module")
def qwen(tiny_hybrid):
    e = Engine(tiny_hybrid, n_ctx=512, n_threads=1, metrics_log=False, calibration=False)
    yield e
    e.close()


@pytest.fixture(scope="module")
def lfm2(tiny_lfm2):
    e = Engine(tiny_lfm2, n_ctx=512, n_threads=1, metrics_log=False, calibration=False)
    yield e
    e.close()


@pytest.mark.parametrize("k", [3, 12])  # 12 is past the snapshots kept: a checkpoint takes it back
@pytest.mark.parametrize("family,draft", [("qwen", "mtp"), ("qwen", "same-family"), ("qwen", "lookup"),
                                          ("lfm2", "same-family"), ("lfm2", "lookup")])
def test_greedy_output_is_the_targets_with_every_drafter(qwen, lfm2, tiny_hybrid_draft, tiny_lfm2_draft,
                                                         family, draft, k):
    eng = qwen if family == "qwen" else lfm2
    spec = {"mtp": "mtp", "lookup": "lookup",
            "same-family": str(tiny_hybrid_draft if family == "qwen" else tiny_lfm2_draft)}[draft]
    drafted = 0
    for prompt in PROMPTS:
        base = eng.generate(prompt, max_tokens=48)
        fast = eng.generate(prompt, draft_model=spec, lookahead=k, max_tokens=48)
        assert fast.tokens == base.tokens, f"{family} with {draft} (k={k}) parted from the target alone"
        drafted += fast.stats.drafted
    assert drafted > 0, f"{draft} drafted nothing"


@pytest.mark.parametrize("k", [1, 4])
def test_gemma4_with_its_assistant_writes_what_the_target_alone_writes(tiny_gemma4, tiny_gemma4_assistant, k):
    e = Engine(tiny_gemma4, n_ctx=512, n_threads=1, metrics_log=False, calibration=False)
    try:
        for prompt in PROMPTS:
            base = e.generate(prompt, max_tokens=40)
            fast = e.generate(prompt, draft_model=str(tiny_gemma4_assistant), lookahead=k, max_tokens=40)
            assert fast.tokens == base.tokens and fast.stats.drafted > 0 and fast.stats.mode == "mtp"
    finally:
        e.close()


def test_the_assistant_given_as_the_target_says_to_use_it_as_the_draft(tiny_gemma4_assistant, capsys):
    """Read from the header before any load: not llama.cpp's "requires ctx_other" context error."""
    from engine.cli.main import main

    a = tiny_gemma4_assistant
    with pytest.raises(UnsupportedModelError) as e:
        Engine(a, n_threads=1, metrics_log=False, calibration=False)
    assert str(e.value) == f"{a} drafts for Gemma 4 targets: use it as the draft, with a Gemma 4 model as the target"
    for command in ("generate", "race"):
        assert main([command, "the value", "--target", str(a), "--max-tokens", "2"]) == 2
        err = capsys.readouterr().err
        assert err == f"tandem: error: {a} drafts for Gemma 4 targets: use it as the draft (--draft {a})\n"


def test_an_assistant_for_another_family_is_one_clear_line(tiny_hybrid, tiny_gemma4_assistant):
    e = Engine(tiny_hybrid, n_threads=1, metrics_log=False, calibration=False)
    try:
        with pytest.raises(UnsupportedModelError, match="drafts for gemma4 models, not qwen35-mtp.gguf"):
            e.generate("the value", draft_model=str(tiny_gemma4_assistant), max_tokens=3)
    finally:
        e.close()


def test_the_targets_own_draft_is_fully_accepted_across_rollbacks(qwen, tiny_hybrid):
    """The target drafting for itself: every token accepted, so any wrong state is a miss."""
    r = qwen.generate(PROMPTS[0], draft_model=str(tiny_hybrid), lookahead=4, max_tokens=60)
    assert r.stats.drafted > 30 and r.stats.accepted == r.stats.drafted


def test_too_few_snapshots_fall_back_to_checkpoints(tiny_hybrid, monkeypatch):
    monkeypatch.setattr(decoder_module, "RECURRENT_SNAPSHOTS", 1)
    e = Engine(tiny_hybrid, n_ctx=512, n_threads=1, metrics_log=False, calibration=False)
    try:
        base = e.generate(PROMPTS[1], max_tokens=40)
        fast = e.generate(PROMPTS[1], draft_model="mtp", lookahead=5, max_tokens=40)
        assert e.decoder("mtp").ctx.rollback_depth == 1
        assert fast.tokens == base.tokens and fast.stats.drafted > 0
    finally:
        e.close()


@pytest.mark.parametrize("family", ["qwen35-mtp", "gemma4-assistant"])
def test_mtp_head_pairs_each_token_with_the_previous_positions_hidden_state(tiny_hybrid, tiny_gemma4,
                                                                            tiny_gemma4_assistant, family):
    """Every proposal's first row equals llama.cpp's pairing computed in one batch from
    scratch: token x_p with the target's hidden state h_{p-1} (zeros before the first); an
    assistant reading the target's cache gets only the last pair, at the last position."""
    shared = family == "gemma4-assistant"
    model = Model(tiny_gemma4 if shared else tiny_hybrid)
    assistant = Model(tiny_gemma4_assistant) if shared else None
    rt = RuntimeParams(n_ctx=256, n_threads=1)
    drafter = MTPDrafter(model, assistant)
    dec = Decoder(model, drafter, runtime=rt)
    rows: list[tuple[list[int], np.ndarray]] = []
    proposing = drafter.proposing

    def recording(context, k, sampler, rules):  # the row its first decode (the context's) gave
        steps = proposing(context, k, sampler, rules)
        try:
            want = next(steps)
            first = row = yield want
            rows.append((list(context), first.copy()))
            while True:
                want = steps.send(row)
                row = yield want
        except StopIteration as done:
            return done.value

    drafter.proposing = recording
    prompt = model.tokenize(PROMPTS[0])
    for _ in dec.run(prompt, GenerationRequest(prompt, lookahead=Fixed(3), max_tokens=30)):
        pass
    assert len(rows) >= 5
    for context, row in rows[:6]:
        ref = Context(model, rt)
        hidden = HiddenStates(ref)
        head = MtpContext(ref, hidden, assistant)
        try:
            ref.decode(context[:-1], logits="none")
            pairs = np.vstack([np.zeros((1, hidden.n_embd), np.float32), hidden.rows[: len(context) - 1]])
            if shared:  # one pair: the last token with the hidden state before it, at its position
                part = HeadPart(head.seq, context[-1:], len(context) - 1, pairs[-1:], True)
            else:
                part = HeadPart(head.seq, context, 0, pairs, True)
            want = head.heads.decode([part])[0]
        finally:
            head.close()
            hidden.close()
            ref.close()
        assert np.abs(row - want).max() < 1e-3, f"MTP row after {len(context)} tokens differs"
    dec.close()
    model.close()
    if assistant is not None:
        assistant.close()


def test_an_assistant_bound_after_its_target_read_tokens_is_one_line(tiny_gemma4, tiny_gemma4_assistant):
    """llama.cpp clears the target's cache cells under an assistant context it makes: one made
    over a target that holds tokens would read nothing, so it is refused (the target keeps them)."""
    from engine.errors import DecodeError

    model, assistant = Model(tiny_gemma4), Model(tiny_gemma4_assistant)
    ctx = Context(model, RuntimeParams(n_ctx=256, n_threads=1))
    hidden = HiddenStates(ctx)
    try:
        ctx.decode(model.tokenize(PROMPTS[0]), logits="none")
        with pytest.raises(DecodeError, match="must bind before its target reads anything") as err:
            MtpContext(ctx, hidden, assistant)
        assert "\n" not in str(err.value)
        assert llama_cpp.llama_memory_seq_pos_max(llama_cpp.llama_get_memory(ctx._ctx), 0) == ctx.n_past - 1
    finally:
        hidden.close()
        ctx.close()
        model.close()
        assistant.close()


def test_sampled_distribution_with_mtp_is_the_targets(tiny_hybrid):
    params = SamplingParams(temperature=1.0, top_k=6)
    target = Model(tiny_hybrid)
    prompt = target.tokenize("the value of")
    exact = _exact_two_token_distribution(target, prompt, params)
    dec = Decoder(target, MTPDrafter(target), runtime=RuntimeParams(n_ctx=256, n_threads=1))
    n, counts = 1500, {}
    for seed in range(n):
        req = GenerationRequest(prompt, lookahead=Fixed(2), max_tokens=2,
                                sampling=SamplingParams(temperature=1.0, top_k=6, seed=seed))
        done = [e for e in dec.run(prompt, req) if isinstance(e, DoneEvent)][0]
        counts[tuple(done.tokens)] = counts.get(tuple(done.tokens), 0) + 1
    assert _chi_square(counts, exact, n) > 0.01
    dec.close()
    target.close()


def test_mtp_on_a_file_without_mtp_layers_is_one_clear_line(tiny_target, tiny_hybrid_draft):
    for path in (tiny_target, tiny_hybrid_draft):
        e = Engine(path, n_threads=1, metrics_log=False, calibration=False)
        try:
            with pytest.raises(UnsupportedModelError, match="has no MTP layers") as err:
                e.generate("the value", draft_model="mtp", max_tokens=4)
            assert "\n" not in str(err.value)
        finally:
            e.close()
