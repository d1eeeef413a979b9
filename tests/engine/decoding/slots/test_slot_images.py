"""Pictures in the parallel slots (#49, #48): a request's pictures are read in its slot's own
sequence, each in a decode of its own between the shared passes, and each request writes the
text it writes alone on the single-sequence engine, beside text-only requests and other
pictures, with no draft, prompt lookup and a draft model (which reads the placeholders); a
reused slot reads a picture again unless the same picture stands at the same place. On a
target at plain positions and on one at M-RoPE positions."""

from __future__ import annotations


import pytest

from engine import Engine
from engine.decoding.events import DoneEvent, PrefillEvent
from engine.decoding.request import GenerationRequest
from engine.decoding.slots.scheduler import SlotScheduler
from engine.documents.images import MEDIA_MARKER
from engine.errors import PromptError
from engine.llamacpp.runtime import RuntimeParams
from image_files import png_bytes
from test_scheduler import at_once

A, B, C = png_bytes(32, 32, seed=3), png_bytes(40, 24, seed=9), png_bytes(32, 32, seed=11)
Q = "the value of the data is the value of"
# (prompt, pictures, max_tokens): pictures of two sizes, two in one prompt, text beside them,
# a text prompt longer than a batch of 64 (read in chunks while pictures are read beside it)
ASKS = [(Q, [A], 30), ("def count items def count items def count", [], 40), ("return total and", [B], 25),
        (f"{MEDIA_MARKER} and {MEDIA_MARKER} which is larger", [A, B], 35),
        (" ".join(["the list of items in the data"] * 12), [], 20), (Q, [B], 45)]


@pytest.fixture(scope="module", params=["tiny_vision_llama", "tiny_vision_qwen3vl", "tiny_vision"])
def seeing(request):
    """A seeing target: a llama (pictures at plain positions), Qwen3-VL's text model (M-RoPE: a
    picture takes fewer positions than cells, each sequence keeps its shift), and the hybrid
    Qwen3.5 (M-RoPE too, a recurrent state per sequence taken back past a picture)."""
    target, projector = request.getfixturevalue(request.param)
    e = Engine(target, mmproj=projector, n_ctx=512, n_threads=1, metrics_log=False, calibration=False)
    yield e
    e.close()


@pytest.fixture(scope="module")
def alone(seeing) -> list[DoneEvent]:
    """Each ask's answer on the single-sequence engine, target alone."""
    out = []
    for prompt, images, m in ASKS:
        events = list(seeing.stream(prompt, images=images, max_tokens=m, prompt_cache=False))
        out.append(events[-1])
    return out


def _slots(seeing: Engine, n: int, drafters, n_batch: int = 64) -> SlotScheduler:
    return SlotScheduler(seeing.target, n, runtime=RuntimeParams(n_ctx=512 * n, n_batch=n_batch, n_threads=1),
                         drafters=drafters)


def _ask(seeing: Engine, sched: SlotScheduler, prompt, images, m: int, lookahead=3) -> list:
    tokens, spans = seeing.prompt_input(GenerationRequest(prompt, images=images))
    return list(sched.stream(tokens, GenerationRequest(tokens, max_tokens=m, lookahead=lookahead), images=spans))


def _together(seeing: Engine, sched: SlotScheduler) -> list[list]:
    return at_once([lambda a=a: _ask(seeing, sched, *a) for a in ASKS], 0.003)


@pytest.mark.parametrize("draft", ["none", "lookup", "model"])
@pytest.mark.parametrize("n_slots", [2, 4])
def test_a_request_with_pictures_in_a_slot_writes_its_text_alone(seeing, alone, tiny_draft, draft, n_slots):
    spec = str(tiny_draft) if draft == "model" else draft
    sched = _slots(seeing, n_slots, {draft: lambda: seeing.slot_drafter(spec)})
    try:
        events = _together(seeing, sched)
    finally:
        sched.close()
    for i, (ref, evs) in enumerate(zip(alone, events)):
        done = evs[-1]
        assert isinstance(done, DoneEvent), f"ask {i} ended with {done!r}"
        assert done.tokens == ref.tokens, f"{n_slots} slots, {draft}: ask {i} wrote {done.text!r}, alone {ref.text!r}"
        assert done.stats.prompt_tokens == ref.stats.prompt_tokens
    if draft != "none":
        assert sum(e[-1].stats.drafted for e in events) > 0
    if draft == "model":  # the text-only draft model drafted after a picture, reading its placeholders
        assert events[0][-1].stats.drafted > 0


