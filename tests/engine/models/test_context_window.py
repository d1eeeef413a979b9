"""engine/models/context_window.py: which turns of a long chat are sent, trained length, memory."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings, strategies as st

from engine.models import context_window as cw
from engine.measure.report import stats_line


def _chat(*lengths: int) -> list[dict]:
    """Alternating user/assistant messages whose content is `n` characters."""
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": "x" * n} for i, n in enumerate(lengths)]


def _count(messages: list[dict]) -> int:
    """A stand-in tokenizer: one token per character plus 4 per message (the template)."""
    return sum(len(m["content"]) + 4 for m in messages)


SYSTEM = [{"role": "system", "content": "s" * 16}]  # 20 tokens


def test_everything_fits_nothing_dropped():
    fit = cw.fit_chat(SYSTEM, _chat(10, 10, 10), _count, n_ctx=200, headroom=50)
    assert fit.dropped == 0 and fit.note == "" and fit.messages == SYSTEM + _chat(10, 10, 10)
    assert fit.tokens == 20 + 3 * 14


def test_oldest_whole_turns_dropped_system_kept():
    chat = _chat(100, 100, 100, 100, 30)  # turns: (u,a) (u,a) (u)
    fit = cw.fit_chat(SYSTEM, chat, _count, n_ctx=300, headroom=50)
    # budget 250: system 20 + last turn 34 + previous turn 208 = 262 > 250, so only the last turn stays
    assert fit.messages == SYSTEM + chat[4:]
    assert fit.dropped == 4 and fit.tokens == 54
    assert fit.note == "4 earlier messages are not sent: the context holds 300 tokens"
    fit = cw.fit_chat(SYSTEM, chat, _count, n_ctx=400, headroom=50)
    assert fit.messages == SYSTEM + chat[2:] and fit.dropped == 2  # a whole turn: never an orphan answer
    assert fit.messages[1]["role"] == "user"


def test_one_dropped_message_wording():
    chat = [{"role": "assistant", "content": "x" * 100}] + _chat(10)
    fit = cw.fit_chat([], chat, _count, n_ctx=100, headroom=10)
    assert fit.note == "1 earlier message is not sent: the context holds 100 tokens"


def test_single_message_larger_than_context_is_refused_with_its_size():
    with pytest.raises(cw.TooLarge) as e:
        cw.fit_chat(SYSTEM, _chat(10, 10, 5000), _count, n_ctx=4096, headroom=512)
    assert e.value.tokens == 5024 and "5,024 tokens but the context holds 4,096" in str(e.value)


def test_last_turn_without_headroom_is_still_sent():
    fit = cw.fit_chat([], _chat(50, 50, 80), _count, n_ctx=100, headroom=50)
    assert fit.messages == _chat(50, 50, 80)[2:] and fit.tokens == 84


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 300), min_size=1, max_size=30), st.integers(100, 2000), st.integers(0, 400))
@example([76], 100, 0)  # exactly n_ctx tokens: no room for an answer token
def test_kept_suffix_is_the_longest_that_fits(lengths, n_ctx, headroom):
    chat = _chat(*lengths)
    try:
        fit = cw.fit_chat(SYSTEM, chat, _count, n_ctx=n_ctx, headroom=headroom)
    except cw.TooLarge as e:
        assert e.tokens >= n_ctx
        return
    kept = fit.messages[1:]
    assert fit.messages[0] == SYSTEM[0] and kept == chat[fit.dropped:] and kept
    assert fit.tokens == _count(fit.messages) < n_ctx
    starts = [i for i, m in enumerate(chat) if m["role"] == "user"]
    if fit.dropped:
        assert fit.dropped in starts
        earlier = [s for s in starts if s < fit.dropped]
        assert _count(SYSTEM + chat[earlier[-1]:]) + headroom > n_ctx  # one more turn would not fit
        if fit.tokens + headroom > n_ctx:
            assert fit.dropped == starts[-1]  # headroom given up only for the last turn alone


def test_trained_length_and_memory_from_the_header(tiny_target):
    from engine.models.gguf_header import read_header

    header = read_header(tiny_target, with_tensors=False)
    assert cw.trained_length(header) == 2048
    spec = cw.spec_from_header(tiny_target, header)
    assert (spec.n_layers, spec.n_kv_heads, spec.head_dim) == (2, 2, 16)
    assert spec.bytes == tiny_target.stat().st_size
    small, big = cw.memory_need([spec], 512), cw.memory_need([spec], 2048)
    assert big - small == spec.kv_bytes_per_token() * (2048 - 512)


def test_a_header_with_nonsense_sizes_is_read_as_unknown_not_an_exception(tiny_target):
    """Header values come from downloaded files: strings, negatives and huge numbers where
    counts belong give 'unknown' (0 / None), never a ValueError in the model bar."""
    from engine.models.gguf_header import read_header

    header = read_header(tiny_target, with_tensors=False)
    arch = header.architecture
    for bad in ("many", -5, float("inf"), [1, 2]):
        header.metadata.update({f"{arch}.context_length": bad, f"{arch}.block_count": bad,
                                f"{arch}.attention.head_count": bad, f"{arch}.attention.key_length": bad})
        assert cw.trained_length(header) is None
        spec = cw.spec_from_header(tiny_target, header)
        assert spec.n_layers == 0 and spec.context_length == 0
        assert cw.memory_need([spec], 2048) >= spec.bytes  # the weights still count


@pytest.mark.parametrize("wanted,trained,expected", [(0, 2048, 2048), (None, 32768, 4096), (8192, 2048, 2048),
                                                     (16384, 32768, 16384), (8192, None, 8192)])
def test_clamp_n_ctx(wanted, trained, expected):
    assert cw.clamp_n_ctx(wanted, trained) == expected


def test_stats_never_give_an_acceptance_rate_for_nothing_drafted():
    line = stats_line({"generated_tokens": 40, "mode": "model", "drafted": 0, "accepted": 0, "acceptance_rate": 1.0,
                       "mean_tokens_per_step": 1.0}, finish=False)
    assert "no tokens drafted" in line and "acceptance" not in line and "tokens/step" not in line
    line = stats_line({"generated_tokens": 40, "mode": "model", "drafted": 10, "accepted": 7, "acceptance_rate": 0.7,
                       "mean_tokens_per_step": 1.5}, finish=False)
    assert "acceptance 70% (7/10)" in line and "1.50 tokens/step" in line


def test_auto_idle_note_only_when_auto_drafted_nothing():
    from engine.decoding.drafting.cost_model import Costs
    from engine.measure.report import auto_idle_note

    costs = Costs([(1, 0.010), (2, 0.013), (4, 0.019), (8, 0.031)], 0.006, 0.3, 0.4)
    line, tip = auto_idle_note({"mode": "model", "lookahead": "auto (k=0 x40)", "drafted": 0}, costs)
    assert line == "Auto is not drafting: on this machine the draft costs more than it saves — try Prompt lookup for edits"
    assert "one target step: 10.0 ms" in tip and "one draft token: 6.0 ms = 0.60× a target step (cost ratio)" in tip
    assert "2 tokens 1.30×" in tip and "acceptance estimate: 40%" in tip and "best predicted: lookahead" in tip
    line, _ = auto_idle_note({"mode": "lookup", "lookahead": "auto", "drafted": 0}, None)
    assert line.startswith("Prompt lookup drafted nothing")
    assert auto_idle_note({"mode": "model", "lookahead": "auto", "drafted": 3}, costs) is None
    assert auto_idle_note({"mode": "model", "lookahead": "4", "drafted": 0}, costs) is None
    assert auto_idle_note({"mode": "target", "lookahead": "auto", "drafted": 0}, costs) is None
