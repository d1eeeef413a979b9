"""Constrained output: a GBNF grammar applied to the target's distribution, exactly, under speculation.

The grammar (llama.cpp's GBNF, root rule `root`) is run by llama.cpp's own grammar sampler
through the C API. `GrammarState` is one grammar's position in the text written so far; it
only ever advances by tokens the target has *accepted*, in order: verification decides row i
only after drafts[:i] were accepted, so row i's state is the committed state plus those
drafts, and a rejected draft never enters it (nothing to undo). The constrained distribution
is the usual one over the masked row (disallowed tokens at -inf, then the usual filters), so:

* greedy: the constrained argmax. Exact fast path: if the grammar allows the unconstrained
  argmax, that token is the constrained argmax; else the best allowed token among the top 64
  (exact when its logit is above the 64th's); only else the whole row is masked.
* sampling: each verify row draws the target's own token x from the constrained distribution
  and accepts the draft iff x equals it: the p/q rule with a one-hot q, exact whatever
  drafted the token (a sampled model draft's q is not needed), and free of p(d), whose
  normaliser Z_allowed would mean masking the whole vocabulary for every drafted row. With
  temperature alone a draw takes tokens from the unmasked distribution until the grammar
  allows one (rejection sampling), and after DRAW_TRIES draws from the masked one:
  restricted to allowed tokens, softmax(row / T) is softmax(masked / T), so each branch,
  and so the mixture, is exactly the masked distribution. Truncation (top-k/p, min-p) of
  the masked row is not the truncated unmasked row restricted: `truncated` decides it from
  the best-ranked tokens when they settle it exactly, else the whole row is masked.

JSON schemas become GBNF through llama-cpp-python's own converter, checked node by node
(`schema_grammar`): a keyword it would skip is refused, so the output always matches. The
llama.cpp calls (the grammar sampler, the parser's reason) are in the seam:
engine.llamacpp.grammar_sampler.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ...errors import TandemError
from .finite import check_top
from ...llamacpp.grammar_sampler import TOKEN_DATA, GrammarSampler, parse_error
from ...llamacpp.llama import Closing
from .sampler import Dist, Sampler, SamplingParams, Verification, distribution

if TYPE_CHECKING:  # pragma: no cover
    from ...llamacpp.llama import Model

TOP_M = 64  # greedy: candidates checked before masking a whole row
TOP_M_TRUNCATED = 4096  # sampling with top-k/p or min-p: the most ranks checked before masking a whole row
DRAW_TRIES = 16  # sampling, temperature alone: unmasked draws tried before masking a whole row


class GrammarError(TandemError):
    """A grammar or JSON schema that cannot be used (the message names the field and the fault)."""


def json_schema_grammar(schema: Any, field: str = "json_schema") -> str:
    """GBNF for a JSON schema (a dict or its JSON text), by llama-cpp-python's converter with
    every keyword enforced or refused (`schema_grammar`); errors name the schema `field`
    (the request field that gave it, in the words of the API that was called)."""
    if isinstance(schema, (str, bytes)):
        try:
            schema = json.loads(schema)
        except ValueError as e:
            raise GrammarError(f"{field} is not valid JSON: {e}") from None
    if isinstance(schema, bool) or not isinstance(schema, dict):
        raise GrammarError(f"{field} must be a JSON object (a schema), got {type(schema).__name__}")
    from ...llamacpp.schema_grammar import SchemaUnsupported, schema_to_gbnf

    try:
        text = schema_to_gbnf(schema)
    except SchemaUnsupported as e:
        raise GrammarError(f"{field}: {e}"[:400]) from None
    except RecursionError:
        raise GrammarError(f"{field} is nested too deeply to be turned into a grammar") from None
    except Exception as e:  # the converter raises assorted types for unsupported schemas
        detail = str(e) or type(e).__name__
        raise GrammarError(f"{field} cannot be turned into a grammar: {detail}"[:300]) from None
    check_grammar(text, field=field)
    return text


JSON_OBJECT_SCHEMA: dict[str, Any] = {"type": "object"}  # OpenAI's json_object mode: any JSON object


def check_grammar(text: Any, field: str = "grammar") -> str:
    """`text` if it is a GBNF grammar llama.cpp parses (with a `root` rule); else a GrammarError."""
    if not isinstance(text, str):
        raise GrammarError(f"{field} must be GBNF grammar text (a string), got {type(text).__name__}")
    if not text.strip():
        raise GrammarError(f"{field} is empty: give GBNF text with a `root` rule")
    error = parse_error(text)
    if error is None:
        return text
    raise GrammarError(f"{field} is not a valid GBNF grammar: {error}"[:400])


class GrammarState(Closing):
    """One grammar's position in the text written so far, for one model's vocabulary."""

    def __init__(self, model: "Model", text: str, *, _smpl: GrammarSampler | None = None):
        self.model = model
        self.text = text
        if _smpl is None:
            check_grammar(text)
            _smpl = GrammarSampler.load(model, text)
            if _smpl is None:  # pragma: no cover - parsed without a vocabulary a moment ago
                raise GrammarError("grammar: llama.cpp could not load it for this model's vocabulary")
        self._smpl: GrammarSampler | None = _smpl
        self._ids = _ids(model.n_vocab)

    def clone(self) -> "GrammarState":
        assert self._smpl is not None, "a closed grammar"
        return GrammarState(self.model, self.text, _smpl=self._smpl.clone())

    def close(self) -> None:
        if self._smpl is not None:
            self._smpl.close()
            self._smpl = None

    def accept(self, token: int) -> None:
        """Advance by one token the grammar allows (an end-of-generation token ends the run: kept
        out). Checked first: llama.cpp aborts the process on a token its grammar forbids."""
        if self.model.is_eog(token):
            return
        if not 0 <= token < self.model.n_vocab or not self.allows(token):
            raise GrammarError(f"token {token} does not follow the grammar here")  # a bug upstream, not a crash
        self._smpl.accept(token)

    def _apply(self, data: np.ndarray) -> None:
        self._smpl.apply(data)

    def allowed(self, tokens: Sequence[int]) -> np.ndarray:
        """Which of `tokens` the grammar allows next (a bool per token)."""
        data = np.zeros(len(tokens), dtype=TOKEN_DATA)
        data["id"] = tokens
        self._apply(data)
        return np.isfinite(data["logit"])

    def allows(self, token: int) -> bool:
        return bool(self.allowed([token])[0])

    def mask(self, row: np.ndarray) -> np.ndarray:
        """A copy of `row` with every token the grammar forbids at -inf (the whole vocabulary checked)."""
        n = min(row.shape[0], self._ids.shape[0])
        data = np.empty(n, dtype=TOKEN_DATA)
        data["id"] = self._ids[:n]
        data["logit"] = row[:n]
        data["p"] = 0.0
        self._apply(data)
        out = np.full(row.shape[0], -np.inf, dtype=np.float32)
        out[:n] = data["logit"]
        if not np.isfinite(out).any():
            raise GrammarError("the grammar allows no token of this model's vocabulary here: "
                               "it asks for text the model cannot write")
        return out

    # -- choosing under the constraint -------------------------------------------------
    def argmax(self, row: np.ndarray) -> int:
        """The constrained argmax (ties to the lowest id, as np.argmax)."""
        a = int(np.argmax(row))
        check_top(float(row[a]))
        if self.allows(a):
            return a
        n = row.shape[0]
        if n > TOP_M:
            top = np.argpartition(-row, TOP_M - 1)[:TOP_M]
            ok = top[self.allowed(top.tolist())]
            if ok.size:
                best = row[ok].max()
                if best > row[top].min():  # strictly above the cut: nothing outside the top is as good
                    return int(ok[row[ok] == best].min())
        return int(np.argmax(self.mask(row)))

    def draw(self, row: np.ndarray, sampler: Sampler) -> int:
        """A token from the constrained distribution of `row` (exact; see the module docstring)."""
        p = sampler.params
        if not (p.top_k or p.top_p < 1.0 or p.min_p > 0.0):
            free = sampler.dist(row)
            for _ in range(DRAW_TRIES):
                x = sampler.draw(free)
                if self.allows(x):
                    return x
        else:
            d = truncated(self, row, p)
            if d is not None:
                return sampler.draw(d)
        return sampler.draw(sampler.dist(self.mask(row)))


def truncated(grammar: GrammarState, row: np.ndarray, p: SamplingParams) -> Dist | None:
    """`distribution(masked row, p)` with top-k, top-p or min-p, decided from the best-ranked
    tokens alone (their allowed ones, strictly above the rank's edge: nothing unchecked ties
    them) when that settles it for any grammar verdict on the rest; None: mask the whole row.
    Unchecked tokens' mass bounds the allowed total: top-p's cut must fall at the same place
    for the lowest and the highest total."""
    x = np.asarray(row, dtype=np.float64)
    n, m = x.shape[0], TOP_M
    xmax = float(x.max())
    check_top(xmax)
    e = np.exp(x - xmax)
    total = float(e.sum())
    while m <= min(n // 4, TOP_M_TRUNCATED):
        top = np.argpartition(-x, m - 1)[:m]
        top = top[np.argsort(-x[top], kind="stable")]
        edge = x[top[-1]]
        allowed = grammar.allowed(top.tolist())
        ok = top[allowed & (x[top] > edge)]
        unchecked = total - float(e[top].sum()) + float(e[top[allowed & (x[top] <= edge)]].sum())
        kept = _settled(x, e, ok, edge, unchecked, p) if ok.size else None
        if kept is not None:  # top-k: the k best allowed, for top-p and min-p next; else all three applied
            rest = SamplingParams(p.temperature, 0, p.top_p, p.min_p) if p.top_k else SamplingParams(p.temperature)
            d = distribution(x[kept], rest)
            return Dist(kept[d.ids], d.probs)
        m *= 8
    return None


def _settled(x: np.ndarray, e: np.ndarray, ok: np.ndarray, edge: float, unchecked: float,
             p: SamplingParams) -> np.ndarray | None:
    """The tokens the filters keep, if the checked ones decide it (else None). With top-k the
    k best allowed are the whole set the other filters then see (`distribution` finishes)."""
    if p.top_k:
        return ok[: p.top_k] if ok.shape[0] >= p.top_k else None
    kept = ok
    if p.top_p < 1.0:
        cum = np.cumsum(e[ok])
        lo = int(np.searchsorted(cum, p.top_p * cum[-1], side="left"))  # every unchecked token forbidden
        hi = int(np.searchsorted(cum, p.top_p * (cum[-1] + unchecked), side="left"))  # every one allowed
        if hi >= ok.shape[0] or lo != hi:
            return None
        kept = ok[: hi + 1]
    if p.min_p > 0.0:
        floor = p.min_p * e[ok[0]]  # ok[0] is the best allowed token: above every unchecked one
        if p.top_p >= 1.0 and np.exp(edge - x.max()) >= floor:
            return None  # an unchecked token may pass min-p
        kept = kept[e[kept] >= floor]
    return kept


_IDS: dict[int, np.ndarray] = {}  # n_vocab -> 0..n-1 as int32 (built once per vocabulary size)


def _ids(n: int) -> np.ndarray:
    if n not in _IDS:
        _IDS[n] = np.arange(n, dtype=np.int32)
    return _IDS[n]


def verify_constrained(
    drafts: Sequence[int],
    draft_dists: Sequence[Dist | None],
    logits: np.ndarray,
    sampler: Sampler,
    grammar: GrammarState,
    rows_out: list[np.ndarray] | None = None,
) -> Verification:
    """`sampling.verify` against the constrained target distribution, advancing `grammar` by
    the accepted drafts and the final token (the committed state; a rejected draft never
    enters it). `draft_dists` go unused: sampled drafts are checked by the one-hot rule
    (`_sample_row`). `rows_out`, if given, receives each decided row masked (for logprobs)."""
    k = len(drafts)
    if logits.shape[0] != k + 1:
        raise ValueError(f"need {k + 1} logit rows for {k} drafts, got {logits.shape[0]}")
    for i in range(k + 1):
        row = logits[i]
        d = drafts[i] if i < k else None
        if sampler.greedy:
            choice = grammar.argmax(row)
            ok = d == choice
        else:
            choice, ok = _sample_row(row, d, sampler, grammar)
        if rows_out is not None:
            rows_out.append(grammar.mask(row))
        if d is not None and ok:
            grammar.accept(d)
            continue
        grammar.accept(choice)
        return Verification(i, choice, d is not None)
    raise AssertionError("unreachable: the last row always decides")  # pragma: no cover


def _sample_row(row: np.ndarray, d: int | None, sampler: Sampler, grammar: GrammarState) -> tuple[int, bool]:
    """(token, draft accepted) for one row: the target's own constrained draw x, the draft
    accepted iff x == d. This is the p/q rule with a one-hot q (accept with p(d), else a
    draw from p without d), exact whatever drafted d and however, and it needs no p(d), whose
    normaliser would mean masking the whole vocabulary (see the module docstring)."""
    x = grammar.draw(row, sampler)
    return x, d is not None and x == d
