"""Which draft sources Auto has set aside in this generation, and when each is tried again.

Auto prices a draft by its measured acceptance, but every measure keeps a prior: the cost
model's alpha decays towards it so it can follow the text, and settles near 0.14 however often
the draft fails; a free drafter's stated confidences wear down only over many misses. On a
GPU's nearly flat verify curve, with a draft as cheap as an MTP head, that is enough to predict
a gain: an MTP head with 0 of 249 drafted tokens accepted drafted on 88 of 120 steps (#47).

So acceptance is also judged plainly, from what each source's proposals did in this
generation: a source whose last MISSES proposals were all rejected at their first token, and
which had fewer than LOW of the tokens the target tried accepted over its last WINDOW
proposals, is set aside. It drafts again only on a retry, RETRY_FIRST steps later, then twice
as long after each retry that fails (at most RETRY_MAX); a retry with a token accepted brings
it back. A source never accepted thus drafts on 7 of 120 steps (1-4, 12, 28, 60). Exactness is
untouched: this only decides whether a source may propose.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

__all__ = ["SetAside", "MAIN"]

MAIN = ""  # the key of the step's own draft (the k `Auto.choose` sizes), beside free sources by name


@dataclass
class _Standing:
    name: str
    drafted: int = 0
    accepted: int = 0
    misses: int = 0  # proposals in a row of which no token held
    recent: deque = field(default_factory=lambda: deque(maxlen=SetAside.WINDOW))  # (tried, accepted)
    aside_since: int | None = None  # the step it was set aside at (None: in use)
    retry_at: int = 0
    interval: int = 0


class SetAside:
    """The standing of each draft source in one generation, by key (`MAIN` or a source's name).
    `tick` once per step; `observe` each verified proposal; `allows` before drafting."""

    MISSES = 4  # proposals in a row with nothing accepted before a source is set aside...
    LOW = 0.1  # ...if it also had fewer than this share of its tried tokens accepted lately
    WINDOW = 8  # proposals that "lately" covers (a good draft's unlucky streak is outweighed)
    RETRY_FIRST = 8  # steps until the first retry
    RETRY_MAX = 128

    def __init__(self) -> None:
        self.step = 0
        self._by: dict[str, _Standing] = {}

    def tick(self) -> None:
        self.step += 1

    def allows(self, key: str) -> bool:
        """May `key` draft this step: in use, or set aside with a retry due."""
        s = self._by.get(key)
        return s is None or s.aside_since is None or self.step >= s.retry_at

    def observe(self, key: str, name: str, drafted: int, accepted: int) -> None:
        """A verified proposal of `key` (shown as `name`): token i was tried only if all before it held."""
        if drafted <= 0:
            return
        s = self._by.setdefault(key, _Standing(name, interval=self.RETRY_FIRST))
        s.name = name
        s.drafted += drafted
        s.accepted += accepted
        s.misses = 0 if accepted else s.misses + 1
        s.recent.append((min(drafted, accepted + 1), accepted))
        if s.aside_since is not None:  # a retry
            if accepted:
                s.aside_since = None
                s.interval = max(self.RETRY_FIRST, s.interval // 2)
            else:
                s.interval = min(2 * s.interval, self.RETRY_MAX)
                s.retry_at = self.step + s.interval
            return
        tried = sum(t for t, _ in s.recent)
        if s.misses >= self.MISSES and sum(a for _, a in s.recent) < self.LOW * tried:
            s.aside_since = self.step
            s.retry_at = self.step + s.interval

    def reasons(self) -> dict[str, str]:
        """Each source set aside now, by name: why, in words, and since when."""
        return {s.name: f"{s.accepted} of {s.drafted} drafted tokens accepted (since step {s.aside_since})"
                for s in self._by.values() if s.aside_since is not None}
