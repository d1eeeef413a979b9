"""Images in (#49): the target reads a picture through its projector into the context the
decoder verifies with, and speculation after it stays exact: greedy text identical with every
drafter, the sampled distribution the target's, MTP drafting from the hidden states after the
picture, the picture encoded once per content, a text-only target refusing in one line."""

from __future__ import annotations

import pytest

from engine import Engine
from engine.decoding.decoder import Decoder
from engine.decoding.drafting.lookahead import Fixed
from engine.decoding.drafting.mtp_drafter import MTPDrafter
from engine.decoding.events import DoneEvent, PrefillEvent
from engine.decoding.request import GenerationRequest
from engine.decoding.sampling.sampler import SamplingParams
from engine.documents.images import MEDIA_MARKER, ImageError, ImageInput, decode_image
from engine.errors import PromptError
from engine.llamacpp.context import Context
from engine.llamacpp.runtime import RuntimeParams
from image_files import png_bytes
from test_decoder import _chi_square, _exact_two_token_distribution

QUESTION = "the value of the data is the value of"
PICTURE = png_bytes(32, 32, seed=3)


@pytest.fixture(scope="module")
def seeing(tiny_vision):
    target, projector = tiny_vision
    e = Engine(target, mmproj=projector, n_ctx=512, n_threads=1, metrics_log=False, calibration=False)
    yield e
    e.close()


@pytest.mark.parametrize("k", [3, 12])  # 12 is past the hybrid's snapshots: a checkpoint takes drafts back
def test_greedy_text_after_a_picture_is_the_targets_with_every_drafter(seeing, tiny_hybrid_draft, k):
    base = seeing.generate(QUESTION, images=[PICTURE], max_tokens=40)
    drafted = {}
    for draft in ("lookup", "suffix", "mtp", str(tiny_hybrid_draft)):
        out = seeing.generate(QUESTION, images=[PICTURE], draft_model=draft, lookahead=k, max_tokens=40)
        assert out.tokens == base.tokens, f"{draft} (k={k}) parted from the target alone after the picture"
        drafted[draft] = out.stats.drafted
    assert drafted["mtp"] > 0  # the head drafts from the target's hidden states after the picture
    assert drafted[str(tiny_hybrid_draft)] > 0  # the text-only draft reads the placeholder run and drafts


def _next_logits(seeing, images):
    tokens, spans = seeing.prompt_input(GenerationRequest(QUESTION, images=images))
    ctx = Context(seeing.target, RuntimeParams(n_ctx=256, n_threads=1))
    try:
        rows = None
        for _, rows in ctx.feed(tokens, images=spans, last_logits=True):
            pass
        return rows[0].copy()
    finally:
        ctx.close()


def test_the_picture_adds_prompt_tokens_and_the_target_reads_it(seeing):
    plain = seeing.generate(QUESTION, max_tokens=24)
    one = seeing.generate(QUESTION, images=[PICTURE], max_tokens=24)
    assert one.stats.prompt_tokens >= plain.stats.prompt_tokens + 16  # 16 image tokens and the vision markers
    a, b = _next_logits(seeing, [PICTURE]), _next_logits(seeing, [png_bytes(40, 24, seed=9)])
    assert abs(a - b).max() > 1e-3  # another picture, another next-token distribution


def test_a_picture_is_encoded_once_and_its_reading_reused_on_the_next_turn(seeing):
    picture = png_bytes(32, 32, seed=21)
    before = seeing.projector.cache.encoded
    first = [{"role": "user", "content": f"{MEDIA_MARKER}what is this?"}]
    seeing.generate(first, chat=True, images=[picture], max_tokens=8)
    turn = first + [{"role": "assistant", "content": "a chart"}, {"role": "user", "content": "and the colours?"}]
    events = list(seeing.stream(turn, chat=True, images=[ImageInput(picture)], max_tokens=8))
    prefill = [e for e in events if isinstance(e, PrefillEvent)][0]
    assert seeing.projector.cache.encoded == before + 1  # the second turn did not encode it again
    assert prefill.cached > 16  # the picture stayed in the context: only the new turn was read


