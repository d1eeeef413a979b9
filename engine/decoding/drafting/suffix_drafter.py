"""The suffix drafter (SuffixDecoding, arXiv 2411.04975): drafts from everything already
written, this request and the engine's past answers, without a model.

Each step it finds the longest suffix of the context that occurred before, in this request
(prompt + output so far) and in past answers, and follows the most frequent continuation
of its occurrences while the product of the chosen tokens' frequencies stays >= `min_prob`.
A draft is at most `alpha` x the match length long (a long match predicts far, a one-token
match barely) and at most a run length that doubles after a fully accepted draft and falls
to what was accepted after a rejection. Of the two stores' drafts the one with the higher
score (summed path probability) wins. Answers are learnt when a generation finishes;
`history_path` makes them outlive the process (bounded, oldest first out).

Prompt lookup's pointer (which follows an edit's source through renames) proposes too; each
step takes the proposal with more expected accepted tokens, each source's confidences
scaled by how well that source's proposals have held in this generation (`SourceRecord`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

from ..sampling.sampler import Sampler
from .draft_context import NO_RULES, DraftContext
from .drafters import Drafter, Proposal
from .lookup_drafter import PromptLookupDrafter
from .suffix_index import MATCH_LENGTHS, Draft, suffix_hashes, walk
from .history_file import DamagedHistory, damaged_path, set_aside
from .suffix_stores import DEFAULT_HISTORY_TOKENS, AnswerStore, RequestStore

log = logging.getLogger(__name__)
LEAD_IN = 8  # prompt tokens kept before each learnt answer

__all__ = ["SourceRecord", "SuffixDrafter"]


class SourceRecord:
    """How one source's proposals held in this generation: accepted tokens against the summed
    confidence of the tokens the target tried, so a source that overstates is scaled down."""

    PRIOR = 2.0

    def __init__(self) -> None:
        self.hits = 0.0
        self.stated = 0.0

    @property
    def factor(self) -> float:
        return (self.hits + self.PRIOR) / (self.stated + self.PRIOR)

    def observe(self, confidence: Sequence[float], drafted: int, accepted: int) -> None:
        self.hits += accepted
        self.stated += sum(confidence[: min(drafted, accepted + 1)])

    def expected(self, confidence: Sequence[float]) -> float:
        """Expected accepted tokens of a proposal with these confidences."""
        total, path, f = 0.0, 1.0, self.factor
        for c in confidence:
            path *= min(0.99, c * f)
            total += path
        return total


class SuffixDrafter(Drafter):
    """Model-free drafting from a request's own text and from past answers."""

    kind = "suffix"
    calibration_name = "suffix-v1"
    cost_class = "free"

    def __init__(self, *, history_path: Path | None = None, n_vocab: int | None = None,
                 max_history_tokens: int = DEFAULT_HISTORY_TOKENS, alpha: float = 1.0,
                 min_prob: float = 0.1, start_run: int = 4, max_run: int = 32, with_lookup: bool = True,
                 answers: AnswerStore | None = None):
        """`answers`: past answers another drafter of this engine already holds (shared, not
        read again from `history_path`, which both then write)."""
        self.alpha = alpha
        self.min_prob = min_prob
        self.start_run = start_run
        self.max_run = max_run
        self.run = start_run
        self.request = RequestStore()
        self.answers = answers if answers is not None else AnswerStore(max_history_tokens)
        self.history_path = history_path
        self.lookup = PromptLookupDrafter() if with_lookup else None
        self.records: dict[str, SourceRecord] = {}
        self.last: Proposal = Proposal()
        self.last_source = ""  # "request", "history" or "lookup": where the last proposal came from
        if answers is None and history_path is not None and history_path.exists():
            self._read_history(history_path, n_vocab if n_vocab is not None else 1 << 31)

    def _read_history(self, path: Path, n_vocab: int) -> None:
        """Past answers from the file; one warning line and an empty store when it cannot be
        used (a damaged file is set aside, not overwritten by the next answer)."""
        try:
            self.answers.load(path, n_vocab)
            return
        except DamagedHistory as e:
            try:
                kept = f"set aside as {set_aside(path).name}"
            except OSError as moved:
                kept = f"not set aside either ({moved.strerror or moved})"
            log.warning("draft history %s is damaged (%s): %s; starting empty", path, e, kept)
        except OSError as e:
            log.warning("draft history %s could not be read (%s); starting empty", path, e.strerror or e)
        self.answers.clear()

    # -- Drafter API ------------------------------------------------------------------------
    @property
    def history_drafter(self) -> "SuffixDrafter":
        return self

    def begin(self, prompt: Sequence[int]) -> None:
        self.request = RequestStore(prompt)
        self.run = self.start_run
        self.records = {}
        if self.lookup is not None:
            self.lookup.begin(prompt)

    def propose(self, context: Sequence[int], k: int, sampler: Sampler, rules: DraftContext = NO_RULES) -> Proposal:
        self._sync(context)
        if k <= 0 or not context:
            return Proposal()
        end = len(context)
        hashes = suffix_hashes(self.request.tokens, end)
        cap = k if rules.trimmed_by_caller else min(k, self.run)
        mine = self._best(hashes, cap, lambda n, h: self.request.find(n, h, end), self.request.rows)
        past = self._best(hashes, cap, self.answers.find, self.answers.rows)
        best, where = (mine, "request") if mine.score >= past.score else (past, "history")
        conf = [p * (m / (m + 1.0)) for p, m in zip(best.probs, range(best.match_len, best.match_len + len(best.probs)))]
        prop = Proposal(best.tokens, [None] * len(best.tokens), conf, f"suffix:{where}")
        if self.lookup is not None:
            other = self.lookup.propose(context, k, sampler, rules)
            if other.tokens and self._expected(other, "lookup") > self._expected(prop, where):
                prop, where = Proposal(other.tokens, other.dists, other.confidence, "lookup"), "lookup"
        self.last, self.last_source = prop, where if prop.tokens else ""
        return prop

    def _expected(self, prop: Proposal, source: str) -> float:
        if not prop.tokens:
            return 0.0
        return self.records.setdefault(source, SourceRecord()).expected(prop.confidence or [0.5] * len(prop.tokens))

    def feedback(self, drafted: int, accepted: int) -> None:
        if drafted == 0:
            return
        if self.last_source:
            self.records.setdefault(self.last_source, SourceRecord()).observe(self.last.confidence or [], drafted, accepted)
        if self.last_source == "lookup" and self.lookup is not None:
            self.lookup.feedback(drafted, accepted)
            return
        self.run = min(self.run * 2, self.max_run) if accepted == drafted else max(1, accepted)

    def finish(self, prompt: Sequence[int], generated: Sequence[int]) -> None:
        """Learn the answer, after the prompt's last few tokens (the next request that ends
        the same way, a chat template's assistant header, finds its start); keep it on disk
        when a history file was given."""
        if len(generated) < 2:
            return
        self.answers.add([*prompt[max(0, len(prompt) - LEAD_IN) :], *generated])
        if self.history_path is not None:
            try:
                self.answers.save(self.history_path)
            except OSError as e:
                log.warning("draft history not saved to %s (%s)", self.history_path, e.strerror or e)

    def clear_history(self) -> None:
        """Forget past answers, in memory and on disk."""
        self.answers.clear()
        if self.history_path is not None:
            self.history_path.unlink(missing_ok=True)
            damaged_path(self.history_path).unlink(missing_ok=True)

    # -- internals ----------------------------------------------------------------------------
    def _sync(self, context: Sequence[int]) -> None:
        """Bring the request store up to `context` (a different context starts it over)."""
        toks = self.request.tokens
        n_old = len(toks)
        if len(context) < n_old or (n_old and (context[n_old - 1] != toks[-1] or context[0] != toks[0])):
            self.request = RequestStore(context)
            return
        if len(context) > n_old:
            self.request.extend(context[n_old:])

    def _best(self, hashes: dict[int, int], cap: int, find, rows) -> Draft:
        """The best-scoring draft over the match lengths present, longest first: a draft
        cannot score more than its length, so shorter matches are tried only while their
        cap could still beat the best so far."""
        present = [n for n in MATCH_LENGTHS if n in hashes]
        lo, hi = 0, len(present)  # the longest present match: matches nest, so binary search
        found: dict[int, list[int]] = {}
        while lo < hi:
            mid = (lo + hi) // 2
            pos = find(present[mid], hashes[present[mid]])
            if pos:
                found[present[mid]] = pos
                lo = mid + 1
            else:
                hi = mid
        best = Draft()
        for n in reversed(present[:lo]):
            limit = min(cap, max(1, int(self.alpha * n)))
            if limit <= best.score:
                break
            pos = found.get(n)
            if pos is None:
                pos = find(n, hashes[n])
            d = walk(rows(pos, limit), n, limit, self.min_prob)
            if d.score > best.score:
                best = d
        return best
