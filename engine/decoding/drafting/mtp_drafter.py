"""Drafting with the target's own multi-token-prediction head ("mtp"), or with a separate MTP
drafter file that reads the target's cache (Gemma 4's assistant).

Qwen3.5/3.6 and other 2026 families ship nextn layers trained to guess the next tokens
from the target's hidden state: a draft with no second file, no vocabulary to match, and
a forward pass a fraction of the target's. The head runs as llama.cpp's MTP context
(engine/llamacpp/mtp.py); drafting itself (greedy or sampled, gates, grammar, logits
processors) is the model drafter's, so exactness holds the same way: the target verifies
every token.

In the parallel slots the heads of all slots draft together (`HeadBatch`): one head context
with a sequence per slot (`MtpHeads`), each slot's sequence fed its own sequence's hidden
states from the shared target passes; a slot's proposal is made in steps (`proposing`) that
hand each decode to the slots' planner, which decodes the drafting slots' catch-ups together
and then one pass per draft position with a row per slot still drafting (llama-server drafts
its slots' MTP heads the same way). Each slot keeps its own k, sampling, grammar and roll-back
(its sequence cut back to the context after each proposal).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable, Mapping, Sequence

import numpy as np

from ...llamacpp.context import Context
from ...llamacpp.llama import Model
from ...llamacpp.mtp import HiddenStates, MtpContext, MtpHeads, assistant_refusal, mtp_refusal
from ...errors import UnsupportedModelError
from ..sampling.sampler import Sampler
from .draft_context import NO_RULES, DraftContext
from .drafter_api import Drafter, DraftRows, PassDecode, Steps, batched_passes, one_pass, steps_alone
from .drafters import ModelDrafter, Proposal

__all__ = ["HeadBatch", "HeadRows", "MTPDrafter", "mtp_draft"]


@dataclass(frozen=True)
class HeadRows(DraftRows):
    """A decode an MTP head proposing in steps asks for (`ctx`: its `MtpContext`): context
    tokens paired with the target's hidden states, or a `drafted` one with the head's own."""

    drafted: bool = False

    def alone(self) -> np.ndarray:
        return run_heads(self.ctx.heads, {0: self})[0][0]


Rows = tuple[dict[Hashable, "np.ndarray | None"], dict[Hashable, float]]  # per want: its last row, its seconds


def run_heads(heads: MtpHeads, wants: "Mapping[Hashable, HeadRows]") -> Rows:
    """Each want's rows decoded on its sequence of `heads`, several sequences a pass."""
    return batched_passes(wants, heads.n_batch, _head_decoder(heads, wants))


def _head_decoder(heads: MtpHeads, wants: "Mapping[Hashable, HeadRows]") -> PassDecode:
    def decode(pieces: list[tuple[Hashable, list[int], bool]]) -> list[np.ndarray | None]:
        return heads.decode([wants[key].ctx.part(take, drafted=wants[key].drafted, logits=ends)
                             for key, take, ends in pieces])
    return decode