def test_a_reused_slot_reads_another_picture_at_the_same_place_again(seeing):
    """The same text with another picture of the same size: the placeholder runs are alike, but
    the slot keeps only the text before the picture and reads the new one; the same picture at
    the same place is kept (a hybrid's slot keeps nothing of either: its state cannot be cut)."""
    want = {p: list(seeing.stream(Q, images=[p], max_tokens=30, prompt_cache=False))[-1] for p in (A, C)}
    assert want[A].tokens != want[C].tokens, "the two pictures must lead to other texts for this test to tell"
    _, [span] = seeing.prompt_input(GenerationRequest(Q, images=[A]))
    sched = _slots(seeing, 2, {"none": lambda: None})
    try:
        first = _ask(seeing, sched, Q, [A], 30)
        second = _ask(seeing, sched, Q, [C], 30)
        third = _ask(seeing, sched, Q, [C], 30)
    finally:
        sched.close()
    assert first[-1].tokens == want[A].tokens
    assert second[-1].tokens == want[C].tokens
    assert third[-1].tokens == want[C].tokens
    cached = [[e for e in evs if isinstance(e, PrefillEvent)][0].cached for evs in (second, third)]
    if seeing.target.recurrent_state:  # a recurrent state it would keep in part is read again whole
        assert cached == [0, 0]
        return
    assert cached[0] == span.start  # the text before the picture kept, the picture read again
    assert cached[1] > span.end  # the same picture at the same place: kept


def test_a_picture_just_before_the_last_prompt_token_ends_the_reading(seeing):
    """The last prompt token is read with the first step: a picture right before it is the
    last thing the slot reads of its prompt, and then the slot steps."""
    tokens, [span] = seeing.prompt_input(GenerationRequest(Q, images=[A]))
    prompt = tokens[:span.end] + [tokens[-1]]
    dec = seeing.decoder(None)
    dec.forget_prompts()
    alone = list(dec.run(prompt, GenerationRequest(prompt, max_tokens=20), images=[span]))[-1]
    sched = _slots(seeing, 2, {"none": lambda: None})
    try:
        events = list(sched.stream(prompt, GenerationRequest(prompt, max_tokens=20), images=[span]))
    finally:
        sched.close()
    assert [(e.done, e.total) for e in events if isinstance(e, PrefillEvent)][-1] == (span.end, span.end)
    assert events[-1].tokens == alone.tokens


def test_a_picture_ending_the_prompt_is_refused_in_one_line(seeing):
    tokens, spans = seeing.prompt_input(GenerationRequest(Q, images=[A]))
    sched = _slots(seeing, 2, {"none": lambda: None})
    try:
        with pytest.raises(PromptError, match="^a picture cannot end the prompt: text must follow it$"):
            list(sched.stream(tokens[:spans[0].end], GenerationRequest(tokens[:spans[0].end]), images=spans))
    finally:
        sched.close()


@pytest.mark.parametrize("n_batch", [512, 128])
def test_gemma4_pictures_read_with_non_causal_attention_in_a_slot_are_read_as_alone(tiny_vision_gemma4, n_batch):
    """Gemma reads a picture with causal attention off: mtmd's helper turns it off for the
    picture's own decode only, so the slots beside it are untouched. The picture (81 image
    tokens) is read in one batch (a batch smaller than a non-causal picture is refused:
    test_vision_context)."""
    target, projector, _ = tiny_vision_gemma4
    e = Engine(target, mmproj=projector, n_ctx=512, n_batch=n_batch, n_threads=1, metrics_log=False, calibration=False)
    try:
        asks = [(Q, [A], 30), ("return total and", [], 30), (Q, [C], 30), ("return total and", [B], 30)]
        alone = [list(e.stream(p, images=i, max_tokens=m, prompt_cache=False))[-1].tokens for p, i, m in asks]
        sched = _slots(e, 2, {"none": lambda: None}, n_batch=n_batch)
        try:
            got = [events[-1].tokens for events in at_once([lambda a=a: _ask(e, sched, *a) for a in asks])]
        finally:
            sched.close()
        assert got == alone
    finally:
        e.close()


def test_seeded_sampling_after_pictures_in_four_slots_draws_what_each_draws_alone(seeing):
    """Sampled, seeded, with lookup drafts: each request in a fresh sequence, its text read in
    one chunk on each side of its picture as alone, draws the tokens it draws alone."""
    asks = [a for a in ASKS if a[1]][:4]
    opts = {"temperature": 0.9, "top_k": 40, "draft_model": "lookup", "lookahead": 3}
    alone = [list(seeing.stream(p, images=i, max_tokens=m, seed=100 + k, prompt_cache=False, **opts))[-1]
             for k, (p, i, m) in enumerate(asks)]
    sched = _slots(seeing, 4, {"lookup": lambda: seeing.slot_drafter("lookup")}, n_batch=512)

    def go(k: int) -> DoneEvent:
        prompt, images, m = asks[k]
        req = GenerationRequest.from_options(prompt, images=images, max_tokens=m, seed=100 + k, **opts)
        tokens, spans = seeing.prompt_input(req)
        run = GenerationRequest.from_options(tokens, max_tokens=m, seed=100 + k, **opts)
        return list(sched.stream(tokens, run, images=spans))[-1]

    try:
        got = at_once([lambda k=k: go(k) for k in range(len(asks))])
    finally:
        sched.close()
    assert [g.tokens for g in got] == [a.tokens for a in alone]
    assert sum(g.stats.drafted for g in got) > 0
