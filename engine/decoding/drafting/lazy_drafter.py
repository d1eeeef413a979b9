"""A draft model loaded the first time it must read or draft, for one-shot runs (`tandem generate`).

Under Auto, a question about a document is often drafted by the free sources alone (prompt
lookup, the suffix draft) or not at all: measured with the default pair, a 0.5B draft that was
never asked to read or draft still cost each `tandem generate` process 1.1-1.6 s of loading (its
weights read and repacked), a quarter of a short answer's wall-clock. Until it is needed this
drafter holds only the file's name and size: the cost store and the stats name the draft by it,
and Auto prices the load (`pending_load_s`) beside the draft's reading of the prompt before it
decides that drafting with the model pays. The app and the server load their draft with the
pair, where a progress bar shows it, and keep it for many answers: they do not use this.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Sequence

from ...llamacpp.context import Context
from ..sampling.sampler import Sampler
from .draft_context import NO_RULES, DraftContext
from .drafter_api import Drafter, Proposal, Steps

__all__ = ["LazyModelDrafter", "UnloadedModel"]

LOAD_S_PER_GB = 2.5  # a draft's load before it is measured: 1.1-1.6 s for the 0.5B (491 MB) on a 2-core VM


class UnloadedModel:
    """What is known of a draft file before it is loaded: its path and size (the cost store's
    key and the stats' name; the size prices a drafted token before one is measured)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.size_bytes = self.path.stat().st_size


class LazyModelDrafter(Drafter):
    """The model drafter `make` builds (loading the file at `path`), built at its first read or
    proposal; every call before that costs nothing."""

    kind = "model"
    cost_class = "model"

    def __init__(self, path: str | Path, make: Callable[[], Drafter]):
        self.unloaded = UnloadedModel(Path(path))
        self._make = make
        self._inner: Drafter | None = None
        self._bound: Context | None = None
        self.load_s: float | None = None  # how long the load took, once made

    @property
    def loaded(self) -> bool:
        return self._inner is not None

    @property
    def model(self):  # type: ignore[override]
        return self._inner.model if self._inner is not None else self.unloaded

    @property
    def contexts(self) -> list[Context]:
        return self._inner.contexts if self._inner is not None else []

    @property
    def pending_load_s(self) -> float:
        """Seconds the load would still cost (0 once loaded): what Auto adds to the draft's first read."""
        return 0.0 if self._inner is not None else self.unloaded.size_bytes / 1e9 * LOAD_S_PER_GB

    def load(self) -> Drafter:
        if self._inner is None:
            t = time.perf_counter()
            self._inner = self._make()
            self.load_s = time.perf_counter() - t
            if self._bound is not None:
                self._inner.bind(self._bound)
        return self._inner

    def bind(self, target: Context) -> None:
        self._bound = target
        if self._inner is not None:
            self._inner.bind(target)

    def begin(self, prompt: Sequence[int]) -> None:
        if self._inner is not None:
            self._inner.begin(prompt)

    def unread(self, context: Sequence[int]) -> int:
        """All of it but the last token, until loaded (a model draft of the target's vocabulary)."""
        return self._inner.unread(context) if self._inner is not None else max(0, len(context) - 1)

    def read(self, context: Sequence[int], limit: int | None = None,
             cancelled: "Callable[[], bool]" = lambda: False) -> int:
        return self.load().read(context, limit, cancelled)

    def reading(self, context: Sequence[int], limit: int | None = None,
                cancelled: "Callable[[], bool]" = lambda: False) -> Steps[tuple[int, float | None]]:
        return (yield from self.load().reading(context, limit, cancelled))

    def propose(self, context: Sequence[int], k: int, sampler: Sampler, rules: DraftContext = NO_RULES) -> Proposal:
        return self.load().propose(context, k, sampler, rules)

    def proposing(self, context: Sequence[int], k: int, sampler: Sampler,
                  rules: DraftContext = NO_RULES) -> Steps[Proposal]:
        return (yield from self.load().proposing(context, k, sampler, rules))

    def measure(self, cost, proposal: Proposal, accepted: int, seconds: float) -> None:  # type: ignore[no-untyped-def]
        (self._inner or super()).measure(cost, proposal, accepted, seconds)

    def feedback(self, drafted: int, accepted: int) -> None:
        if self._inner is not None:
            self._inner.feedback(drafted, accepted)

    def finish(self, prompt: Sequence[int], generated: Sequence[int]) -> None:
        if self._inner is not None:
            self._inner.finish(prompt, generated)

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()