class MTPDrafter(ModelDrafter):
    """Drafts from the target's MTP head. Bound to the decoder's target context (`bind`):
    the head reads that context's hidden states, recorded after every target decode."""

    kind = "mtp"
    calibration_name = "mtp"
    cost_class = "model"

    def __init__(self, target: Model, head: Model | None = None, *, p_min: float = 0.0):
        """`head`: a separate drafter file (Gemma 4's assistant) instead of the target's own layers."""
        refusal = assistant_refusal(target, head) if head is not None else mtp_refusal(target)
        if refusal:
            raise UnsupportedModelError(refusal)
        # No second model for the target's own head: its costs and confidences are filed under
        # "mtp"; an assistant file is a draft model like any other for them.
        self.model = head
        self.p_min = p_min
        self.target_vocab = target.n_vocab
        self._hidden: HiddenStates | None = None
        self._head: MtpContext | None = None
        self._heads: MtpHeads | None = None  # the slots' head context it drafts in (None: one of its own)

    def relative_cost(self, target: Model) -> float:
        """One nextn layer plus the output head, against the whole target (or the assistant's
        size): a prior Auto replaces with what it measures."""
        return super().relative_cost(target) if self.model is not None else 0.1

    @property
    def contexts(self) -> list[Context]:
        return []  # the head's decodes are single tokens or one short batch: nothing to abort

    def share(self, heads: MtpHeads) -> None:
        """Draft on the target's sequence of `heads` (the slots' one head context), once bound."""
        self._heads = heads

    def bind(self, target: Context) -> None:
        self._hidden = HiddenStates(target)
        self._head = MtpContext(target, self._hidden, self.model, heads=self._heads)

    def unread(self, context: Sequence[int]) -> int:
        """Nothing to read ahead: the head reads the prompt's hidden states (one layer's work)
        at its first proposal, timed as drafting."""
        return 0

    def read(self, context: Sequence[int], limit: int | None = None,
             cancelled: "Callable[[], bool]" = lambda: False) -> int:
        return 0

    def propose(self, context: Sequence[int], k: int, sampler: Sampler, rules: DraftContext = NO_RULES) -> Proposal:
        return steps_alone(self.proposing(context, k, sampler, rules))

    def proposing(self, context: Sequence[int], k: int, sampler: Sampler,
                  rules: DraftContext = NO_RULES) -> Steps[Proposal]:
        """`propose` in steps: the context's rows not held yet, then one drafted token a decode."""
        out = Proposal()
        head = self._head
        if k <= 0 or not context or head is None:
            return out
        try:
            start = head.begin(context)  # positions up to the last token, then its prediction
            row = yield HeadRows(head, list(context[start:]), k)
            drafting = self._drafting_under(rules, row, context, k, sampler, out)
            try:
                token = next(drafting)
                while True:
                    token = drafting.send((yield HeadRows(head, [token], k - len(out.tokens), drafted=True)))
            except StopIteration:
                pass
            finally:
                drafting.close()  # its grammar clone too, when the slot's plan is dropped midway
        finally:  # drafted positions paired the head's own hidden states: the target's replace them
            head.truncate(len(context))
        return out

    def close(self) -> None:
        if self._head is not None:
            self._head.close()
            self._head = None
        if self._hidden is not None:
            self._hidden.close()
            self._hidden = None


class HeadBatch:
    """The MTP heads of the parallel slots drafting with one head (the target's own, or an
    assistant file): one head context with a sequence per slot, `run` decoding the drafting
    slots' rows together (the slots' planner calls it as it does `DraftBatch.run`)."""

    def __init__(self, target: Context, head: Model | None, n_seq: int):
        """`target`: a sequence of the slots' shared target context (the head links to it)."""
        self.heads = MtpHeads(target, head, n_seq)

    @classmethod
    def like(cls, drafter: Drafter | None, target: Context, n_seq: int) -> "HeadBatch | None":
        """A head context for `n_seq` slots drafting as `drafter` does, where it drafts with an
        MTP head (bare or beside free drafters); else None."""
        mine = mtp_draft(drafter)
        return None if mine is None else cls(target, mine.model, n_seq)

    def adopt(self, drafter: Drafter | None) -> None:
        """`drafter`'s MTP head drafts in this batch's head context once bound."""
        mine = mtp_draft(drafter)
        if mine is not None:
            mine.share(self.heads)

    def run(self, wants: "Mapping[Hashable, HeadRows]") -> Rows:
        return run_heads(self.heads, wants)

    def step(self, wants: "Mapping[Hashable, HeadRows]", left: dict[Hashable, list[int]]) -> Rows:
        """One pass over what the slots' heads ask for (`one_pass`)."""
        return one_pass(wants, left, self.heads.n_batch, _head_decoder(self.heads, wants))

    def close(self) -> None:
        self.heads.close()


def mtp_draft(drafter: Drafter | None) -> MTPDrafter | None:
    """The MTP head `drafter` is or holds beside free drafters; None for any other."""
    inner = getattr(drafter, "model_drafter", drafter)
    return inner if isinstance(inner, MTPDrafter) else None
