"""The draft optimiser's measurement: two draft files against one target, interleaved.

For each prompt of a short suite: target alone, then each draft at a fixed k (in alternating
order, so machine drift hits both alike), counting acceptance, per-token draft cost, identical
outputs and where outputs part (with the target's margin there); then each draft alone for
its raw speed. The optimiser turns what each draft did into a `DraftMeasure`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence


ROLES = ("before", "after")


@dataclass
class DraftTrial:
    """What each draft ("before", "after") did against the target, gathered run by run."""

    files: dict[str, Path]
    k: int
    max_tokens: int
    say: Callable[[str, float], None]
    check: Callable[[], None]
    total: int
    done: int = 0
    steps: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: {r: [] for r in ROLES})
    step_s: dict[str, list[float]] = field(default_factory=lambda: {r: [] for r in ROLES})
    same: dict[str, int] = field(default_factory=lambda: {r: 0 for r in ROLES})
    ratios: dict[str, list[float]] = field(default_factory=lambda: {r: [] for r in ROLES})
    parted: dict[str, list[bool]] = field(default_factory=lambda: {r: [] for r in ROLES})  # within noise?
    alone_tps: dict[str, list[float]] = field(default_factory=lambda: {r: [] for r in ROLES})
    target_tps: list[float] = field(default_factory=list)

    def _progress(self, message: str) -> None:
        self.say(message, 0.15 + 0.75 * self.done / self.total)

    def against_target(self, eng: Any, suite: Sequence[Any]) -> None:
        """Each prompt: target alone, then both drafts at k, in alternating order."""
        for i, bp in enumerate(suite):
            ref = eng.generate(bp.prompt, chat=bp.chat, draft_model=None, max_tokens=self.max_tokens, lookahead=0)
            self.target_tps.append(ref.stats.decode_tokens_per_s)
            self.done += 1
            for role in ROLES if i % 2 == 0 else ROLES[::-1]:
                self.check()
                self._progress(f"prompt {i + 1}/{len(suite)}: {role} draft, k={self.k}")
                self._one(eng, bp, role, ref)
                self.done += 1

    def _one(self, eng: Any, bp: Any, role: str, ref: Any) -> None:
        out = eng.generate(bp.prompt, chat=bp.chat, draft_model=self.files[role], max_tokens=self.max_tokens,
                           lookahead=self.k)
        for s in out.step_events:
            if s.drafted:
                self.steps[role].append((s.drafted, s.accepted))
                self.step_s[role].append(s.draft_ms / 1000.0 / s.drafted)
        self.same[role] += out.tokens == ref.tokens
        if ref.stats.decode_tokens_per_s > 0:
            self.ratios[role].append(out.stats.decode_tokens_per_s / ref.stats.decode_tokens_per_s)
        if out.tokens != ref.tokens:
            div = eng.first_divergence(eng.tokens_for(bp.prompt, chat=bp.chat), ref.tokens, out.tokens)
            if div is not None:
                self.parted[role].append(div.within_noise)

    def alone(self, eng: Any, prompt: Any, repeats: int, n_threads: int | None) -> None:
        """Each draft's own decode speed, alternating, `repeats` rounds."""
        from ..decoding.engine import Engine

        for rep in range(repeats):
            for role in ROLES if rep % 2 == 0 else ROLES[::-1]:
                self.check()
                self._progress(f"draft alone: {role}, round {rep + 1}/{repeats}")
                model = eng.load_draft(self.files[role])
                alone_eng = Engine(model, n_ctx=1024, n_threads=n_threads, metrics_log=False)
                try:
                    r = alone_eng.generate(prompt.prompt, chat=prompt.chat, max_tokens=self.max_tokens, lookahead=0)
                finally:
                    alone_eng.close()
                self.alone_tps[role].append(r.stats.decode_tokens_per_s)
                self.done += 1
