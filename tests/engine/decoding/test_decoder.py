"""The decoder on tiny generated models: exactness, events, control, bad input."""

from __future__ import annotations

import threading

import pytest
from scipy import stats as sps

from engine import Engine
from engine.decoding.drafting.drafters import Drafter, ModelDrafter, Proposal
from engine.errors import IncompatiblePairError, ModelFileError, PromptError
from engine.decoding.events import DoneEvent, PrefillEvent, StepEvent, TokenEvent
from engine.llamacpp.llama import Model
from engine.llamacpp.context import Context
from engine.decoding.drafting.lookahead import Fixed
from engine.decoding.quality import first_divergence
from engine.decoding.sampling.sampler import SamplingParams, distribution
from engine.decoding.cancel import CancelToken
from engine.decoding.decoder import Decoder
from engine.llamacpp.runtime import RuntimeParams
from engine.decoding.request import GenerationRequest
from engine.models.tinymodel import chain_through, write_model

PROMPTS = ["the value of", "def count items", "return total and", "import data for the class", "while item is not"]


@pytest.fixture(scope="module")
def eng(tiny_target):
    e = Engine(tiny_target, n_ctx=512, metrics_log=False)
    yield e
    e.close()


@pytest.mark.parametrize("draft", ["self", "other", "lookup"])
@pytest.mark.parametrize("k", [1, 3, 8])
def test_greedy_speculative_equals_target_alone(eng, tiny_target, tiny_draft, draft, k):
    spec = {"self": tiny_target, "other": tiny_draft, "lookup": "lookup"}[draft]
    for prompt in PROMPTS:
        base = eng.generate(prompt, max_tokens=60)
        fast = eng.generate(prompt, draft_model=spec, lookahead=k, max_tokens=60)
        div = first_divergence(eng.target, eng.tokens_for(prompt), base.tokens, fast.tokens)
        if div is not None:
            assert div.margin < 1e-4, f"outputs part at token {div.index} where the target's margin is {div.margin}"
        if draft == "self":
            assert fast.stats.acceptance_rate == 1.0
            assert fast.stats.mean_tokens_per_step > 1.5


def test_acceptance_is_one_with_the_target_as_its_own_draft(eng, tiny_target):
    r = eng.generate("the value of", draft_model=tiny_target, lookahead=4, max_tokens=80)
    assert r.stats.drafted > 40 and r.stats.accepted == r.stats.drafted
    assert r.stats.provenance_counts["draft"] == r.stats.accepted
    # every step ends with a bonus token (all accepted) unless it was cut by max_tokens
    assert r.stats.provenance_counts["target"] == 0


def _exact_two_token_distribution(model: Model, prompt: list[int], params: SamplingParams, images=(),
                                  runtime: RuntimeParams | None = None) -> dict[tuple[int, int], float]:
    """The target's exact distribution of the two tokens after `prompt` (with its pictures'
    `images` spans, read as the engine reads them)."""
    ctx = Context(model, runtime or RuntimeParams(n_ctx=256))
    out: dict[tuple[int, int], float] = {}
    try:
        for _ in ctx.feed(prompt[:-1], images=images):
            pass
        base = ctx.n_past
        p1 = distribution(ctx.decode([prompt[-1]], logits="last")[0].copy(), params)
        for a, pa in zip(p1.ids.tolist(), p1.probs.tolist()):
            ctx.truncate(base + 1)
            p2 = distribution(ctx.decode([a], logits="last")[0].copy(), params)
            for b, pb in zip(p2.ids.tolist(), p2.probs.tolist()):
                out[(a, b)] = pa * pb
    finally:
        ctx.close()
    return out


def _chi_square(counts: dict, expected: dict, n: int) -> float:
    keys = sorted(expected, key=lambda x: -expected[x])
    obs, exp = [], []
    acc_o = acc_e = 0.0
    for key in keys:  # merge rare cells so every expected count is >= 5
        acc_o += counts.get(key, 0)
        acc_e += expected[key] * n
        if acc_e >= 5:
            obs.append(acc_o)
            exp.append(acc_e)
            acc_o = acc_e = 0.0
    if acc_e > 0:
        obs[-1] += acc_o
        exp[-1] += acc_e
    extra = sum(v for k, v in counts.items() if k not in expected)
    assert extra == 0, f"{extra} samples outside the target's support"
    return float(sps.chisquare(obs, exp).pvalue)