@pytest.mark.parametrize("size", [(32, 32), (120, 48)])
def test_image_tokens_counts_what_a_picture_adds_to_the_prompt_without_encoding_it(seeing, size):
    picture = ImageInput(png_bytes(*size, seed=31))
    before = seeing.projector.cache.encoded
    [n] = seeing.image_tokens([picture])
    assert seeing.image_tokens([picture]) == [n] and seeing.projector.cache.encoded == before, "counted, not encoded"
    slots = seeing.tokens_for(MEDIA_MARKER + "\n" + QUESTION, media=True)
    tokens, _spans = seeing.prompt_input(GenerationRequest(QUESTION, images=[picture]))
    assert len(tokens) == len(slots) - 1 + n, "the slot becomes the picture's tokens and the text around them"
    assert seeing.image_tokens([picture]) == [n], "the same count once it is encoded"


def test_a_text_only_target_given_a_picture_says_so_in_one_line(tiny_hybrid):
    e = Engine(tiny_hybrid, n_ctx=256, n_threads=1, metrics_log=False, calibration=False)
    try:
        with pytest.raises(PromptError) as err:
            e.generate(QUESTION, images=[PICTURE], max_tokens=4)
        assert str(err.value) == (f"{tiny_hybrid.name} reads text only: load it with its vision projector "
                                  "(--mmproj FILE, or an mmproj-*.gguf beside it) to send images")
        with pytest.raises(PromptError, match="reads text only"):
            e.image_tokens([ImageInput(PICTURE)])
    finally:
        e.close()


def test_pictures_out_of_bounds_or_misplaced_are_one_line(seeing):
    with pytest.raises(ImageError, match=r"^image 1 is a BMP file; send PNG, JPEG or WebP$"):
        seeing.generate(QUESTION, images=[png_bytes(8, 8, fmt="BMP")], max_tokens=4)
    with pytest.raises(PromptError, match=r"^the prompt marks 2 place\(s\) for images but 1 were given$"):
        seeing.generate(f"{MEDIA_MARKER} and {MEDIA_MARKER}", images=[PICTURE], max_tokens=4)
    with pytest.raises(PromptError, match="IMAGE_SLOT"):
        GenerationRequest([1, 2, 3], images=[PICTURE])


def test_an_attention_target_reads_pictures_at_plain_positions(tiny_target, tiny_vision):
    e = Engine(tiny_target, mmproj=tiny_vision[1], n_ctx=512, n_threads=1, metrics_log=False, calibration=False)
    try:
        assert not e.projector.mrope
        base = e.generate(QUESTION, images=[PICTURE], max_tokens=32)
        for draft in ("lookup", "suffix"):
            assert e.generate(QUESTION, images=[PICTURE], draft_model=draft, lookahead=4, max_tokens=32).tokens == base.tokens
    finally:
        e.close()


def test_gemma4_with_its_assistant_after_a_picture_writes_what_the_target_alone_writes(tiny_vision_gemma4):
    target, projector, assistant = tiny_vision_gemma4
    e = Engine(target, mmproj=projector, n_ctx=512, n_threads=1, metrics_log=False, calibration=False)
    try:
        base = e.generate(QUESTION, images=[PICTURE], max_tokens=32)
        assert base.stats.prompt_tokens >= 81  # the family reads 70 image tokens a picture at least
        for draft in (str(assistant), "lookup"):
            out = e.generate(QUESTION, images=[PICTURE], draft_model=draft, lookahead=3, max_tokens=32)
            assert out.tokens == base.tokens, draft
            if draft == str(assistant):
                assert out.stats.drafted > 0  # the assistant drafts from the target's cache after the picture
    finally:
        e.close()


