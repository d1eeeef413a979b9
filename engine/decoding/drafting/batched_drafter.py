"""A draft model's work batched across the parallel slots: one draft context with a sequence per
slot (`SharedContext`, as the target's), so that the slots drafting with the model this step read
their catch-up tokens together and then their drafts position by position together, one
`llama_decode` per position carrying a row per slot still drafting (llama-server's way), where a
context per slot took a decode per slot and position.

`DraftBatch` owns that context and runs a step's decodes (`run`); each slot drafts through a
`BatchedModelDrafter` on its own sequence: the model drafter's own drafting (greedy or sampled,
its gates, grammar and logits processors, its k), made in steps (`proposing`) that hand each
decode to the batch. Its roll-back is the sequence's own (prefix reuse at the next proposal).
A draft model with a recurrent state (a hybrid) keeps a context per slot, drafted slot by slot:
llama.cpp's recurrent cache moves a sequence's state in a batch of several without its snapshots.
So do a bridged draft (another vocabulary, its text tokenised per step) and an MTP head (its own
context per slot, fed that slot's hidden states).
"""

from __future__ import annotations

import time
from typing import Hashable, Sequence

import numpy as np

from ...llamacpp.llama import Model
from ...llamacpp.runtime import RuntimeParams
from ...llamacpp.sequences import Part, SequenceView, SharedContext
from ..sampling.sampler import Sampler
from .draft_context import NO_RULES, DraftContext
from .drafter_api import DraftRows, Drafter, Proposal, Steps, steps_alone
from .drafters import ModelDrafter

__all__ = ["BatchedModelDrafter", "DraftBatch", "batch_model_drafts"]


class DraftBatch:
    """One draft model's context for `n_seq` slots, a sequence each (`per_seq` holds what one
    slot's own draft context held: its size, batch and threads)."""

    def __init__(self, model: Model, per_seq: RuntimeParams, n_seq: int):
        # A pass carries one row per slot at least; a slot's share is its own context's size.
        rt = RuntimeParams(n_ctx=per_seq.n_ctx * n_seq, n_batch=max(per_seq.n_batch, n_seq),
                           n_threads=per_seq.n_threads)
        self.shared = SharedContext(model, rt, n_seq)
        self.model = model
        self.passes = 0  # llama_decode calls of drafting (what the slots' tests count)

    def drafter(self, seq: int, like: ModelDrafter) -> "BatchedModelDrafter":
        """Slot `seq`'s drafter, drafting as `like` does (its p_min and the target's vocabulary)."""
        return BatchedModelDrafter(self, seq, p_min=like.p_min, target_vocab=like.target_vocab)

    def run(self, wants: dict[Hashable, DraftRows]) -> tuple[dict[Hashable, np.ndarray], dict[Hashable, float]]:
        """Decode what each slot asks for (its tokens on its sequence) in as few passes as the batch
        allows, the shortest first so that every slot's next draft position shares the first pass;
        per slot, its last row and its share of the passes' seconds (by the rows it had in each)."""
        left = {key: list(w.tokens) for key, w in sorted(wants.items(), key=lambda kv: len(kv[1].tokens))}
        rows: dict[Hashable, np.ndarray] = {}
        spent = dict.fromkeys(wants, 0.0)
        while left:
            budget, parts, owners = self.shared.n_batch, [], []
            for key, tokens in left.items():
                if budget == 0:
                    break
                take = tokens[:budget]
                parts.append(Part(wants[key].ctx.seq, take, "last" if len(take) == len(tokens) else "none"))
                owners.append(key)
                budget -= len(take)
            t = time.perf_counter()
            out = self.shared.decode(parts)
            seconds, n = time.perf_counter() - t, sum(len(p.tokens) for p in parts)
            self.passes += 1
            for key, part, got in zip(owners, parts, out):
                spent[key] += seconds * len(part.tokens) / n
                del left[key][:len(part.tokens)]
                if not left[key]:
                    rows[key] = got[0]
                    del left[key]
        return rows, spent

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
        return out

    def close(self) -> None:
        """Nothing of its own: the batch's context is closed by whoever made the batch."""


def batch_model_drafts(made: Sequence[Drafter | None]) -> tuple[DraftBatch | None, list[Drafter | None]]:
    """One draft's per-slot drafters (`made`) with their plain model drafts (bare or beside free
    drafters) on one `DraftBatch`, their own contexts closed: (the batch, the slots' drafters).
    No batch where they are not one attention draft model's (none, free drafters, an MTP head, a
    bridge, a hybrid draft): they stay as made, each drafting on its own."""
    inner = [getattr(d, "model_drafter", d) for d in made]
    lone = [d for d in inner if type(d) is ModelDrafter]
    if not lone or len(lone) < len(made):
        return None, list(made)
    model = lone[0].model
    if model is None or model.recurrent_state or any(d.model is not model for d in lone):
        return None, list(made)
    own = lone[0].ctx
    batch = DraftBatch(model, RuntimeParams(n_ctx=own.n_ctx, n_batch=own.n_batch, n_threads=own.n_threads), len(made))
    out: list[Drafter | None] = []
    for seq, (d, mine) in enumerate(zip(made, lone)):
        batched = batch.drafter(seq, mine)
        mine.close()
        if d is mine:
            out.append(batched)
        else:
            d.model_drafter = batched  # type: ignore[union-attr]
            out.append(d)
    return batch, out