@pytest.mark.parametrize("draft", ["other-model", "self", "lookup-like"])
def test_sampling_distribution_matches_target(tiny_target, tiny_draft, draft):
    params = SamplingParams(temperature=1.0, top_k=6)
    target = Model(tiny_target)
    prompt = target.tokenize("the value of")
    exact = _exact_two_token_distribution(target, prompt, params)
    if draft == "other-model":
        drafter: Drafter = ModelDrafter(Model(tiny_draft), RuntimeParams(n_ctx=256))
    elif draft == "self":
        drafter = ModelDrafter(target, RuntimeParams(n_ctx=256))
    else:
        # deterministic guesses (q one-hot) on the target's second choices: often rejected,
        # so the residual draw decides much of the outcome
        firsts = sorted({a for a, _ in exact}, key=lambda a: -sum(p for (x, _), p in exact.items() if x == a))
        seconds = sorted({b for (a, b) in exact if a == firsts[1]}, key=lambda b: -exact[(firsts[1], b)])
        drafter = _FixedProposal([firsts[1], seconds[1]])
    dec = Decoder(target, drafter, runtime=RuntimeParams(n_ctx=256))
    n = 2500
    counts: dict[tuple[int, int], int] = {}
    for seed in range(n):
        cfg = GenerationRequest(prompt, lookahead=Fixed(2), max_tokens=2,
                                sampling=SamplingParams(temperature=1.0, top_k=6, seed=seed))
        done = [e for e in dec.run(prompt, cfg) if isinstance(e, DoneEvent)][0]
        assert len(done.tokens) == 2
        key = (done.tokens[0], done.tokens[1])
        counts[key] = counts.get(key, 0) + 1
    assert _chi_square(counts, exact, n) > 0.01
    dec.close()


class _FixedProposal(Drafter):
    kind = "fixed"

    def __init__(self, tokens):
        self.tokens = tokens

    def propose(self, context, k, sampler, rules=None):
        return Proposal(self.tokens[:k], [None] * min(k, len(self.tokens)))


def test_target_alone_sampling_matches_exact_distribution(tiny_target):
    params = SamplingParams(temperature=1.0, top_k=6)
    target = Model(tiny_target)
    prompt = target.tokenize("the value of")
    exact = _exact_two_token_distribution(target, prompt, params)
    dec = Decoder(target, None, runtime=RuntimeParams(n_ctx=256))
    n = 2000
    counts: dict[tuple[int, int], int] = {}
    for seed in range(n):
        cfg = GenerationRequest(prompt, max_tokens=2, sampling=SamplingParams(temperature=1.0, top_k=6, seed=seed))
        done = [e for e in dec.run(prompt, cfg) if isinstance(e, DoneEvent)][0]
        counts[tuple(done.tokens)] = counts.get(tuple(done.tokens), 0) + 1
    assert _chi_square(counts, exact, n) > 0.01


def test_sampling_is_reproducible_per_seed(eng, tiny_draft):
    a = eng.generate("the value of", draft_model=tiny_draft, lookahead=3, temperature=0.9, seed=42, max_tokens=40)
    b = eng.generate("the value of", draft_model=tiny_draft, lookahead=3, temperature=0.9, seed=42, max_tokens=40)
    c = eng.generate("the value of", draft_model=tiny_draft, lookahead=3, temperature=0.9, seed=43, max_tokens=40)
    assert a.tokens == b.tokens
    assert a.tokens != c.tokens


def test_events_are_ordered_and_consistent(eng, tiny_draft):
    events = list(eng.stream("the value of", draft_model=tiny_draft, lookahead=3, max_tokens=50))
    assert isinstance(events[0], PrefillEvent)
    assert isinstance(events[-1], DoneEvent)
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    steps = [e for e in events if isinstance(e, StepEvent)]
    done = events[-1]
    assert [t.index for t in tokens] == list(range(len(done.tokens)))
    assert "".join(t.text for t in tokens) == done.text
    assert sum(s.emitted for s in steps) == len(done.tokens)
    assert sum(s.drafted for s in steps) == done.stats.drafted
    assert sum(s.accepted for s in steps) == done.stats.accepted
    for t in tokens:
        assert t.provenance in ("draft", "target", "bonus", "plain")
    st = done.stats
    assert st.generated_tokens == 50 and st.finish_reason == "length" and st.stopped_by == "max_tokens"
    assert st.acceptance_rate == pytest.approx(st.accepted / st.drafted)
    assert st.mean_tokens_per_step == pytest.approx(50 / st.steps)
    assert st.decode_tokens_per_s > 0 and st.time_to_first_token_s > 0
    assert sum(st.provenance_counts.values()) == 50


