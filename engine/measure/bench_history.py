"""The suffix draft in the bench: a drafter of the bench's own, so the user's memory of past
answers is neither read nor written, holding one memory per configuration, emptied when a
run of requests starts: every repetition of a run measures the same thing, and the requests
of a run learn from the ones before them."""

from __future__ import annotations

from typing import Any, Sequence

from ..decoding.drafting.choice import DraftChoice, DraftKind
from ..decoding.drafting.suffix_drafter import SuffixDrafter
from ..decoding.drafting.suffix_stores import AnswerStore
from .suites import BenchPrompt, Suite

__all__ = ["BenchHistories", "run_groups"]


class BenchHistories:
    """Past answers per configuration, for the bench's one suffix drafter (one decoder)."""

    def __init__(self, engine: Any):
        self.engine = engine
        self.drafter: SuffixDrafter | None = None
        self.stores: dict[str, AnswerStore] = {}
        self._lent: dict[int, tuple[SuffixDrafter, AnswerStore, Any]] = {}  # a model draft's companion, as it was

    def draft_for(self, config: str, draft: Any) -> Any:
        """What a generation of `config` drafts with: the bench's suffix drafter holding this
        configuration's memory for the suffix draft, else `draft` itself (a model draft's suffix
        companion then holds this configuration's memory: `_companion`)."""
        if draft is None:
            return draft
        kind = DraftChoice.parse(draft).kind
        if kind in (DraftKind.PATH, DraftKind.MODEL, DraftKind.MTP):
            self._companion(config, draft)
        if kind is not DraftKind.SUFFIX:
            return draft
        if self.drafter is None:
            self.drafter = SuffixDrafter(history_path=None)
        self.drafter.answers = self.stores.setdefault(config, AnswerStore())
        return self.drafter

    def _companion(self, config: str, draft: Any) -> None:
        """A model draft drafts with the suffix draft beside it (under Auto): during the bench
        that one learns into this configuration's memory, not the user's (given back by `close`),
        so no repetition drafts from the answers of the one before."""
        decoder = getattr(self.engine, "decoder", None)  # a child-process engine keeps its own
        suffix = getattr(decoder(draft).drafter, "history_drafter", None) if decoder is not None else None
        if not isinstance(suffix, SuffixDrafter):
            return
        self._lent.setdefault(id(suffix), (suffix, suffix.answers, suffix.history_path))
        suffix.answers, suffix.history_path = self.stores.setdefault(config, AnswerStore()), None

    def start_run(self) -> None:
        """A run of requests starts: nothing learnt before it counts."""
        self.stores.clear()

    def close(self) -> None:
        """Free the bench's suffix decoder (its own target context) in the engine; give the
        model drafts' companions their memory back."""
        for suffix, answers, path in self._lent.values():
            suffix.answers, suffix.history_path = answers, path
        self._lent.clear()
        if self.drafter is not None:
            self.engine.release(self.drafter)
            self.drafter = None
        self.stores.clear()


def run_groups(work: Sequence[tuple[Suite, BenchPrompt]]) -> list[list[tuple[Suite, BenchPrompt]]]:
    """The (suite, request) pairs grouped by run, in order; a lone prompt is a run of one."""
    groups: list[list[tuple[Suite, BenchPrompt]]] = []
    for suite, p in work:
        last = groups[-1][-1] if groups else None
        if last is not None and p.run is not None and last[0] is suite and last[1].run == p.run:
            groups[-1].append((suite, p))
        else:
            groups.append([(suite, p)])
    return groups