def test_sampled_distribution_after_a_picture_with_mtp_is_the_targets(seeing):
    params = SamplingParams(temperature=1.0, top_k=6)
    req = GenerationRequest("the value of", images=[PICTURE])
    tokens, spans = seeing.prompt_input(req)
    exact = _exact_two_token_distribution(seeing.target, tokens, params, spans, RuntimeParams(n_ctx=256, n_threads=1))
    dec = Decoder(seeing.target, MTPDrafter(seeing.target), runtime=RuntimeParams(n_ctx=256, n_threads=1))
    n, counts, drafted = 1000, {}, 0
    try:
        for seed in range(n):
            run = GenerationRequest(tokens, lookahead=Fixed(2), max_tokens=2,
                                    sampling=SamplingParams(temperature=1.0, top_k=6, seed=seed))
            done = [e for e in dec.run(tokens, run, images=spans) if isinstance(e, DoneEvent)][0]
            counts[tuple(done.tokens)] = counts.get(tuple(done.tokens), 0) + 1
            drafted += done.stats.drafted
    finally:
        dec.close()
    assert drafted > 0
    assert _chi_square(counts, exact, n) > 0.01


def test_the_race_reads_the_picture_on_both_sides_and_finds_a_parting_after_it(seeing):
    from engine.measure.racing import race

    req = GenerationRequest(QUESTION, images=[PICTURE], draft="mtp", lookahead=3, max_tokens=16)
    r = race(seeing, req)
    assert r is not None and r.identical
    assert r.target.stats.prompt_tokens == r.speculative.stats.prompt_tokens >= 16
    tokens, spans = seeing.prompt_input(req)
    ref = r.target.tokens
    other = ref[:3] + [ref[3] + 1] + ref[4:]
    div = seeing.first_divergence(tokens, ref, other, images=spans)  # the margin read after the picture
    assert div is not None and div.index == 3 and div.expected_token == ref[3] and div.margin >= 0


@pytest.mark.parametrize("family", ["hybrid", "attention"])
def test_a_prompt_with_a_picture_is_kept_in_the_prompt_cache_by_its_content(tiny_vision, tiny_target, tmp_path, family):
    """Another draft choice (another decoder, another context) reads a kept prompt with its
    picture from the prompt cache; another picture at the same place finds only the text before it."""
    from engine.decoding.prompt_cache import CacheLimits

    target, projector = tiny_vision if family == "hybrid" else (tiny_target, tiny_vision[1])
    e = Engine(target, mmproj=projector, n_ctx=512, n_threads=1, metrics_log=False, calibration=False,
               prompt_cache=CacheLimits(folder=tmp_path, min_tokens=4))
    try:
        def read(draft, picture):
            events = list(e.stream(QUESTION, images=[picture], draft_model=draft, max_tokens=8))
            prefill = [ev for ev in events if isinstance(ev, PrefillEvent)][0]
            return prefill, [ev for ev in events if isinstance(ev, DoneEvent)][0]

        first, done = read(None, PICTURE)
        assert first.cached == 0
        again, done2 = read("lookup", PICTURE)  # the lookup decoder's context starts empty: the cache serves it
        assert again.cached == again.total + again.cached and again.cached > 16
        assert done2.tokens == done.tokens
        other, _ = read("suffix", png_bytes(32, 32, seed=11))
        tokens, (span,) = e.prompt_input(GenerationRequest(QUESTION, images=[PICTURE]))
        assert other.cached <= span.start  # a picture of other content is not this one
        assert e.prompt_cache.flush()
    finally:
        e.close()
    e = Engine(target, mmproj=projector, n_ctx=512, n_threads=1, metrics_log=False, calibration=False,
               prompt_cache=CacheLimits(folder=tmp_path, min_tokens=4))
    try:  # after a restart, from the file: the picture is named by its content, not by this process
        restarted, done3 = read(None, PICTURE)
        assert restarted.cached > 16 and done3.tokens == done.tokens
    finally:
        e.close()