def test_lookahead_changed_from_another_thread_applies_next_step(tiny_target):
    target = Model(tiny_target)
    la = Fixed(1)
    dec = Decoder(target, ModelDrafter(target, RuntimeParams(n_ctx=512)), runtime=RuntimeParams(n_ctx=512))
    gate = threading.Event()
    changed = threading.Event()
    seen: list[int] = []

    def consume():
        prompt = target.tokenize("the value of")
        for ev in dec.run(prompt, GenerationRequest(prompt, lookahead=la, max_tokens=120)):
            if isinstance(ev, StepEvent):
                seen.append(ev.k)
                if ev.step == 3:
                    gate.set()
                    changed.wait(5)

    t = threading.Thread(target=consume)
    t.start()
    assert gate.wait(5)
    threading.Thread(target=la.set, args=(5,)).start()
    while la.k != 5:
        pass
    changed.set()
    t.join(10)
    assert seen[:4] == [1, 1, 1, 1]
    assert seen[4] == 5 and set(seen[4:-2]) == {5}


def test_cancel_stops_within_a_step(eng, tiny_draft):
    cancel = CancelToken()
    got = []
    for ev in eng.stream("the value of", draft_model=tiny_draft, lookahead=4, max_tokens=400, cancel=cancel):
        if isinstance(ev, StepEvent) and ev.step == 5:
            cancel.cancel()
        if isinstance(ev, StepEvent):
            got.append(ev.step)
        if isinstance(ev, DoneEvent):
            done = ev
    assert max(got) == 5
    assert done.stats.finish_reason == "cancelled" and done.stats.stopped_by == "cancel"
    assert 0 < len(done.tokens) < 400 and done.text  # the partial answer is kept
    # the engine is usable right after
    assert eng.generate("the value of", max_tokens=5).stats.generated_tokens == 5


def test_cancel_during_prefill(tiny_target):
    target = Model(tiny_target)
    dec = Decoder(target, None, runtime=RuntimeParams(n_ctx=2048, n_batch=32))
    cancel = CancelToken()
    prompt = target.tokenize(" ".join(["the value of data"] * 120))
    events = []
    for ev in dec.run(prompt, GenerationRequest(prompt, max_tokens=10), cancel):
        events.append(ev)
        if isinstance(ev, PrefillEvent) and ev.done >= 64:
            cancel.cancel()
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.stats.finish_reason == "cancelled" and done.tokens == []
    assert max(e.done for e in events if isinstance(e, PrefillEvent)) < len(prompt) - 1


@pytest.fixture(scope="module")
def scripted(models_dir, vocab):
    """A model that writes ' the value is é done' then EOS, whatever came before."""
    words = ["▁the", "▁value", "▁is", "▁", vocab.byte(0xC3), vocab.byte(0xA9), "▁data", 2]
    ids = [w if isinstance(w, int) else vocab.id(w) for w in words]
    path = write_model(models_dir / "scripted.gguf", chain=chain_through(ids), vocab=vocab, name="scripted")
    e = Engine(path, n_ctx=128, metrics_log=False)
    yield e
    e.close()


def test_multibyte_characters_are_emitted_whole(scripted):
    r = scripted.generate("of the", max_tokens=20)
    assert r.text == " value is é data"
    texts = [(t.text, t.token_id) for t in r.token_events]
    assert ("", scripted.target.tokenize("é", add_special=False)[0]) in texts or any(t == "" for t, _ in texts)
    assert any(t == "é" for t, _ in texts)
    assert r.stats.stopped_by == "eos" and r.stats.finish_reason == "stop"


def test_stop_strings_are_not_emitted(scripted):
    r = scripted.generate("of the", max_tokens=20, stop=["is é"])
    assert r.text == " value "
    assert "".join(t.text for t in r.token_events) == " value "
    assert r.stats.stopped_by == "stop_string"
    # a stop string that never appears holds nothing back at the end
    r = scripted.generate("of the", max_tokens=20, stop=["zzz"])
    assert r.text == " value is é data"


def test_stop_string_with_speculation(scripted):
    r = scripted.generate("of the", max_tokens=20, stop=["é"], draft_model="lookup", lookahead=4)
    assert r.text == " value is "


def test_context_full_ends_with_length(tiny_target, tiny_draft):
    e = Engine(tiny_target, n_ctx=64, metrics_log=False)
    for draft in (None, tiny_draft):
        r = e.generate("the value of", draft_model=draft, lookahead=6, max_tokens=500)
        assert r.stats.finish_reason == "length" and r.stats.stopped_by == "context_full"
        n_ctx = e.decoder(draft).n_ctx  # llama.cpp rounds the context up (to 256 here)
        assert r.stats.prompt_tokens + r.stats.generated_tokens == n_ctx + 1  # the last token needs no KV slot
    e.close()


def test_bad_inputs_raise_typed_errors(eng, tiny_draft, no_byte_fallback, tmp_path):
    with pytest.raises(PromptError, match="empty"):
        eng.generate("   ")
    with pytest.raises(PromptError, match="context holds 512"):
        eng.generate("the value of " * 400)
    with pytest.raises(ModelFileError, match="no such file"):
        eng.generate("the", draft_model=tmp_path / "missing.gguf")
    with pytest.raises(IncompatiblePairError, match="no byte fallback"):
        eng.generate("the", draft_model=no_byte_fallback)
    with pytest.raises(ModelFileError, match="no such file"):
        Engine(tmp_path / "nope.gguf")
    # nothing left half-loaded: the engine still works
    assert eng.generate("the value of", max_tokens=3).stats.generated_tokens == 3


