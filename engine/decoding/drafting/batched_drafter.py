"""A draft model's work batched across the parallel slots: one draft context with a sequence per
slot (`SharedContext`, as the target's), so that the slots drafting with the model this step read
their catch-up tokens together and then their drafts position by position together, one
`llama_decode` per position carrying a row per slot still drafting (llama-server's way), where a
context per slot took a decode per slot and position. A slot's read of a new prompt (`reading`)
goes in the same passes, a chunk a pass in the room the drafting slots leave, so slots starting
together read their prompts in shared decodes and a long prompt never holds the others' drafting
for its whole length.

`DraftBatch` owns that context and runs a step's decodes (`run`); each slot drafts through a
`BatchedModelDrafter` on its own sequence: the model drafter's own drafting (greedy or sampled,
its gates, grammar and logits processors, its k), made in steps (`proposing`) that hand each
decode to the batch. Its roll-back is the sequence's own (prefix reuse at the next proposal).
A draft model with a recurrent state (a hybrid) keeps a context per slot, drafted slot by slot:
llama.cpp's recurrent cache moves a sequence's state in a batch of several without its snapshots.
So does a bridged draft (another vocabulary, its text tokenised per step). An MTP head's slots
draft together the same way, in a head context of their own (mtp_drafter.py, `HeadBatch`).

A decode carrying several sequences is not bit-identical to each decoded alone (ggml's kernels
sum in another order for another batch shape: a tiny model's rows move by ~1e-6), so a draft at
a near-tie of its two best logits may differ from the lone one; the target verifies every token,
so each answer is its answer alone.
"""

from __future__ import annotations

from typing import Callable, Hashable, Mapping, Sequence

import numpy as np

from ...llamacpp.llama import Model
from ...llamacpp.runtime import RuntimeParams
from ...llamacpp.sequences import Part, SequenceView, SharedContext
from ..sampling.sampler import Sampler
from .draft_context import NO_RULES, DraftContext
from .drafter_api import DraftRows, Drafter, PassDecode, Proposal, Steps, batched_passes, one_pass, steps_alone
from .drafters import ModelDrafter

__all__ = ["BatchedModelDrafter", "DraftBatch", "plain_model_draft"]


class DraftBatch:
    """One draft model's context for `n_seq` slots, a sequence each (`per_seq` holds what one
    slot's own draft context held: its size, batch and threads)."""

    def __init__(self, model: Model, per_seq: RuntimeParams, n_seq: int):
        # A pass carries one row per slot at least; a slot's share is its own context's size.
        rt = RuntimeParams(n_ctx=per_seq.n_ctx * n_seq, n_batch=max(per_seq.n_batch, n_seq),
                           n_threads=per_seq.n_threads)
        self.shared = SharedContext(model, rt, n_seq)
        self.model = model

    @classmethod
    def like(cls, drafter: Drafter | None, n_seq: int) -> "DraftBatch | None":
        """A batch for `n_seq` slots drafting as `drafter` does with its model (its own context's
        size, batch and threads), where it is a plain attention model draft; else None."""
        mine = plain_model_draft(drafter)
        if mine is None:
            return None
        own = mine.ctx
        return cls(mine.model, RuntimeParams(n_ctx=own.n_ctx, n_batch=own.n_batch, n_threads=own.n_threads), n_seq)

    def adopt(self, drafter: Drafter | None, seq: int) -> Drafter | None:
        """`drafter` (a slot's, bare or beside free drafters) drafting on sequence `seq` of this
        batch, its own context closed; as it is where it holds no plain draft of this model."""
        mine = plain_model_draft(drafter)
        if mine is None or mine.model is not self.model:
            return drafter
        batched = BatchedModelDrafter(self, seq, p_min=mine.p_min, target_vocab=mine.target_vocab)
        mine.close()
        if drafter is mine:
            return batched
        drafter.model_drafter = batched  # type: ignore[union-attr]
        return drafter

    def run(self, wants: Mapping[Hashable, DraftRows]) -> tuple[dict[Hashable, np.ndarray | None],
                                                                dict[Hashable, float]]:
        """Decode what each slot asks for (its tokens on its sequence) in as few passes as the batch
        allows; per slot, its last row and its share of the passes' seconds."""
        return batched_passes(wants, self.shared.n_batch, self._decoder(wants))

    def step(self, wants: Mapping[Hashable, DraftRows],
             left: dict[Hashable, list[int]]) -> tuple[dict[Hashable, np.ndarray | None], dict[Hashable, float]]:
        """One pass over what the slots ask for (`one_pass`: `left` carries a long read on)."""
        return one_pass(wants, left, self.shared.n_batch, self._decoder(wants))

    def _decoder(self, wants: Mapping[Hashable, DraftRows]) -> PassDecode:
        def decode(pieces: list[tuple[Hashable, list[int], bool]]) -> list[np.ndarray | None]:
            last = [ends and not wants[key].reads for key, _, ends in pieces]
            out = self.shared.decode([Part(wants[key].ctx.seq, take, "last" if lst else "none")
                                      for (key, take, _), lst in zip(pieces, last)])
            return [got[0] if lst else None for lst, got in zip(last, out)]
        return decode

    def close(self) -> None:
        self.shared.close()


