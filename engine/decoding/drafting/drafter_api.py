"""The one interface the decoder drafts through: a `Drafter` proposes (`propose`) and is told
how its proposal held (`measure`, `feedback`), as llama.cpp's `common_speculative` does.

Whatever a drafter is inside (a model, prompt lookup, a model with free drafters beside it
that it chooses among), the decoder sees only these members and the `Proposal` they return.
A proposal may also be made in steps (`proposing`): a drafter whose decodes are batched with
other sequences' (the parallel slots' draft model, batched_drafter.py) hands each decode it
needs to whoever drives the steps; `steps_alone` drives them with decodes of their own.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Generator, Hashable, Mapping, Sequence, TypeVar

import time

import numpy as np

from ...llamacpp.context import Context
from ...llamacpp.llama import Model
from ..sampling.sampler import Dist, Sampler
from .draft_context import NO_RULES, DraftContext

if TYPE_CHECKING:  # pragma: no cover
    from .cost_model import CostModel
    from .lookahead import Lookahead

__all__ = ["DraftRows", "Drafter", "Proposal", "batched_passes", "one_pass", "read_ahead", "steps_alone"]

T = TypeVar("T")


@dataclass(frozen=True)
class DraftRows:
    """A decode a drafter proposing in steps asks for: `tokens` appended to its draft sequence
    `ctx` (a `SequenceView` of a shared draft context), the last one's logits row sent back.
    `k`: the most tokens the proposal may still draft (what a batch's planner counts on)."""

    ctx: Any
    tokens: list[int]
    k: int = 0
    # A read ahead (a draft reading the prompt): no row is wanted; the seconds of the passes it
    # had rows in (its share) are sent back instead.
    reads: bool = False

    def alone(self) -> np.ndarray:
        """This decode made on its own (no batch drives it): its last row's logits."""
        for _, logits in self.ctx.feed(self.tokens, last_logits=not self.reads):
            pass
        return logits[0] if not self.reads else np.empty(0, dtype=np.float32)


# A proposal (or a step's plan) made in steps: it yields the decodes it needs, is sent each one's row.
Steps = Generator[DraftRows, np.ndarray, T]


def steps_alone(steps: "Steps[T]") -> T:
    """Drive `steps` to their end with a decode of their own for each row they ask for."""
    try:
        want = next(steps)
        while True:
            want = steps.send(want.alone())
    except StopIteration as done:
        return done.value


# One pass's pieces, (whose want, its tokens in this pass, whether they end it) -> per piece its
# last row's logits where they end it (None otherwise).
PassDecode = Callable[[list[tuple[Hashable, list[int], bool]]], Sequence["np.ndarray | None"]]


def batched_passes(wants: Mapping[Hashable, DraftRows], n_batch: int,
                   decode: PassDecode) -> tuple[dict[Hashable, np.ndarray | None], dict[Hashable, float]]:
    """Decode what each want asks for in as few passes of `n_batch` rows as they fit
    (`one_pass` until none is left); per want, its last row and its share of the passes' seconds."""
    left: dict[Hashable, list[int]] = {}
    rows: dict[Hashable, np.ndarray | None] = {}
    spent = dict.fromkeys(wants, 0.0)
    while len(rows) < len(wants):
        done, seconds = one_pass({k: w for k, w in wants.items() if k not in rows}, left, n_batch, decode)
        rows.update(done)
        for key, s in seconds.items():
            spent[key] += s
    return rows, spent


def one_pass(wants: Mapping[Hashable, DraftRows], left: dict[Hashable, list[int]], n_batch: int,
             decode: PassDecode) -> tuple[dict[Hashable, np.ndarray | None], dict[Hashable, float]]:
    """One pass of up to `n_batch` rows over `wants` (`left`: each want's tokens not decoded yet,
    kept between passes), the shortest first so that every drafting sequence's next position
    takes part and a long read goes on in the room left, a chunk a pass, never stalling the
    others' drafting for its whole length. Returns the wants it finished, with their last rows
    (None for a read), and each want's share of the pass's seconds (by its rows in it)."""
    for key, w in wants.items():
        left.setdefault(key, list(w.tokens))
    budget, pieces = n_batch, []
    for key in sorted(wants, key=lambda k: len(left[k])):
        if budget == 0:
            break
        take = left[key][:budget]
        pieces.append((key, take, len(take) == len(left[key])))
        budget -= len(take)
    t = time.perf_counter()
    out = decode(pieces)
    seconds, n = time.perf_counter() - t, sum(len(take) for _, take, _ in pieces)
    done: dict[Hashable, np.ndarray | None] = {}
    spent: dict[Hashable, float] = {}
    for (key, take, ends), got in zip(pieces, out):
        spent[key] = seconds * len(take) / n
        del left[key][:len(take)]
        if ends:
            done[key] = got
            del left[key]
    return done, spent


def read_ahead(ctx: Context, tokens: Sequence[int], limit: int | None,
               cancelled: "Callable[[], bool]" = lambda: False) -> int:
    """Read the next `limit` (None: all) of `tokens` (never the last: a proposal needs its
    logits) that `ctx` does not hold yet; return how many are left unread."""
    keep = ctx.reuse_prefix(tokens)
    end = len(tokens) - 1 if limit is None else min(len(tokens) - 1, keep + max(0, limit))
    for _ in ctx.feed(list(tokens[keep:end]), abortable=True):
        if cancelled():
            break
    return max(0, len(tokens) - 1 - ctx.n_past)


@dataclass
class Proposal:
    tokens: list[int] = field(default_factory=list)
    dists: list[Dist | None] = field(default_factory=list)  # q per token (sampling); None = one-hot
    # Per token: the drafter's estimate that it is accepted given the ones before it were
    # (Auto trims a proposal to the k with the best expected tokens per second). None: unknown.
    confidence: list[float] | None = None
    # Which drafter (or part of one) proposed it, when a drafter has several ("" : the drafter's kind)
    source: str = ""
    # How many tokens its source was asked for, where not the step's k (None): a free drafter
    # beside a model draft is asked for all the step has room for
    asked: int | None = None

    def cut(self, k: int) -> "Proposal":
        conf = self.confidence[:k] if self.confidence is not None else None
        return Proposal(self.tokens[:k], self.dists[:k], conf, self.source, self.asked)


class Drafter(ABC):
    """Proposes up to k tokens that might follow `context` (all tokens so far).

    Explicit members the decoder relies on: `kind` (for stats), `cost_class` ("free": a
    proposal costs next to nothing, like prompt lookup; "model": every drafted token costs a
    draft-model step), `model` (the draft model, if any), `contexts` (KV caches a cancel
    must interrupt) and `relative_cost()` (prior cost of a drafted token vs a target step).
    What one step asks of a proposal (Auto's confidence gate, the request's logits
    processors, the grammar, the policy and costs) comes with it, in a `DraftContext`.
    """

    kind: str = "drafter"
    # What the stored calibration of a model-free drafter's confidences is filed under; a
    # new name when their meaning changes, so old measurements cannot mislead new buckets.
    calibration_name: str = "drafter"
    cost_class: str = "free"
    model: Model | None = None

    @property
    def contexts(self) -> list[Context]:
        return []

    @property
    def history_drafter(self) -> "Drafter | None":
        """The drafter (this one or one inside it) that keeps past answers; None: none does."""
        return None

    def relative_cost(self, target: Model) -> float:
        """Cost of one drafted token relative to one target step, before measuring."""
        if self.model is not None and target.size_bytes:
            return max(0.02, self.model.size_bytes / target.size_bytes)
        return 0.01

    pending_load_s: float = 0.0  # seconds a model loaded when first needed would still take (lazy_drafter.py)

    def load(self) -> object:
        """Be ready to read and draft (a draft loaded when first needed loads here)."""
        return self

    def begin(self, prompt: Sequence[int]) -> None:
        """A new generation starts with this prompt."""

    def bind(self, target: Context) -> None:
        """The decoder's target context, once, before any run (a drafter reading the target's
        hidden states, like a model's own MTP head, links to it here)."""

    def unread(self, context: Sequence[int]) -> int:
        """Tokens of `context` (but its last) this drafter would have to read before its first
        proposal: none for a drafter that keeps no model state (prompt lookup)."""
        return 0

    def read(self, context: Sequence[int], limit: int | None = None,
             cancelled: "Callable[[], bool]" = lambda: False) -> int:
        """Read up to `limit` (None: all) of the tokens of `context` (but its last) not read yet
        into the draft's state (a model drafter fills its KV cache), so that a proposal does
        not pay for the whole prompt; the decoder calls it in chunks between target steps.
        Returns how many are left unread."""
        return 0

    def reading(self, context: Sequence[int], limit: int | None = None,
                cancelled: "Callable[[], bool]" = lambda: False) -> "Steps[tuple[int, float | None]]":
        """`read` in steps (a batched draft yields its read, `DraftRows.reads`, for the parallel
        slots to make with theirs): how many are left unread, and the seconds the batch charged
        it (None: it read on its own, timed by the caller)."""
        return self.read(context, limit, cancelled), None
        yield  # pragma: no cover - makes this a generator, as a batched drafter's is

    def wants_proposal(self, k: int, room: int, policy: "Lookahead") -> bool:
        """Whether the step asks for a proposal: the policy chose k > 0 tokens (a drafter with
        sources of its own may still offer one when k is 0)."""
        return k > 0

    @abstractmethod
    def propose(self, context: Sequence[int], k: int, sampler: Sampler, rules: DraftContext = NO_RULES) -> Proposal:
        """Up to k tokens that might follow `context` (all tokens so far), following `rules`."""

    def proposing(self, context: Sequence[int], k: int, sampler: Sampler,
                  rules: DraftContext = NO_RULES) -> "Steps[Proposal]":
        """`propose` in steps (module docstring): this drafter decodes on its own, so at once."""
        return self.propose(context, k, sampler, rules)
        yield  # pragma: no cover - makes this a generator, as a batched drafter's is

    def measure(self, cost: "CostModel", proposal: Proposal, accepted: int, seconds: float) -> None:
        """Teach the decoder's cost model what the last proposal (as verified) cost and how it
        held: a model draft's time per token, and the acceptance of its confidences."""
        if self.cost_class == "model":
            cost.observe_draft(len(proposal.tokens), seconds)
        cost.observe_acceptance(len(proposal.tokens), accepted, proposal.confidence)

    def feedback(self, drafted: int, accepted: int) -> None:
        """How the last proposal fared (after verification)."""

    def finish(self, prompt: Sequence[int], generated: Sequence[int]) -> None:
        """A generation from `prompt` ended having written `generated` (a drafter that
        learns from past answers keeps it)."""

    def close(self) -> None:
        """Release resources (model contexts)."""
