"""The model draft: `ModelDrafter` runs a second, smaller model whose KV cache is kept in
sync with the target's context by common prefix, and proposes its next few tokens for the
target to verify. (Prompt lookup, the drafter without a model, is lookup_drafter.py.)
"""

from __future__ import annotations

from typing import Callable, Generator, Sequence

import numpy as np

from ..sampling.finite import check_top
from ..sampling.grammar import GrammarError, GrammarState
from ...llamacpp.llama import Model
from ...llamacpp.context import Context, common_prefix
from ...llamacpp.runtime import RuntimeParams
from ..sampling.sampler import Sampler
from .draft_context import NO_RULES, ConfidenceGate, DraftContext
from .drafter_api import Drafter, Proposal, read_ahead  # the interface (drafter_api.py), re-exported

__all__ = ["ConfidenceGate", "DraftContext", "Drafter", "ModelDrafter", "NO_RULES", "Proposal"]


class ModelDrafter(Drafter):
    """A small model drafts greedily (or samples from its own distribution q).

    p_min: stop drafting early when the draft's top probability falls below it (greedy
    mode): low-confidence guesses are usually rejected, and each costs a draft step.
    """

    kind = "model"
    cost_class = "model"

    def __init__(
        self,
        model: Model,
        runtime: RuntimeParams | None = None,
        *,
        p_min: float = 0.0,
        target_vocab: int | None = None,
    ):
        self.model = model
        self.ctx = Context(model, runtime)
        self.p_min = p_min
        self.target_vocab = target_vocab or model.n_vocab

    @property
    def contexts(self) -> list[Context]:
        return [self.ctx]

    def begin(self, prompt: Sequence[int]) -> None:
        # Keep the cache: a follow-up chat turn shares its prefix with the last one.
        pass

    def unread(self, context: Sequence[int]) -> int:
        return max(0, len(context) - 1 - common_prefix(self.ctx.tokens, context))

    def read(self, context: Sequence[int], limit: int | None = None,
             cancelled: "Callable[[], bool]" = lambda: False) -> int:
        """Read the next `limit` tokens of the context (never its last) into the draft's KV
        cache; a later proposal then decodes one token instead of the whole prompt."""
        return read_ahead(self.ctx, context, limit, cancelled)

    def propose(self, context: Sequence[int], k: int, sampler: Sampler, rules: DraftContext = NO_RULES) -> Proposal:
        out = Proposal()
        if k <= 0 or not context:
            return out
        ctx = self.ctx
        keep = ctx.reuse_prefix(context)
        if len(context) + k > ctx.n_ctx:
            k = ctx.n_ctx - len(context)
            if k <= 0:
                return out
        for _, logits in ctx.feed(list(context[keep:]), last_logits=True):
            pass
        row = logits[0]
        ctx.mark()  # a recurrent draft comes back here next step (a no-op for a plain KV cache)
        self._draft_under(rules, row, context, k, sampler, out)
        return out

    def _draft_under(self, rules: DraftContext, row: np.ndarray, context: Sequence[int], k: int, sampler: Sampler,
                     out: Proposal) -> None:
        """`_draft` within a clone of the step's grammar (the committed state is the verifier's)."""
        drafting = self._drafting_under(rules, row, context, k, sampler, out)
        try:
            token = next(drafting)
            while True:
                token = drafting.send(self._next_row(token))
        except StopIteration:
            pass
        finally:
            drafting.close()

    def _drafting_under(self, rules: DraftContext, row: np.ndarray, context: Sequence[int], k: int,
                        sampler: Sampler, out: Proposal) -> Generator[int, np.ndarray, None]:
        """`_drafting` within a clone of the step's grammar (the committed state is the verifier's)."""
        grammar = rules.grammar.clone() if rules.grammar is not None else None
        try:
            yield from self._drafting(row, context, k, sampler, out, grammar, rules)
        finally:
            if grammar is not None:
                grammar.close()

    def _drafting(self, row: np.ndarray, context: Sequence[int], k: int, sampler: Sampler, out: Proposal,
                  grammar: GrammarState | None, rules: DraftContext) -> Generator[int, np.ndarray, None]:
        """Up to k tokens from `row` on; within `grammar` (advanced as drafted) when given. Yields
        each token the next row must follow and is sent that row (`_next_row` alone, or a batch's)."""
        gate, process = rules.confidence_gate, rules.row_processor
        conf: list[float] = []
        out.confidence = conf
        for i in range(k):
            if process is not None:
                row = process(row, [*context, *out.tokens])
            if sampler.greedy:
                try:
                    tok = int(np.argmax(row)) if grammar is None else grammar.argmax(row[: self.target_vocab])
                    check_top(float(row[tok]))
                except GrammarError:  # nothing the grammar allows in the draft's row: stop drafting
                    break
                q = None
                top = float(1.0 / np.exp(row - row[tok]).sum()) if (gate is not None or self.p_min > 0.0) else 1.0
                if self.p_min > 0.0 and top < self.p_min:
                    break
            else:
                q = sampler.dist(row)
                tok = sampler.draw(q)
                top = q.prob(tok)
            if tok >= self.target_vocab:  # draft-only token: the target cannot verify it
                break
            if grammar is not None and not sampler.greedy and not grammar.allows(tok):
                break  # a draw the grammar forbids would be rejected: stop here (q stays the draft's own)
            keep, more = gate(i + 1, top) if gate is not None else (True, True)
            if not keep:
                break
            out.tokens.append(tok)
            out.dists.append(q)
            conf.append(top)
            if grammar is not None:
                grammar.accept(tok)
            if i < k - 1 and more:
                row = yield tok
            elif not more:
                break

    def _next_row(self, token: int) -> np.ndarray:
        """The draft's logits row after `token` (drafting goes on from there)."""
        return self.ctx.decode([token], logits="last")[0]

    def close(self) -> None:
        self.ctx.close()
