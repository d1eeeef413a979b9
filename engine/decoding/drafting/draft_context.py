"""What a drafter is told about the step it drafts for, as one value handed to `propose`.

The decoder builds one per drafting step from the lookahead policy and the run's verifier;
a drafter reads what it can use and ignores the rest (prompt lookup needs only
`trimmed_by_caller`; a model draft the gate, processors and grammar; a model drafter with free
drafters beside it, the policy, costs and room it chooses among them by). Correctness never
depends on it: the target's verification decides every token, so these only make proposals
more likely to hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from ..sampling.grammar import GrammarState
    from .cost_model import CostModel
    from .lookahead import Lookahead

# (k-th token index from 1, its confidence) -> (keep this token, draft another)
ConfidenceGate = Callable[[int, float], "tuple[bool, bool]"]
# (row, the context it follows) -> a processed copy of the row
RowProcessor = Callable[[np.ndarray, Sequence[int]], np.ndarray]


@dataclass(frozen=True)
class DraftContext:
    """The step's rules for a proposal (the defaults: none).

    confidence_gate: Auto's rule that stops a model draft when more tokens would not pay.
    trimmed_by_caller: the policy cuts the proposal to what its confidence pays for, so a
        free drafter should propose all it has rather than limit itself.
    row_processor: the request's logits processors (bias, penalties), for a model drafter to
        draft from what the target will verify against.
    grammar: the constraint's committed state, for a model drafter of the target's vocabulary
        to draft within it (a drafter clones it: the committed state is the verifier's).
    policy, cost: the step's lookahead policy and the decoder's cost model, for a drafter that
        chooses among its sources (`Lookahead.source_chooser`); None: its model drafts alone.
    room: the most tokens a proposal may have this step (what a free source is asked for).
    """

    confidence_gate: ConfidenceGate | None = None
    trimmed_by_caller: bool = False
    row_processor: RowProcessor | None = None
    grammar: "GrammarState | None" = None
    policy: "Lookahead | None" = None
    cost: "CostModel | None" = None
    room: int = 0


NO_RULES = DraftContext()  # a proposal with nothing to follow (direct calls, tools)
