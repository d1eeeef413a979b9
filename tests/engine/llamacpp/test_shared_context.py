"""Several sequences in one context (the parallel slots' seam): each sequence's logits are what
it gets alone, however its rows are mixed with others', rolled back or freed around it."""

from __future__ import annotations

import numpy as np
import pytest

from engine.errors import DecodeError, TandemError
from engine.llamacpp.context import Context
from engine.llamacpp.llama import Model
from engine.llamacpp.runtime import RuntimeParams
from engine.llamacpp.sequences import Part, SharedContext


@pytest.fixture(scope="module")
def target(tiny_target):
    m = Model(tiny_target)
    yield m
    m.close()


def _prompts(model: Model) -> list[list[int]]:
    rng = np.random.default_rng(0)
    return [[int(t) for t in rng.integers(3, model.n_vocab, size=n)] for n in (7, 20, 3, 33)]


def _alone(model: Model, prompts: list[list[int]]) -> list[np.ndarray]:
    ctx = Context(model, RuntimeParams(n_ctx=256))
    out = []
    for p in prompts:
        ctx.clear()
        out.append(ctx.decode(p, logits="all").copy())
    ctx.close()
    return out


def test_rows_of_several_sequences_in_one_decode_equal_each_alone(target):
    prompts = _prompts(target)
    ref = _alone(target, prompts)
    shared = SharedContext(target, RuntimeParams(n_ctx=1024), 4)
    first = shared.decode([Part(i, p[:5], "all") for i, p in enumerate(prompts)])
    for i, rows in enumerate(first):
        assert np.array_equal(rows, ref[i][: len(prompts[i][:5])])
    rest = [Part(i, p[5:], "last") for i, p in enumerate(prompts) if len(p) > 5]  # no 3: it is read
    for part, rows in zip(rest, shared.decode(rest)):
        assert rows.shape == (1, target.n_vocab)
        # a batch's shape moves the last bits (a lone context's "last" row differs from its "all"
        # row by ~3e-6 too): close, not equal; the decoders' tests compare what is emitted
        assert np.allclose(rows[0], ref[part.seq][-1], rtol=0, atol=1e-4)
    assert [len(t) for t in shared.tokens] == [len(p) for p in prompts]
    shared.close()


def test_a_sequence_rolled_back_or_freed_leaves_the_others_exact(target):
    prompts = _prompts(target)
    ref = _alone(target, prompts)
    shared = SharedContext(target, RuntimeParams(n_ctx=1024), 4)
    shared.decode([Part(i, p, "none") for i, p in enumerate(prompts)])
    shared.clear(0)  # a slot freed: its cells go back
    shared.truncate(1, 10)  # another's rejected drafts taken back
    assert shared.tokens[0] == [] and shared.tokens[1] == prompts[1][:10]
    again = shared.decode([Part(1, prompts[1][10:], "all"), Part(0, prompts[0], "all")])
    assert np.array_equal(again[0], ref[1][10:])
    assert np.array_equal(again[1], ref[0])
    view = shared.view(3)
    assert view.reuse_prefix(prompts[3][:20] + [5, 6]) == 20 and view.n_past == 20
    shared.close()


