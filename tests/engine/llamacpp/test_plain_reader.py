"""Long prompts read through the target's unrepacked twin (engine/llamacpp/plain_reader.py): the
context ends holding the prompt as if it had read it, the answers are the same, a cancel leaves
it as it was, and the choice is measured once and kept."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from engine import Engine
from engine.decoding.cancel import CancelToken
from engine.decoding.decoder import Decoder
from engine.decoding.events import DoneEvent, PrefillEvent
from engine.decoding.request import GenerationRequest
from engine.errors import Cancelled, TandemError
from engine.llamacpp.context import Context
from engine.llamacpp.llama import Model
from engine.llamacpp.plain_reader import PlainReader
from engine.llamacpp.runtime import RuntimeParams
from engine.models import calibration

RT = RuntimeParams(n_ctx=1024, n_batch=64)


@pytest.fixture(scope="module")
def target(tiny_target):
    m = Model(tiny_target)
    yield m
    m.close()


@pytest.fixture(scope="module")
def q4_target(tiny_target, tmp_path_factory):
    """The tiny target in Q4_0, which llama.cpp repacks on x86 CPUs with AVX2 or AVX-512."""
    from engine.llamacpp.quantize import quantize

    return quantize(tiny_target, tmp_path_factory.mktemp("q") / "target.q4_0.gguf", "q4_0")


def _prompt(model: Model, n: int) -> list[int]:
    ids = model.tokenize(" ".join(["the value of data is"] * 200), add_special=False)
    return ids[:n]


def _last_logits(ctx: Context, last: int) -> np.ndarray:
    return ctx.decode([last]).copy()


@pytest.mark.parametrize("how", ["plain", "measure"])
@pytest.mark.parametrize("held", [0, 70])
def test_the_context_ends_holding_the_prompt_as_its_own_reading_would(target, how, held):
    """After a twin reading (and after one measured: first chunk here, second there) the
    context holds every token, and the next token's logits are those of reading it here
    (F32 weights: the twin's kernels are the target's, so bit for bit; the same chunks, whose
    boundaries round too)."""
    prompt = _prompt(target, 400)
    here = Context(target, RT)
    for part in (prompt[:held], prompt[held:-1]):
        for _ in here.feed(part) if part else ():
            pass
    want = _last_logits(here, prompt[-1])
    here.close()

    ctx = Context(target, RT)
    for _ in ctx.feed(prompt[:held]) if held else ():
        pass
    reader = PlainReader(target, mode="always", keep=False)
    done = [n for n, _ in reader.feed(ctx, prompt[held:-1], how)]
    assert done == sorted(done) and done[-1] == len(prompt) - 1 - held and len(done) >= 2
    assert ctx.tokens == prompt[:-1]
    np.testing.assert_array_equal(_last_logits(ctx, prompt[-1]), want)
    if how == "measure":
        assert reader.verdict is not None and reader.verdict["target_tok_s"] > 0 and reader.verdict["plain_tok_s"] > 0
    ctx.close()
    reader.close()


def test_engine_answers_alike_with_and_without_the_twin(tiny_target, tiny_draft):
    """Greedy answers through the decoder, target alone and speculative, read both ways."""
    answers = {}
    for mode in ("never", "always"):
        eng = Engine(tiny_target, n_ctx=1024, n_batch=64, metrics_log=False, calibration=False, prompt_cache=False,
                     plain_reading=mode)
        prompt = _prompt(eng.target, 300)
        for draft in (None, tiny_draft):
            eng.forget_prompts()
            r = eng.generate(prompt, draft_model=draft, lookahead=3, max_tokens=16)
            answers[(mode, draft)] = r.tokens
        assert (eng.reader._twin is not None) == (mode == "always")
        eng.close()
    assert answers[("never", None)] == answers[("always", None)] == answers[("always", tiny_draft)]


def test_a_cancel_while_the_twin_reads_stops_it_and_keeps_the_context_sound(target):
    """The cancel token aborts the target's context; the twin's decodes stop with it, the twin's
    context is freed, and the target's context holds what it held: the next run reads afresh."""
    dec = Decoder(target, None, runtime=RuntimeParams(n_ctx=2048, n_batch=32),
                  reader=PlainReader(target, mode="always", keep=False))
    prompt = target.tokenize(" ".join(["the value of data"] * 120))
    cancel = CancelToken()
    events = []
    for ev in dec.run(prompt, GenerationRequest(prompt, max_tokens=10), cancel):
        events.append(ev)
        if isinstance(ev, PrefillEvent) and ev.done >= 64:
            cancel.cancel()
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.stats.finish_reason == "cancelled"
    assert dec.ctx.n_past == 0  # nothing was handed over
    again = list(dec.run(prompt, GenerationRequest(prompt, max_tokens=5)))
    assert again[-1].stats.generated_tokens == 5
    ref = Decoder(target, None, runtime=RuntimeParams(n_ctx=2048, n_batch=32))
    assert again[-1].tokens == list(ref.run(prompt, GenerationRequest(prompt, max_tokens=5)))[-1].tokens
    dec.close()
    ref.close()
    dec.reader.close()


