"""Drafting with the target's own multi-token-prediction head ("mtp"), or with a separate MTP
drafter file that reads the target's cache (Gemma 4's assistant).

Qwen3.5/3.6 and other 2026 families ship nextn layers trained to guess the next tokens
from the target's hidden state: a draft with no second file, no vocabulary to match, and
a forward pass a fraction of the target's. The head runs as llama.cpp's MTP context
(engine/llamacpp/mtp.py); drafting itself (greedy or sampled, gates, grammar, logits
processors) is the model drafter's, so exactness holds the same way: the target verifies
every token.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ...llamacpp.context import Context
from ...llamacpp.llama import Model
from ...llamacpp.mtp import HiddenStates, MtpContext, assistant_refusal, mtp_refusal
from ...errors import UnsupportedModelError
from ..sampling.sampler import Sampler
from .draft_context import NO_RULES, DraftContext
from .drafters import ModelDrafter, Proposal


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

    def relative_cost(self, target: Model) -> float:
        """One nextn layer plus the output head, against the whole target (or the assistant's
        size): a prior Auto replaces with what it measures."""
        return super().relative_cost(target) if self.model is not None else 0.1

    @property
    def contexts(self) -> list[Context]:
        return []  # the head's decodes are single tokens or one short batch: nothing to abort

    def bind(self, target: Context) -> None:
        self._hidden = HiddenStates(target)
        self._head = MtpContext(target, self._hidden, self.model)

    def unread(self, context: Sequence[int]) -> int:
        """Nothing to read ahead: the head reads the prompt's hidden states (one layer's work)
        at its first proposal, timed as drafting."""
        return 0

    def read(self, context: Sequence[int], limit: int | None = None,
             cancelled: "Callable[[], bool]" = lambda: False) -> int:
        return 0

    def propose(self, context: Sequence[int], k: int, sampler: Sampler, rules: DraftContext = NO_RULES) -> Proposal:
        out = Proposal()
        head = self._head
        if k <= 0 or not context or head is None:
            return out
        row = head.sync(context)  # positions up to the last token, then its prediction
        try:
            self._draft_under(rules, row, context, k, sampler, out)
        finally:  # drafted positions paired the head's own hidden states: the target's replace them
            head.truncate(len(context))
        return out

    def _next_row(self, token: int) -> np.ndarray:
        assert self._head is not None
        return self._head.extend(token)

    def close(self) -> None:
        if self._head is not None:
            self._head.close()
            self._head = None
        if self._hidden is not None:
            self._hidden.close()
            self._hidden = None