def test_each_sequence_holds_its_share_of_the_context_and_the_batch_is_bounded(target):
    shared = SharedContext(target, RuntimeParams(n_ctx=512, n_batch=64), 2)
    assert shared.n_ctx_seq == shared.n_ctx // 2 >= 256
    with pytest.raises(DecodeError, match="exceeds n_batch"):
        shared.decode([Part(0, [5] * 40), Part(1, [5] * 40)])
    for _ in range(shared.n_ctx_seq // 64):
        shared.decode([Part(0, [5] * 64)])
    with pytest.raises(DecodeError, match="context full: sequence 0"):
        shared.decode([Part(0, [5])])
    assert shared.decode([Part(1, [5, 6], "last")])[0].shape == (1, target.n_vocab)
    shared.close()


@pytest.mark.parametrize("n", [0, 65, "2", True])
def test_a_bad_number_of_sequences_is_one_line(target, n):
    with pytest.raises(TandemError, match="integer from 1 to 64"):
        SharedContext(target, RuntimeParams(n_ctx=256), n)


def _lone_next(model: Model, tokens: list[int], nxt: int) -> np.ndarray:
    ctx = Context(model, RuntimeParams(n_ctx=256))
    try:
        ctx.decode(tokens, logits="none")
        return ctx.decode([nxt], logits="last")[0].copy()
    finally:
        ctx.close()


@pytest.mark.parametrize("back", [1, 4, 12])  # 12: past the 8 snapshots, through the checkpoint
def test_each_hybrid_sequence_takes_its_drafts_back_alone(tiny_hybrid, back):
    """A hybrid target's sequences are rolled back each by its own snapshots or checkpoint. The
    cells are laid out so that llama.cpp's ubatch of sequences 1 and 2 moves sequence 0's state
    to another cell (read in the order 2, 0, 1, each takes the next free cell): sequence 0's
    guarded verify rows, decoded in that same pass, would lose their snapshots (checked: without
    the pass of their own, back 1 and 4 read the next row wrong), so they go in a decode of
    their own after it."""
    m = Model(tiny_hybrid)
    shared = SharedContext(m, RuntimeParams(n_ctx=1024, n_batch=64), 3, rollback=8)
    try:
        assert shared.recurrent and shared.rollback_depth == 8
        prompts = _prompts(m)[:3]
        for seq in (2, 0, 1):
            shared.decode([Part(seq, prompts[seq], "none")])
        drafts = [int(t) for t in np.random.default_rng(1).integers(3, m.n_vocab, size=back + 2)]
        shared.guard(0, len(drafts), back)
        shared.decode([Part(0, drafts, "all"), Part(1, [7], "last"), Part(2, [9], "last")])
        shared.truncate(0, shared.view(0).n_past - back)
        assert shared.tokens[0] == prompts[0] + drafts[:2]
        rows = shared.decode([Part(0, [11], "last"), Part(1, [12], "last"), Part(2, [13], "last")])
        want = [_lone_next(m, prompts[0] + drafts[:2], 11), _lone_next(m, prompts[1] + [7], 12),
                _lone_next(m, prompts[2] + [9], 13)]
        for seq in range(3):
            assert np.abs(rows[seq][0] - want[seq]).max() < 1e-3, f"sequence {seq}, {back} back"
        shared.clear(1)  # freed: its state starts again from nothing, the others keep theirs
        again = shared.decode([Part(1, prompts[1], "last")])[0][0]
        assert np.abs(again - _lone_next(m, prompts[1][:-1], prompts[1][-1])).max() < 1e-3
    finally:
        shared.close()
        m.close()


def test_a_picture_read_in_one_sequence_is_read_as_a_lone_context_reads_it(tiny_vision_llama):
    """A picture goes into its sequence alone (a decode of its own, on its sequence id), beside
    another sequence's text: the rows after it are a lone context's; a cut inside it drops it
    whole, and reusing the sequence with another picture at the same place keeps the text before."""
    from engine.documents.images import IMAGE_SLOT, ImageInput, decode_image
    from engine.llamacpp.vision import Projector
    from image_files import png_bytes

    model = Model(tiny_vision_llama[0])
    proj = Projector(model, tiny_vision_llama[1], n_threads=1)
    try:
        text = model.tokenize("the value of") + [IMAGE_SLOT] + model.tokenize(" is the data", add_special=False)
        tokens, [span] = proj.expand(text, [decode_image(ImageInput(png_bytes(32, 32, seed=3)))])
        lone = Context(model, RuntimeParams(n_ctx=256))
        ref = [rows.copy() for _, rows in lone.feed(tokens, images=[span], last_logits=True)][-1]
        lone.close()
        shared = SharedContext(model, RuntimeParams(n_ctx=512), 2)
        other = _prompts(model)[1]
        shared.decode([Part(0, other[:10], "none"), Part(1, tokens[:span.start], "none")])
        shared.read_image(1, span)
        assert shared.images[1] == [span] and shared.tokens[1][span.start:span.end] == [proj.placeholder] * span.n_tokens
        rows = shared.decode([Part(1, tokens[span.end:], "last"), Part(0, other[10:], "last")])
        assert np.allclose(rows[0][0], ref[0], rtol=0, atol=1e-4)
        view = shared.view(1)
        _, [again] = proj.expand(text, [decode_image(ImageInput(png_bytes(32, 32, seed=11)))])
        assert view.reuse_prefix(tokens, [again]) == span.start and view.images == []  # another picture there
        shared.read_image(1, span)
        shared.truncate(1, span.start + 3)  # inside the picture: it goes whole
        assert view.n_past == span.start and view.images == []
        shared.close()
    finally:
        proj.close()
        model.close()
