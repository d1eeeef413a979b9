"""The target's side of one run: what turns its logits rows into a verdict on the drafts.

One `Verifier` per run owns the run's sampler (its seeded stream), the request's logits
processors (bias, penalties: applied to every verify row, so the target's distribution is
the processed one; logit_controls.py), the grammar's committed state (advanced by accepted
tokens only; grammar.py) and how many alternatives logprobs report. The decoder hands it
each step's drafts and rows and gets back the verdict and the rows logprobs read; it never
needs to know which of these a request uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from ...errors import NonFiniteLogits
from .finite import model_label
from .grammar import GrammarState, verify_constrained
from .logit_controls import RowProcessors, token_logprobs
from .sampler import GREEDY, Dist, Sampler, SamplingParams, Verification, verify

if TYPE_CHECKING:  # pragma: no cover
    from ...llamacpp.llama import Model

class Verifier:
    """Sampling, processors, grammar and logprobs of one run (see the module docstring).

    `grammar` is the constraint's GBNF text (None: none; with `grammar_triggers`, it applies
    from the first trigger written on: lazy_grammar.py); its state reads the target's
    vocabulary, so it is made here, while the target is alive, and freed by `close`.
    """

    def __init__(
        self,
        target: "Model",
        sampling: SamplingParams = GREEDY,
        processors: RowProcessors | None = None,
        *,
        grammar: str | None = None,
        grammar_triggers: Sequence[str] = (),
        logprobs: int | None = None,
    ):
        self.target = target
        self.sampler = Sampler(sampling)
        self.processors = processors if processors is not None else RowProcessors()
        self.logprobs = logprobs
        self.grammar: GrammarState | None = None
        if grammar is not None and grammar_triggers:
            from .lazy_grammar import LazyGrammarState

            self.grammar = LazyGrammarState(target, grammar, grammar_triggers)
        elif grammar is not None:
            self.grammar = GrammarState(target, grammar)
        # What a model drafter applies to its own rows to draft from what is verified.
        self.row_processor = self.processors.row if self.processors else None

    def verify(
        self, drafts: Sequence[int], dists: Sequence[Dist | None], logits: np.ndarray, context: Sequence[int]
    ) -> tuple[Verification, "np.ndarray | list[np.ndarray] | None"]:
        """The verdict on `drafts` from the target's `logits` rows (row i follows `context` +
        drafts[:i]), and the rows each emitted token's logprobs read (None: not asked): the
        processed rows, masked where a grammar constrains them. Logits that are not numbers
        name the target."""
        if self.processors:  # the target's distribution is the processed one, at every row
            logits = self.processors.rows(logits, context, drafts)
        try:
            if self.grammar is not None:
                masked: list[np.ndarray] | None = [] if self.logprobs is not None else None
                return verify_constrained(drafts, dists, logits, self.sampler, self.grammar, masked), masked
            return verify(drafts, dists, logits, self.sampler), (logits if self.logprobs is not None else None)
        except NonFiniteLogits as e:
            raise NonFiniteLogits.found(e.kind, model_label(self.target)) from None

    def token_logprobs(self, row: np.ndarray, token: int) -> tuple[float, list[tuple[int, float]]]:
        """`token`'s log-probability in a row `verify` returned, with the asked alternatives."""
        return token_logprobs(row, token, self.logprobs or 0)

    def close(self) -> None:
        """Free the grammar's state (the run is over)."""
        if self.grammar is not None:
            self.grammar.close()