class BatchedModelDrafter(ModelDrafter):
    """A slot's model draft on its sequence of a `DraftBatch`: `proposing` yields each decode
    (its catch-up, then one token a position) for the slots' scheduler to batch; `propose`, called
    alone, decodes them itself."""

    def __init__(self, batch: DraftBatch, seq: int, *, p_min: float = 0.0, target_vocab: int | None = None):
        self.model = batch.model
        self.batch = batch
        self.ctx: SequenceView = batch.shared.view(seq)  # type: ignore[assignment]
        self.p_min = p_min
        self.target_vocab = target_vocab or batch.model.n_vocab

    def propose(self, context: Sequence[int], k: int, sampler: Sampler, rules: DraftContext = NO_RULES) -> Proposal:
        return steps_alone(self.proposing(context, k, sampler, rules))

    def proposing(self, context: Sequence[int], k: int, sampler: Sampler,
                  rules: DraftContext = NO_RULES) -> Steps[Proposal]:
        out = Proposal()
        ctx = self.ctx
        if k <= 0 or not context:
            return out
        keep = ctx.reuse_prefix(context)  # drops the drafts the target rejected last step
        k = min(k, ctx.n_ctx - len(context))
        if k <= 0:
            return out
        row = yield DraftRows(ctx, list(context[keep:]), k)
        drafting = self._drafting_under(rules, row, context, k, sampler, out)
        try:
            token = next(drafting)
            while True:
                token = drafting.send((yield DraftRows(ctx, [token], k - len(out.tokens))))
        except StopIteration:
            pass
        finally:
            drafting.close()  # its grammar clone too, when the slot's plan is dropped midway
        return out

    def reading(self, context: Sequence[int], limit: int | None = None,
                cancelled: Callable[[], bool] = lambda: False) -> Steps[tuple[int, float | None]]:
        """`read` (the next `limit` tokens of the context, never its last) as one read the batch
        makes with the other slots' decodes, a chunk a pass."""
        ctx = self.ctx
        keep = ctx.reuse_prefix(context)
        end = len(context) - 1 if limit is None else min(len(context) - 1, keep + max(0, limit))
        seconds = None
        if end > keep and not cancelled():
            seconds = yield DraftRows(ctx, list(context[keep:end]), 0, reads=True)
        return max(0, len(context) - 1 - ctx.n_past), seconds

    def close(self) -> None:
        """Nothing of its own: the batch's context is closed by whoever made the batch."""


def plain_model_draft(drafter: Drafter | None) -> ModelDrafter | None:
    """The plain model draft `drafter` is or holds beside free drafters, on a model without a
    recurrent state; None for any other (none, free drafters, an MTP head, a bridge, a hybrid)."""
    inner = getattr(drafter, "model_drafter", drafter)
    if type(inner) is not ModelDrafter or inner.model.recurrent_state:
        return None
    return inner