def test_chat_uses_the_template(eng):
    toks = eng.tokens_for("hello", chat=True, system="be brief")
    text = eng.target.detokenize(toks)
    assert eng.target.token_text(toks[1]) == "<|im_start|>"
    assert "assistant" in eng.target.detokenize(toks[-4:]) or "assistant" in text


def test_metrics_log_gets_one_line_per_generation(tiny_target, tmp_path):
    import json

    log = tmp_path / "m.jsonl"
    e = Engine(tiny_target, n_ctx=256, metrics_log=log)
    e.generate("the value", max_tokens=5, tag="chat")
    e.generate("the value", max_tokens=5, draft_model="lookup", lookahead=2)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(lines) == 2
    assert lines[0]["task"] == "chat" and lines[0]["stats"]["generated_tokens"] == 5
    assert lines[1]["draft"] == "lookup" and lines[0]["target"] == "target.gguf"
    e.close()


def test_draft_model_reads_the_prompt_during_prefill(tiny_target, tiny_draft):
    target = Model(tiny_target)
    drafter = ModelDrafter(Model(tiny_draft), RuntimeParams(n_ctx=512))
    dec = Decoder(target, drafter, runtime=RuntimeParams(n_ctx=512))
    prompt = target.tokenize("the value of data " * 20)
    events = dec.run(prompt, GenerationRequest(prompt, lookahead=Fixed(3), max_tokens=4))
    for ev in events:
        if isinstance(ev, StepEvent):
            # by the first step the draft already holds the prompt: it only catches up one token
            assert ev.step > 0 or drafter.ctx.n_past >= len(prompt) - 1
    assert drafter.ctx.tokens[: len(prompt) - 1] == prompt[:-1]
    # with lookahead 0 the draft is not touched
    fresh = ModelDrafter(Model(tiny_draft), RuntimeParams(n_ctx=512))
    dec0 = Decoder(target, fresh, runtime=RuntimeParams(n_ctx=512))
    list(dec0.run(prompt, GenerationRequest(prompt, lookahead=Fixed(0), max_tokens=4)))
    assert fresh.ctx.n_past == 0


class _Oracle(Drafter):
    """A free drafter that knows the target's output: proposes its next 2 tokens and then a
    third, right or wrong, with a low stated confidence (more than a Fixed(2) verifies)."""

    kind = "oracle"

    def __init__(self, prompt_len: int, truth: list[int], third_right: bool):
        self.prompt_len, self.truth, self.third_right = prompt_len, truth, third_right

    def propose(self, context, k, sampler, rules=None):
        i = len(context) - self.prompt_len
        toks = self.truth[i : i + 3]
        if len(toks) == 3 and not self.third_right:
            toks[2] = (toks[2] + 1) % 50
        return Proposal(toks, [None] * len(toks), [0.97, 0.97, 0.12][: len(toks)])


@pytest.mark.parametrize("third_right", [True, False])
def test_unverified_proposed_tokens_are_checked_for_free(tiny_target, monkeypatch, third_right):
    """When every verified draft holds, the target's own next token says whether the first
    unverified one was right: the run records it for that text's confidence, at no cost, and
    the output is still the target's."""
    from engine.decoding.drafting.cost_model import TextAcceptance

    seen: list[tuple[float, bool]] = []
    real = TextAcceptance.observe_one
    monkeypatch.setattr(TextAcceptance, "observe_one", lambda self, c, ok: (seen.append((c, ok)), real(self, c, ok)))
    target = Model(tiny_target)
    prompt = target.tokenize("the value of")
    plain = Decoder(target, None, runtime=RuntimeParams(n_ctx=512))
    truth = [ev.token_id for ev in plain.run(prompt, GenerationRequest(prompt, lookahead=Fixed(0), max_tokens=30))
             if isinstance(ev, TokenEvent)]
    dec = Decoder(target, _Oracle(len(prompt), truth, third_right), runtime=RuntimeParams(n_ctx=512))
    out = [ev.token_id for ev in dec.run(prompt, GenerationRequest(prompt, lookahead=Fixed(2), max_tokens=30))
           if isinstance(ev, TokenEvent)]
    assert out == truth
    untried = [ok for c, ok in seen if c == 0.12]
    assert len(untried) >= 5 and set(untried) == {third_right}
    assert [ok for c, ok in seen if c == 0.97] and all(ok for c, ok in seen if c == 0.97)

