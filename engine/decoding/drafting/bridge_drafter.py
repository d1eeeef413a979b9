"""A draft model of another vocabulary, bridged through text.

Speculation verifies token ids, so a draft normally needs the target's vocabulary. Here
the draft never sees the target's ids: it continues the *text* written so far (kept in
its own tokens, re-tokenised only past a stable point, its KV cache synced by common
prefix like `ModelDrafter`'s), its proposal is turned back into text, and that text is
tokenised with the target's vocabulary after the target's last token (which may merge
with the proposal: then only the proposal's own text is tokenised). The target verifies
those ids as usual, so greedy output is exactly the target's.

Sampling stays exact with the standard rule by treating the bridged proposal as a
deterministic draft: q is one-hot on each proposed target token (`dists` None), so a
token x is accepted with probability p(x) and a rejection draws from p without x,
renormalised, which gives every token exactly its p. The draft drafts greedily (its
argmax proposals are also the ones most often accepted under that rule); its own
distribution is over other ids, so it could not serve as q anyway.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from .drafters import NO_RULES, ConfidenceGate, DraftContext, Drafter, Proposal
from .drafter_api import read_ahead
from ..sampling.finite import check_top
from ...llamacpp.llama import Model
from ...llamacpp.context import Context, common_prefix
from ...llamacpp.runtime import RuntimeParams
from ..sampling.sampler import Sampler

HOLD = 1  # target tokens left out of the stable point: the next tokens may change how they read


def _adds_space_prefix(model: Model) -> bool:
    """Whether the tokenizer adds a leading space to text it encodes (SentencePiece style)."""
    toks = model.tokenize("a", add_special=False)
    return bool(toks) and model.piece(toks[0]).startswith(b" ")


def _split_complete(data: bytes) -> tuple[bytes, bytes]:
    """`data` cut before a trailing incomplete UTF-8 character: (complete part, the rest).
    Invalid bytes elsewhere stay (they decode as U+FFFD): only the end can still grow."""
    for back in range(1, min(4, len(data)) + 1):
        b = data[-back]
        if b & 0xC0 == 0x80:
            continue  # a continuation byte: its lead is further back
        need = 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4 if b & 0xF8 == 0xF0 else 1
        return (data[:-back], data[-back:]) if need > back else (data, b"")
    return data, b""


class _Encoder:
    """Text -> token ids of one model, for text that continues other text: no BOS, and no
    space in front where a SentencePiece tokenizer would add one (it adds it to the first
    word: that token is spelled again without it, from the vocabulary or in bytes)."""

    def __init__(self, model: Model, *, parse_special: bool):
        self.model = model
        self.parse_special = parse_special
        self.space_prefix = _adds_space_prefix(model)
        self._ids: dict[bytes, int] | None = None  # piece -> id (built when first needed)

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        toks = self.model.tokenize(text, add_special=False, parse_special=self.parse_special)
        if not (self.space_prefix and toks):
            return toks
        first = self.model.piece(toks[0])
        if first == b" ":
            return toks[1:]  # the added space, as a token of its own
        if first.startswith(b" ") and not text.startswith(" "):
            return self._spell(first[1:]) + toks[1:]
        return toks

    def _spell(self, data: bytes) -> list[int]:
        """Ids for `data`: one token if the vocabulary has it, else its byte tokens."""
        if self._ids is None:
            m = self.model
            self._ids = {}
            for i in range(m.n_vocab):
                self._ids.setdefault(m.piece(i), i)
        one = self._ids.get(data)
        if one is not None:
            return [one]
        out = []
        for b in data:
            tok = self._ids.get(bytes([b]))
            if tok is None:
                return self.model.tokenize(data.decode("utf-8", errors="replace"), add_special=False)
            out.append(tok)
        return out


class BridgeDrafter(Drafter):
    """Drafts with a model of another vocabulary; proposes target token ids."""

    kind = "bridge"
    cost_class = "model"

    def __init__(self, draft: Model, target: Model, runtime: RuntimeParams | None = None, *, p_min: float = 0.0):
        self.model = draft
        self.target = target
        self.ctx = Context(draft, runtime)
        self.p_min = p_min
        self._draft_enc = _Encoder(draft, parse_special=True)  # the chat markup reaches the draft as markup
        self._target_enc = _Encoder(target, parse_special=False)
        self._reset()
        self._warm_up()

    def _warm_up(self) -> None:
        """One throwaway decode at load, as llama.cpp's own tools do: the first decode of a
        context sets up its compute buffers (a few hundred ms), which would otherwise land
        on the first step Auto tries a draft in, and make that probe look dearer than drafting is."""
        if self._committed:
            self.ctx.decode(self._committed[:1], logits="last")
            self.ctx.clear()

    def _reset(self) -> None:
        start = [self.model.bos] if self.model.add_bos and self.model.bos >= 0 else []
        self._seen: list[int] = []  # target tokens whose text is in `_committed`
        self._committed: list[int] = list(start)  # the draft's tokens for that text
        self._marks: list[tuple[int, int]] = [(0, len(start))]  # (len(_seen), len(_committed)) per commit

    @property
    def contexts(self) -> list[Context]:
        return [self.ctx]

    def relative_cost(self, target: Model) -> float:
        """A draft step plus the text round trip (two short tokenisations per proposal)."""
        return super().relative_cost(target) + 0.01

    # -- the draft's view of the text ------------------------------------------------------
    def _rollback(self, keep: int) -> None:
        """Forget commits past target position `keep` (another text, or an edited chat turn)."""
        while self._marks[-1][0] > keep:
            self._marks.pop()
        n_seen, n_draft = self._marks[-1]
        del self._seen[n_seen:], self._committed[n_draft:]

    def _draft_tokens(self, context: Sequence[int]) -> tuple[list[int], bytes]:
        """The draft's tokens for the text of `context`, and the bytes at its end the draft
        does not see (an incomplete character: its proposal must start with them)."""
        if common_prefix(self._seen, context) < len(self._seen):
            self._rollback(common_prefix(self._seen, context))
        tail = list(context[len(self._seen):])
        piece = self._context_piece
        n_commit = len(tail) - HOLD
        if n_commit > 0:
            data = b"".join(piece(t, special=True) for t in tail[:n_commit])
            if not _split_complete(data)[1]:  # else the stable point would split a character: later
                self._seen.extend(tail[:n_commit])
                self._committed.extend(self._draft_enc.encode(data.decode("utf-8", errors="replace")))
                self._marks.append((len(self._seen), len(self._committed)))
                tail = tail[n_commit:]
        complete, rest = _split_complete(b"".join(piece(t, special=True) for t in tail))
        return self._committed + self._draft_enc.encode(complete.decode("utf-8", errors="replace")), rest

    def _context_piece(self, token: int, special: bool = True) -> bytes:
        """The target's text of a context token for the draft: chat markup as text, the
        target's BOS left out (the draft has its own)."""
        return b"" if token == self.target.bos else self.target.piece(token, special=True)

    def unread(self, context: Sequence[int]) -> int:
        """In the draft's tokens (the text of `context` retokenised)."""
        tokens, _ = self._draft_tokens(context)
        return max(0, len(tokens) - 1 - common_prefix(self.ctx.tokens, tokens))

    def read(self, context: Sequence[int], limit: int | None = None,
             cancelled: "Callable[[], bool]" = lambda: False) -> int:
        """Read the next `limit` of the draft's tokens for the context's text (never the last)
        into the draft's KV cache; left unread: in the draft's tokens."""
        tokens, _ = self._draft_tokens(context)
        return read_ahead(self.ctx, tokens, limit, cancelled)

    # -- proposing ----------------------------------------------------------------------------
    def propose(self, context: Sequence[int], k: int, sampler: Sampler, rules: DraftContext = NO_RULES) -> Proposal:
        """Greedy draft ids turned into target ids through text. Of `rules` only the confidence
        gate applies: the logits processors and the grammar speak the target's ids."""
        if k <= 0 or not context:
            return Proposal()
        tokens, pending = self._draft_tokens(context)
        drafted, tops = self._draft(tokens, k, rules.confidence_gate)
        text = b"".join(self.model.piece(t) for t in drafted)
        if not text.startswith(pending):
            return Proposal()  # the draft did not finish the character the target began
        ends = np.cumsum([len(self.model.piece(t)) for t in drafted]) - len(pending)
        complete, _ = _split_complete(text)  # a character the draft left unfinished waits
        ids, target_ends = self._to_target(context, complete[len(pending):])
        ids = ids[:k]
        return Proposal(ids, [None] * len(ids), self._confidences(target_ends[: len(ids)], ends, tops))

    def _draft(self, tokens: list[int], k: int, gate: ConfidenceGate | None) -> tuple[list[int], list[float]]:
        """Up to k greedy draft tokens after `tokens`, with the draft's top probabilities."""
        ctx = self.ctx
        if len(tokens) + k > ctx.n_ctx:
            k = ctx.n_ctx - len(tokens)
        if k <= 0 or not tokens:
            return [], []
        keep = ctx.reuse_prefix(tokens)
        for _, logits in ctx.feed(tokens[keep:], last_logits=True):
            pass
        row = logits[0]
        out: list[int] = []
        tops: list[float] = []
        for i in range(k):
            tok = int(np.argmax(row))
            check_top(float(row[tok]))
            top = float(1.0 / np.exp(row - row[tok]).sum())
            if self.model.is_eog(tok) or (self.p_min > 0.0 and top < self.p_min):
                break
            keep_it, more = gate(i + 1, top) if gate is not None else (True, True)
            if not keep_it:
                break
            out.append(tok)
            tops.append(top)
            if not more or i == k - 1:
                break
            row = ctx.decode([tok], logits="last")[0]
        return out, tops

    def _to_target(self, context: Sequence[int], text: bytes) -> tuple[list[int], list[int]]:
        """Target ids for the proposal's bytes `text` (what follows the text of `context`),
        and each one's end in `text`.

        The proposal is tokenised together with the target's last token(s) (as many as make
        whole characters): when they come out unchanged, the ids after them are the
        proposal; when the last token merges with the proposal's start, the target has
        already committed to that token, so the proposal's text is tokenised on its own."""
        if not text:
            return [], []
        piece = self.target.piece
        for m in range(1, min(4, len(context)) + 1):
            base = context[-m:]
            head = b"".join(piece(t) for t in base)
            try:
                joined = (head + text).decode("utf-8")
                head.decode("utf-8")
            except UnicodeDecodeError:
                continue
            ids = self._target_enc.encode(joined)
            if head and ids[:m] == list(base):
                return self._with_ends(ids[m:])
            break
        try:
            return self._with_ends(self._target_enc.encode(text.decode("utf-8")))
        except UnicodeDecodeError:
            return [], []

    def _with_ends(self, ids: list[int]) -> tuple[list[int], list[int]]:
        return ids, [int(e) for e in np.cumsum([len(self.target.piece(t)) for t in ids])]

    @staticmethod
    def _confidences(target_ends: list[int], draft_ends: np.ndarray, tops: list[float]) -> list[float]:
        """Per target token, the chance the draft stood behind it: the product of the draft's
        top probabilities over the draft tokens that complete its text (given the ones before)."""
        out: list[float] = []
        done = 0  # draft tokens already accounted for
        for end in target_ends:
            upto = int(np.searchsorted(draft_ends, end)) + 1  # draft tokens needed to reach `end`
            upto = min(upto, len(tops))
            c = float(np.prod(tops[done:upto])) if upto > done else 0.99
            out.append(min(c, 0.99))
            done = max(done, upto)
        return out

    def close(self) -> None:
        self.ctx.close()