def test_an_abort_mid_chunk_reaches_the_twin(target):
    """`Context.abort` on the target's context (what a cancel token calls) stops a twin decode
    already running: a thread asks again and again while the twin reads 128-token chunks."""
    ctx = Context(target, RuntimeParams(n_ctx=4096, n_batch=128))
    reader = PlainReader(target, mode="always", keep=False)
    prompt = (_prompt(target, 1000) * 4)[:3000]
    finished = threading.Event()

    def keep_asking():
        while not finished.is_set():
            ctx.abort()

    asker = threading.Thread(target=keep_asking)
    asker.start()
    try:
        with pytest.raises(Cancelled):
            for _ in reader.feed(ctx, prompt, "plain"):
                pass
    finally:
        finished.set()
        asker.join()
    assert ctx.n_past == 0, "nothing handed over"
    ctx.close()
    reader.close()


def test_the_choice_is_measured_once_and_kept(q4_target, tmp_path, monkeypatch):
    """A repacked target measures at its first prompt of two chunks or more, keeps the verdict in
    the calibration store, and a new reader (a new process) plans from it without measuring."""
    monkeypatch.setattr(calibration, "store_path", lambda: tmp_path / "calibration.json")
    model = Model(q4_target)
    if not model.repacked:
        model.close()
        pytest.skip("this CPU's llama.cpp build repacks no Q4_0 weights")
    ctx = Context(model, RT)
    reader = PlainReader(model)
    assert reader.plan(ctx, 2 * RT.n_batch - 1) is None, "one chunk and a bit: nothing to compare"
    assert reader.plan(ctx, 2 * RT.n_batch) == "measure"
    prompt = _prompt(model, 300)
    list(reader.feed(ctx, prompt, "measure"))
    assert ctx.tokens == prompt
    kept = reader.verdict
    assert kept is not None and (tmp_path / "calibration.json").exists()
    again = PlainReader(model)
    ctx.clear()
    plan = again.plan(ctx, 1000)
    assert again.verdict == kept
    assert plan != "measure", "measured once"
    if kept["plain_tok_s"] < kept["target_tok_s"] * 1.05:
        assert plan is None
    assert again.plan(ctx, 1000, images=[object()]) is None, "pictures are read on the target"
    ctx.close()
    reader.close()
    again.close()
    model.close()


def test_the_twin_is_used_where_it_saves_more_than_it_costs(target):
    """With this VM's rates (1.5B Q4_K_M: 120 tok/s repacked, 200 plain, the twin loaded in 0.6 s),
    a 1,500-token document is read on the twin, a 50- or 200-token turn is not while the twin is
    still to load, a 200-token one is once it is; a twin measured slower is never used."""
    reader = PlainReader(target, mode="auto", keep=False)
    reader._verdicts[4] = {"target_tok_s": 120.0, "plain_tok_s": 200.0, "load_s": 0.6}
    v = reader._verdict(4)
    assert reader._pays(v, 1500, 0, 1) and not reader._pays(v, 50, 0, 1)
    assert not reader._pays(v, 200, 0, 1)
    reader._twin = target  # loaded: only the context and the handover are left to pay
    assert reader._pays(v, 200, 0, 1)
    reader._twin = None
    reader._verdicts[4] = {"target_tok_s": 200.0, "plain_tok_s": 120.0, "load_s": 0.6}
    assert not reader._pays(reader._verdict(4), 100_000, 0, 1)


def test_a_target_with_nothing_repacked_is_read_as_before(target):
    ctx = Context(target, RT)
    assert target.repacked == 0
    assert PlainReader(target).plan(ctx, 5000) is None
    assert PlainReader(target, mode="never").plan(ctx, 5000) is None
    assert PlainReader(target, mode="always").plan(ctx, 5000) == "plain"
    ctx.close()


def test_a_bad_mode_is_one_clear_line(tiny_target, monkeypatch):
    monkeypatch.setenv("TANDEM_PLAIN_READING", "sometimes")
    with pytest.raises(TandemError, match=r"plain reading must be one of auto, always, never, not 'sometimes' \(TANDEM_PLAIN_READING\)"):
        Engine(tiny_target, n_ctx=256, metrics_log=False, calibration=False, prompt_cache=False)
