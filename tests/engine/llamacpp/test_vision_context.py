"""A Context holding a picture: positions past it shifted (M-RoPE), roll-back never cutting it
in two, prefix reuse keeping it only when it is the same picture at the same place, and a
hybrid's rewind reading it again from its kept embeddings."""

from __future__ import annotations

import numpy as np
import pytest

from engine.documents.images import IMAGE_SLOT, ImageInput, decode_image
from engine.llamacpp.context import Context
from engine.llamacpp.llama import Model
from engine.llamacpp.runtime import RuntimeParams
from engine.llamacpp.vision import Projector
from image_files import png_bytes


@pytest.fixture(scope="module")
def pair(tiny_vision):
    model = Model(tiny_vision[0])
    projector = Projector(model, tiny_vision[1], n_threads=1)
    yield model, projector
    projector.close()
    model.close()


def _prompt(model, projector, seed):
    tokens = model.tokenize("look:", add_special=True) + [IMAGE_SLOT] + model.tokenize(" what is it", add_special=False)
    return projector.expand(tokens, [decode_image(ImageInput(png_bytes(32, 32, seed=seed)))])


def _read(ctx, tokens, spans):
    for _ in ctx.feed(tokens[:-1], images=spans):
        pass
    return ctx.decode([tokens[-1]])[0].copy()


def test_positions_past_a_picture_are_shifted_and_rollback_keeps_it_whole(pair):
    model, projector = pair
    tokens, (span,) = _prompt(model, projector, 1)
    ctx = Context(model, RuntimeParams(n_ctx=256, n_threads=1), rollback=8)
    try:
        _read(ctx, tokens, [span])
        assert span.n_tokens == 16 and span.shift == 12  # a 4x4 grid: 16 cells, 4 positions
        assert ctx.position(span.start + 5) == ctx.position(span.start)  # every cell at the picture's position
        assert ctx.position(ctx.n_past) == ctx.n_past - 12
        ctx.truncate(span.start + 7)  # inside the picture: it goes whole
        assert ctx.n_past == span.start and ctx.images == []
        assert ctx.position(ctx.n_past) == ctx.n_past
    finally:
        ctx.close()


def test_prefix_reuse_keeps_a_picture_only_if_it_is_the_same(pair):
    model, projector = pair
    tokens, spans = _prompt(model, projector, 1)
    other, other_spans = _prompt(model, projector, 2)
    assert tokens == other  # the same placeholders: only the spans tell the pictures apart
    ctx = Context(model, RuntimeParams(n_ctx=256, n_threads=1))
    try:
        first = _read(ctx, tokens, spans)
        assert ctx.reuse_prefix(tokens, spans) == len(tokens) - 1
        assert ctx.reuse_prefix(other, other_spans) == other_spans[0].start
        for _ in ctx.feed(other[ctx.n_past:-1], images=other_spans):
            pass
        fresh = Context(model, RuntimeParams(n_ctx=256, n_threads=1))
        try:
            expected = _read(fresh, other, other_spans)
        finally:
            fresh.close()
        assert np.allclose(ctx.decode([other[-1]])[0], expected, atol=1e-4)  # the other picture was read
        assert not np.allclose(first, expected, atol=1e-4)
    finally:
        ctx.close()


def test_a_hybrid_rewind_reads_the_picture_again(pair):
    model, projector = pair
    tokens, spans = _prompt(model, projector, 3)
    ctx = Context(model, RuntimeParams(n_ctx=256, n_threads=1), rollback=0)  # no snapshots: a rewind re-reads
    try:
        _read(ctx, tokens, spans)
        out = [int(np.argmax(ctx.decode([t])[0])) for t in (5, 6, 7)]
        ctx.truncate(len(tokens) + 1)
        assert ctx.images == spans
        assert int(np.argmax(ctx.decode([6])[0])) == out[1]
    finally:
        ctx.close()


def test_the_image_cache_is_bounded_by_count_and_bytes():
    from engine.llamacpp.vision import EncodedImage, ImageCache

    def image(key: str, rows: int) -> EncodedImage:
        return EncodedImage(key, [], [], np.zeros((rows, 64), np.float32), rows, None, None)  # type: ignore[arg-type]

    cache = ImageCache(size=3, max_bytes=64 * 4 * 100)
    for k in "abcd":
        cache.put(image(k, 10))
    assert [k for k in "abcd" if cache.get(k)] == ["b", "c", "d"]  # the oldest went first
    cache.put(image("big", 90))
    assert cache.get("big") is not None and cache.get("b") is None  # bytes: 10 + 90 rows fit, 120 do not
    cache.put(image("huge", 500))
    assert cache.get("huge") is not None and cache.get("big") is None  # the newest stays, whatever its size


def test_a_non_causal_projectors_picture_is_read_in_one_batch(tiny_vision_gemma4, tiny_vision):
    """Gemma's projector (but E2B/E4B) is read with non-causal attention: split over batches, a
    cell could not see the later ones. Its pictures are scaled to the batch; one that cannot be
    (below the family's smallest picture) is refused in one line. A causal projector's are not
    scaled."""
    from engine import Engine
    from engine.documents.images import ImageInput, decode_image
    from engine.errors import PromptError
    from image_files import png_bytes

    target, projector, _ = tiny_vision_gemma4
    picture = ImageInput(png_bytes(256, 256, seed=1))

    def engine(path, proj, n_batch):
        return Engine(path, n_ctx=4096, n_batch=n_batch, mmproj=proj, metrics_log=False, calibration=False)

    big, small, tiny = engine(target, projector, 2048), engine(target, projector, 128), engine(target, projector, 64)
    try:
        assert small.projector.non_causal
        cells = small.projector.encode(decode_image(picture)).embd.shape[0]
        assert cells <= 128 < big.projector.encode(decode_image(picture)).embd.shape[0]
        assert small.generate("Describe:", images=[picture], max_tokens=4).stats.prompt_tokens > cells
        with pytest.raises(PromptError, match="reads in one batch, but the batch holds 64: raise n_batch"):
            tiny.generate("Describe:", images=[picture], max_tokens=4)
    finally:
        for e in (big, small, tiny):
            e.close()
    qwen, qwen_projector = tiny_vision
    wide, narrow = engine(qwen, qwen_projector, 2048), engine(qwen, qwen_projector, 64)
    try:
        assert not narrow.projector.non_causal
        assert narrow.image_tokens([picture]) == wide.image_tokens([picture])  # causal: read in any batches
    finally:
        wide.close()
        narrow.close()
