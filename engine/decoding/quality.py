"""Did speculation change the output? Where, and was it a near-tie (numeric noise)?

On tiny F32 models speculative greedy output is identical to target-alone output. On
quantized models llama.cpp's batched and single-token matrix kernels round differently
(measured here: logits differ by up to ~0.5 between a 1-token and a 4-token batch with
the AVX512 repacked Q4_K kernels), so greedy paths can part where the target's top two
logits are that close. A divergence at a *larger* margin would be a bug.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..llamacpp.llama import Model
from ..llamacpp.context import Context
from ..llamacpp.plain_reader import PlainReader
from ..llamacpp.runtime import RuntimeParams

NOISE_MARGIN = 0.6  # logit gap below which batched/single decodes may disagree (measured)


@dataclass
class Divergence:
    index: int  # first differing generated token
    margin: float  # target's top-1 minus top-2 logit there (single-token decode)
    within_noise: bool
    expected_token: int
    got_token: int

    def describe(self, model: Model | None = None) -> str:
        def t(x: int) -> str:
            return repr(model.piece(x).decode("utf-8", "replace")) if model else str(x)

        verdict = "a near-tie (numeric noise)" if self.within_noise else "NOT a near-tie: a bug"
        return (
            f"outputs part at token {self.index}: target alone wrote {t(self.expected_token)}, speculative "
            f"{t(self.got_token)}; the target's top-two logit margin there is {self.margin:.3f}, {verdict}"
        )


def first_divergence(
    model: Model,
    prompt: Sequence[int],
    reference: Sequence[int],
    other: Sequence[int],
    *,
    n_ctx: int | None = None,
    images: Sequence[Any] = (),
    ends: bool = False,
    reader: PlainReader | None = None,
    stepwise: bool = False,
) -> Divergence | None:
    """None when `other` equals `reference` (or one is a prefix of the other). `images`: the
    pictures in `prompt` (ImageSpans), read where they stand. `ends`: the two ran to the same
    limit, so a shorter one stopped at its end of generation: one that is the other's start
    parts there, the shorter side's token its model's end-of-generation token. `reader`: the
    prompt is read as the engine's runs read it (on the plain twin where that pays: the margin
    is the one the runs had, the twin's KV rounding differently from the repacked weights').
    `stepwise`: the reference's tokens decoded one at a time, as target alone wrote them (a pass
    a token: slower), not read with the prompt."""
    n = min(len(reference), len(other))
    i = next((j for j in range(n) if reference[j] != other[j]), None)
    if i is None and ends and len(reference) != len(other):
        i = n
        reference = list(reference[:n]) + [model.eos] if len(reference) == n else reference
        other = list(other[:n]) + [model.eos] if len(other) == n else other
    if i is None:
        return None
    seq = list(prompt) + list(reference[:i])
    read = len(prompt) - 1 if stepwise else len(seq) - 1  # the rest one token a pass
    ctx = Context(model, RuntimeParams(n_ctx=n_ctx or max(256, len(seq) + 8)))
    try:
        how = reader.plan(ctx, read, images) if reader is not None else None
        for _ in reader.feed(ctx, seq[:read], how) if how else ctx.feed(seq[:read], images=images):
            pass
        for tok in seq[read:-1]:
            ctx.decode([tok], logits="none")
        row = ctx.decode(seq[-1:], logits="last")[0]
        top2 = np.sort(row)[-2:]
        margin = float(top2[1] - top2[0])
    finally:
        ctx.close()
    return Divergence(i, margin, margin < NOISE_MARGIN, int(reference[i]), int(other[i]))
