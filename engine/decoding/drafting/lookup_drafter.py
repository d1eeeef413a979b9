"""Prompt lookup: drafting without a model. `PromptLookupDrafter` finds where the text being
written copies earlier text (the prompt or its own output) and proposes the continuation — a
pointer that follows the copied source, learns the substitutions the target makes (rename `x`
to `y` once, and later copies say `y`), and adapts its run length to what was accepted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..sampling.sampler import Sampler
from .draft_context import NO_RULES, DraftContext
from .drafter_api import Drafter, Proposal

__all__ = ["NgramIndex", "PromptLookupDrafter"]


class NgramIndex:
    """Where an n-gram occurs in a growing token list, found by a vectorised search at each
    question instead of a table built beforehand: a table of every 1- to 4-gram of a
    1,521-token document took 52 ms to build in Python, all of it between the request and its
    first token; a search over 1,500 tokens costs microseconds, a few a step."""

    def __init__(self) -> None:
        self._buf = np.empty(1024, dtype=np.int64)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def extend(self, tokens: Sequence[int]) -> None:
        need = self._n + len(tokens)
        if need > len(self._buf):
            grown = np.empty(max(need, 2 * len(self._buf)), dtype=np.int64)
            grown[: self._n] = self._buf[: self._n]
            self._buf = grown
        self._buf[self._n:need] = tokens
        self._n = need

    def ends(self, gram: Sequence[int]) -> list[int]:
        """The positions just after each occurrence of `gram`, in order."""
        n, a = len(gram), self._buf[: self._n]
        if n == 0 or self._n < n:
            return []
        hit = a[n - 1:] == gram[-1]
        for j in range(1, n):
            hit &= a[n - 1 - j: self._n - j] == gram[-1 - j]
        return (np.flatnonzero(hit) + n).tolist()

# The confidence each planned token states (`_confidence`). Each level is a calibration bucket
# of its own (cost_model.CONF_BUCKETS, 0.05 wide): Auto learns how often each one holds, and
# the level is only its prior until it has. By how long the target has followed the pointer
# (its streak s), a copy of the prompt:
PROMPT_COPY_SHORT = 0.80  # s 1-3
PROMPT_COPY_MID = 0.87  # s 4-7
PROMPT_COPY_LONG = 0.93  # s 8-31
PROMPT_COPY_SURE = 0.98  # s >= 32: an edit copying its source
# A copy of the model's own output, below the prompt's: after 1-3 copied tokens the next one
# held 53% of the time against the prompt's 81%. The output levels and the prompt's SHORT and
# MID were set with tools/lookup_replay.py on the tuning suites, LONG and SURE kept and
# replayed with them (commit d95f43e; docs/benchmarks.md, "Prompt lookup that does not lose
# on unseen text").
OUTPUT_COPY_SHORT = 0.60  # s 1-3
OUTPUT_COPY_MID = 0.67  # s 4-7
OUTPUT_COPY_LONG = 0.77  # s >= 8
SUBSTITUTED = 0.72  # a token written by a learned substitution, not copied as is


@dataclass
class _PlanItem:
    token: int
    src_after: int | None  # source position after this token (None: inside a substitution)
    anchor: tuple[int, int]  # (source position, output index) where this item's copy began
    substituted: bool = False
    original: int | None = None  # the source token a substitution replaced (first item)


class PromptLookupDrafter(Drafter):
    """Copy-aware drafting without a model.

    Finds the longest recent n-gram (n_max down to n_min) of the context that occurs
    earlier, then keeps a pointer into that earlier text and follows it while the target
    keeps copying. When the target writes something else, the pointer re-anchors at the
    next match and the difference is learned as a substitution (source span -> written
    span) applied to later copies. The run length doubles after a fully accepted draft and
    shrinks to what was accepted after a rejection.
    """

    kind = "lookup"
    calibration_name = "lookup-v2"  # v2: copies of the prompt and of the output apart

    def __init__(self, n_max: int = 4, n_min: int = 2, max_sub: int = 8, start_run: int = 4, rejoin_window: int = 12):
        self.n_max = n_max
        self.n_min = n_min
        self.max_sub = max_sub
        self.start_run = start_run
        self.rejoin_window = rejoin_window
        self.prompt_len = 0
        self._reset()

    def _reset(self) -> None:
        self.index = NgramIndex()
        self.tokens: list[int] = []
        self.ptr: int | None = None  # source position of the next expected token
        self.plan: list[_PlanItem] = []
        self.plan_at = 0  # output length (len(tokens)) when the plan was made
        self.diverged: tuple[int, int] | None = None  # (source pos, output index) of a divergence
        self.tentative: tuple[int, int] | None = None  # a one-for-one replacement being tried
        self.cursor = 0  # prompt position the copy has reached (edits copy in order)
        self.subs: dict[tuple[int, ...], tuple[int, ...]] = {}
        self.run = self.start_run
        self.streak = 0  # plan tokens the target confirmed since the pointer was (re)anchored
        self.anchor_quality = 0.55  # how trustworthy the last anchor was (see _confidence)

    def begin(self, prompt: Sequence[int]) -> None:
        self._reset()
        self._extend(prompt)
        self.prompt_len = len(prompt)

    # -- index ---------------------------------------------------------------------------
    def _extend(self, new: Sequence[int]) -> None:
        self.tokens.extend(int(t) for t in new)
        self.index.extend(self.tokens[len(self.tokens) - len(new):])

    def _sync(self, context: Sequence[int]) -> list[int]:
        """Bring our copy of the context up to date; return the new tokens."""
        n_old = len(self.tokens)
        if len(context) < n_old or list(context[: min(n_old, 64)]) != self.tokens[: min(n_old, 64)]:
            self.begin(context)  # a different conversation: start over
            return []
        new = list(context[n_old:])
        self._extend(new)
        return new

    # -- pointer following ------------------------------------------------------------------
    def _follow(self, new: list[int]) -> None:
        """Advance the pointer along the plan for tokens the target actually wrote."""
        base = len(self.tokens) - len(new)  # output index of new[0]
        for i, tok in enumerate(new):
            if self.ptr is None:
                break  # the copy broke earlier: `_anchor` looks for it again
            j = base + i - self.plan_at
            if not 0 <= j < len(self.plan):  # past the plan (a bonus token): plan one more
                self.plan_at = base + i
                self._make_plan(self.plan_at, 1)
                j = 0
                if not self.plan:  # the source ran out
                    self.ptr = None
                    break
            item = self.plan[j]
            if item.token == tok:
                self._take(item)
            else:
                self._diverge(item, tok)
                break
        self.plan = []

    def _take(self, item: _PlanItem) -> None:
        if self.tentative is not None:  # the one-for-one guess held: learn it
            src_div, out_div = self.tentative
            frm, to = (self.tokens[src_div],), (self.tokens[out_div],)
            if frm != to and src_div < self.prompt_len:
                self.subs[frm] = to
            self.tentative = None
            self.diverged = None
        self.streak += 1
        if item.src_after is not None:
            self.ptr = item.src_after
            if item.src_after <= self.prompt_len:
                self.cursor = item.src_after

    def _diverge(self, item: _PlanItem, actual: int) -> None:
        if item.substituted and item.original is not None and actual == item.original:
            # The target kept the original here: this substitution is not universal.
            for key, val in list(self.subs.items()):
                if val and val[0] == item.token and key[0] == actual:
                    del self.subs[key]
        if self.tentative is not None:
            self.diverged = self.tentative  # the guess failed: the copy broke back there
            self.tentative = None
        else:
            self.diverged = item.anchor
        self.ptr = None
        self.streak = 0

    def _anchor(self) -> None:
        """Find where the recent output copies earlier text; learn a substitution.

        Preference: a match in the prompt at or after the copy cursor (edits copy their
        source in order), the longest n-gram first; then, after a break, the output
        rejoining the source within a few tokens of where it broke; then any match.
        """
        toks = self.tokens
        L = len(toks)
        if self.diverged is not None and self.diverged[1] == L - 1 and self.tentative is None:
            # One token written since the copy broke: guess a one-for-one replacement and
            # keep copying right after the replaced source token (confirmed next step).
            self.tentative = self.diverged
            self.ptr = self.diverged[0] + 1
            self.anchor_quality = 0.25
            return
        fallback: tuple[int, int] | None = None  # (n, position)
        for n in range(self.n_max, self.n_min - 1, -1):
            if L < n + 1:
                continue
            hits = [e for e in self.index.ends(toks[L - n :]) if e < L]
            if not hits:
                continue
            forward = [e for e in hits if self.cursor <= e <= self.prompt_len]
            if forward:
                self._anchor_at(min(forward), n)
                return
            if fallback is None:
                in_prompt = [e for e in hits if e <= self.prompt_len]
                fallback = (n, in_prompt[-1] if in_prompt else hits[-1])
        if self.diverged is not None:
            src_div, out_div = self.diverged
            window = toks[src_div : min(src_div + self.rejoin_window, self.prompt_len)]
            if toks[L - 1] in window and L - 1 > out_div:
                self._anchor_at(src_div + window.index(toks[L - 1]) + 1, 1)
                self.anchor_quality = 0.15
                return
        if fallback is not None:
            self._anchor_at(fallback[1], fallback[0])
            self.anchor_quality = 0.35 if fallback[0] <= 2 else 0.45

    def _forward_prompt_match(self) -> int | None:
        """Position after the longest recent n-gram found in the prompt at/after the cursor."""
        toks, L = self.tokens, len(self.tokens)
        for n in range(self.n_max, self.n_min - 1, -1):
            if L < n + 1:
                continue
            forward = [e for e in self.index.ends(toks[L - n :]) if self.cursor <= e <= self.prompt_len]
            if forward:
                return min(forward)
        return None

    def _anchor_at(self, pos: int, n: int) -> None:
        """Resume copying at source position `pos` (after an n-token match)."""
        if self.diverged is not None:
            src_div, out_div = self.diverged
            src_start, out_start = pos - n, len(self.tokens) - n
            frm = tuple(self.tokens[src_div:src_start])
            to = tuple(self.tokens[out_div:out_start])
            if (0 < len(frm) <= self.max_sub and len(to) <= self.max_sub and frm != to and src_start >= src_div
                    and src_start <= self.prompt_len):
                self.subs[frm] = to  # learnt from the prompt only: output copies of copies mislead
            self.diverged = None
        self.ptr = pos
        self.streak = 0
        self.anchor_quality = {1: 0.15, 2: 0.35, 3: 0.45}.get(n, 0.55)

    def _confidence(self, j: int, item: _PlanItem) -> float:
        """How sure the j-th planned token is, as a bucket Auto calibrates by measured
        acceptance: a fresh anchor is a guess whose trust grows with the match length; a
        pointer the target has followed for a while is nearly always right; a learned
        substitution sits in between. A copy of the prompt and a copy of the output have
        buckets of their own: an edit copies its source for hundreds of tokens, while code
        that repeats a pattern of its own output parts from it within a few, and one shared
        bucket let each mislead the calibration of the other."""
        if item.substituted:
            return SUBSTITUTED
        s = self.streak + j
        if s == 0:
            return self.anchor_quality
        if item.src_after is not None and item.src_after > self.prompt_len:
            return OUTPUT_COPY_SHORT if s < 4 else OUTPUT_COPY_MID if s < 8 else OUTPUT_COPY_LONG
        if s >= 32:
            return PROMPT_COPY_SURE
        if s >= 8:
            return PROMPT_COPY_LONG
        return PROMPT_COPY_SHORT if s < 4 else PROMPT_COPY_MID

    def _make_plan(self, out_index: int, length: int) -> None:
        """Expected continuation from the pointer, with substitutions applied."""
        plan: list[_PlanItem] = []
        toks = self.tokens
        src = self.ptr
        if src is None:
            self.plan = plan
            return
        sub_lens = sorted({len(k) for k in self.subs}, reverse=True)
        out = out_index
        while len(plan) < length and src < len(toks):
            applied = False
            for m in sub_lens:
                key = tuple(toks[src : src + m])
                to = self.subs.get(key)
                if to is not None and len(key) == m:
                    for idx, t in enumerate(to):
                        last = idx == len(to) - 1
                        plan.append(_PlanItem(t, src + m if last else None, (src, out), True, key[0] if idx == 0 else None))
                    out += len(to)
                    src += m
                    applied = True
                    break
            if not applied:
                plan.append(_PlanItem(toks[src], src + 1, (src, out)))
                src += 1
                out += 1
        self.plan = plan[:length]

    # -- Drafter API ------------------------------------------------------------------------
    def propose(self, context: Sequence[int], k: int, sampler: Sampler, rules: DraftContext = NO_RULES) -> Proposal:
        new = self._sync(context)
        if new:
            self._follow(new)
        if self.ptr is None:
            self._anchor()
        elif self.ptr > self.prompt_len:
            # Following our own output; go back to the prompt as soon as it matches there.
            pos = self._forward_prompt_match()
            if pos is not None:
                self.ptr = pos
        if k <= 0 or self.ptr is None:
            return Proposal()
        self.plan_at = len(self.tokens)
        n = k if rules.trimmed_by_caller else min(k, self.run)
        self._make_plan(self.plan_at, n + 1)
        items = self.plan[:n]
        drafts = [p.token for p in items]
        return Proposal(drafts, [None] * len(drafts), [self._confidence(j, p) for j, p in enumerate(items)])

    def feedback(self, drafted: int, accepted: int) -> None:
        if drafted == 0:
            return
        if accepted == drafted:
            self.run = min(self.run * 2, 16)
        else:
            self.run = max(1, accepted)
