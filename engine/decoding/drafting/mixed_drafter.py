"""A draft model with the free drafters beside it, behind the one Drafter interface: each step
under Auto, the suffix draft, prompt lookup or the model drafts, whichever promises the most
accepted tokens per second (a `SourceChooser` this drafter makes from the step's policy and
costs, source_choice.py). With a fixed lookahead the model drafts alone, as asked.

Prompt lookup and the suffix draft read every step's context (cheap), so their proposals
are ready whether or not they are chosen; the suffix draft learns every answer. A free
source's cost and acceptance stay out of the decoder's cost model (the model's: `measure`);
this drafter keeps them per source (`SourceTrust`).
"""

from __future__ import annotations

from typing import Callable, Sequence

from ...llamacpp.context import Context
from ...llamacpp.llama import Model
from ..sampling.sampler import Sampler
from .cost_model import CostModel
from .draft_context import NO_RULES, DraftContext
from .drafter_api import Steps, steps_alone
from .drafters import Drafter, Proposal
from .lookup_drafter import PromptLookupDrafter
from .lookahead import Lookahead
from .source_choice import MODEL, SourceChooser, SourceTrust
from .suffix_drafter import SuffixDrafter

__all__ = ["MixedDrafter"]


class MixedDrafter(Drafter):
    """`model_drafter` (a model, a bridged model or an MTP head) with `suffix` and prompt lookup.
    Stands in for the model drafter everywhere: its kind, model, contexts and costs."""

    cost_class = "model"

    def __init__(self, model_drafter: Drafter, suffix: SuffixDrafter | None = None,
                 lookup: PromptLookupDrafter | None = None):
        self.model_drafter = model_drafter
        self.suffix = suffix if suffix is not None else SuffixDrafter(with_lookup=False)
        self.lookup = lookup if lookup is not None else PromptLookupDrafter()
        self.trust = SourceTrust()
        self.kind = model_drafter.kind
        self.calibration_name = model_drafter.calibration_name
        self.last: Proposal = Proposal()  # what the last step proposed ("" source: the model)
        self.last_free = False  # the last proposal came from a free source, not the model

    @property
    def model(self) -> Model | None:  # type: ignore[override]
        return self.model_drafter.model

    @property
    def contexts(self) -> list[Context]:
        return self.model_drafter.contexts

    @property
    def history_drafter(self) -> SuffixDrafter:
        return self.suffix

    def relative_cost(self, target: Model) -> float:
        return self.model_drafter.relative_cost(target)

    @property
    def pending_load_s(self) -> float:  # type: ignore[override]
        return self.model_drafter.pending_load_s

    def load(self) -> object:
        return self.model_drafter.load()

    def bind(self, target: Context) -> None:
        self.model_drafter.bind(target)

    def begin(self, prompt: Sequence[int]) -> None:
        self.model_drafter.begin(prompt)
        self.suffix.begin(prompt)
        self.lookup.begin(prompt)
        self.trust.begin()
        self.last, self.last_free = Proposal(), False

    def unread(self, context: Sequence[int]) -> int:
        return self.model_drafter.unread(context)

    def read(self, context: Sequence[int], limit: int | None = None,
             cancelled: "Callable[[], bool]" = lambda: False) -> int:
        return self.model_drafter.read(context, limit, cancelled)

    def reading(self, context: Sequence[int], limit: int | None = None,
                cancelled: "Callable[[], bool]" = lambda: False) -> Steps[tuple[int, float | None]]:
        return (yield from self.model_drafter.reading(context, limit, cancelled))

    def wants_proposal(self, k: int, room: int, policy: Lookahead) -> bool:
        """Under a policy that chooses sources a free proposal may draft where the model would not."""
        return k > 0 or (room > 0 and policy.chooses_sources)

    def propose(self, context: Sequence[int], k: int, sampler: Sampler, rules: DraftContext = NO_RULES) -> Proposal:
        """`k` is the model's (0: Auto would not draft with it now). Under a policy that chooses
        sources the free proposals are weighed against it; otherwise the model drafts alone."""
        return steps_alone(self.proposing(context, k, sampler, rules))

    def proposing(self, context: Sequence[int], k: int, sampler: Sampler,
                  rules: DraftContext = NO_RULES) -> Steps[Proposal]:
        """`propose` in steps: the model's own (batched with other slots' in the parallel slots)."""
        chooser = self._chooser(rules)
        self.last_free = False
        if chooser is None:
            self.last = (yield from self.model_drafter.proposing(context, k, sampler, rules)) if k > 0 else Proposal()
            return self.last
        free = [p for p in (self.suffix.propose(context, chooser.room, sampler, rules),
                            self.lookup.propose(context, chooser.room, sampler, rules)) if p.tokens]
        for p in free:
            p.source = p.source or "lookup"
        free = [p for p in free if chooser.allows(p.source)]  # both still read the step: they stay in sync
        chances = [self.trust.chances(p.source, p.confidence or [0.5] * len(p.tokens)) for p in free]
        pick = chooser.pick(k, chances)
        if pick.index == MODEL:
            self.last = yield from self.model_drafter.proposing(context, pick.k, sampler, rules)
        elif pick.index >= 0:
            chosen = free[pick.index].cut(pick.k)
            chosen.asked = chooser.room  # a free source was asked for all the step has room for
            self.last, self.last_free = chosen, True
        else:
            self.last = Proposal()
        return self.last

    @staticmethod
    def _chooser(rules: DraftContext) -> SourceChooser | None:
        """The step's choice among the sources, from its policy and costs (None: the model alone)."""
        if rules.policy is None or rules.cost is None or rules.room <= 0:
            return None
        return rules.policy.source_chooser(rules.cost, rules.room)

    def measure(self, cost: CostModel, proposal: Proposal, accepted: int, seconds: float) -> None:
        if not self.last_free:  # a free source's cost and acceptance say nothing of the model's
            self.model_drafter.measure(cost, proposal, accepted, seconds)

    def feedback(self, drafted: int, accepted: int) -> None:
        last = self.last
        if drafted == 0:
            return
        if not self.last_free:
            self.model_drafter.feedback(drafted, accepted)
            return
        self.trust.observe(last.source, last.confidence or [], drafted, accepted)
        (self.lookup if last.source == "lookup" else self.suffix).feedback(drafted, accepted)

    def finish(self, prompt: Sequence[int], generated: Sequence[int]) -> None:
        self.model_drafter.finish(prompt, generated)
        self.suffix.finish(prompt, generated)

    def close(self) -> None:
        self.model_drafter.close()
