"""A question put to a library: the ranked passages that fit the prompt's budget, numbered,
with the instruction to cite them as [1], [2]; the sources list an answer carries; and which
source the accepted draft tokens were copied from (prompt lookup and the suffix draft read
the passages in the prompt, so a quoted answer is drafted from them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from .search import Hit

INSTRUCTION = ("Answer the question using only the numbered sources below. After each fact, cite the source it "
               "comes from by its number in square brackets, as [1] or [2]. If the sources do not hold the "
               "answer, say so.")
SLACK_TOKENS = 2  # a block tokenised alone may differ by a token at each seam from its place in the prompt


@dataclass(frozen=True)
class AskPrompt:
    text: str
    sources: tuple[Hit, ...]  # in the order they are numbered, [1] first


def source_block(n: int, hit: Hit) -> str:
    return f"[{n}] {hit.path}, {hit.where}:\n{hit.text.strip()}"


def render(question: str, hits: Sequence[Hit]) -> str:
    blocks = "\n\n".join(source_block(i + 1, h) for i, h in enumerate(hits))
    return f"{INSTRUCTION}\n\nSources:\n\n{blocks}\n\nQuestion: {question}" if hits else \
        f"{INSTRUCTION}\n\nSources: none found.\n\nQuestion: {question}"


def fit_prompt(question: str, hits: Sequence[Hit], count: Callable[[str], int], budget: int) -> AskPrompt:
    """The prompt holding as many of `hits` as `budget` tokens allow, best first; a passage
    too long for what is left is passed over for the next one. `count` is the target's token
    count of a text (the chat template's own tokens included when it renders the prompt)."""
    used = count(render(question, []))
    chosen: list[Hit] = []
    for h in hits:
        cost = count(source_block(len(chosen) + 1, h)) + SLACK_TOKENS
        if used + cost <= budget:
            chosen.append(h)
            used += cost
    return AskPrompt(render(question, chosen), tuple(chosen))


def fit_to_context(count: Callable[[str, bool], int], question: str, hits: Sequence[Hit], chat: bool,
                   budget: int) -> AskPrompt | None:
    """The prompt with the sources that fit `budget` tokens, or None when not even the question
    does. `count(text, chat)` is the target's token count of a text, raw or through its chat
    template. Passages are counted as raw text and the template's own tokens once; the whole
    prompt is then counted as it will be read, and the last source dropped while it is over."""
    base = render(question, [])
    template = max(0, count(base, chat) - count(base, False))
    ask = fit_prompt(question, hits, lambda text: count(text, False), budget - template)
    sources = list(ask.sources)
    while count(ask.text, chat) > budget:
        if not sources:
            return None
        sources.pop()
        ask = AskPrompt(render(question, sources), tuple(sources))
    return ask


def source_entry(n: int, hit: Hit) -> dict:
    """One entry of `--json`'s sources: the file, its page (a number) or section, the score (and
    the cosine to the question when vectors ranked it)."""
    entry: dict = {"n": n, "file": hit.path}
    if hit.unit == "page" and hit.anchor.isdigit():
        entry["page"] = int(hit.anchor)
    else:
        entry["section"] = hit.anchor if hit.unit in ("section", "chapter") else f"{hit.unit.capitalize()} {hit.anchor}"
    entry["score"] = hit.score
    if hit.cosine is not None:
        entry["cosine"] = hit.cosine
    return entry


def sources_lines(sources: Sequence[Hit]) -> list[str]:
    """The sources under an answer, one line each: "[1] briefs/aurora.docx, page 2 (score 7.31)",
    or with vectors "(fused score 0.0325, similarity 0.81)"."""
    return [f"[{i + 1}] {h.path}, {h.where} ({_score(h)})" for i, h in enumerate(sources)]


def _score(h: Hit) -> str:
    if not h.fused:
        return f"score {h.score:.2f}"
    return f"fused score {h.score:.4f}" + (f", similarity {h.cosine:.2f}" if h.cosine is not None else "")


MIN_RUN_CHARS = 4  # a shorter drafted run ("the ") could come from anywhere


class DraftRuns:
    """The answer's runs of consecutive accepted draft tokens, fed each token's text and
    provenance as it streams ("draft": accepted from a drafter)."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, int]] = []
        self._text, self._tokens = "", 0

    def add(self, text: str, provenance: str) -> None:
        if provenance == "draft":
            self._text, self._tokens = self._text + text, self._tokens + 1
        else:
            self.end()

    def end(self) -> list[tuple[str, int]]:
        if self._tokens:
            self.runs.append((self._text, self._tokens))
            self._text, self._tokens = "", 0
        return self.runs


def drafted_from(runs: Sequence[tuple[str, int]], sources: Sequence[Hit]) -> dict[int, int]:
    """Accepted draft tokens per source number whose text holds them verbatim: `runs` are the
    answer's runs of consecutive accepted draft tokens, (text, tokens). A run found in no
    source (drafted from the question or earlier answers) counts for none."""
    out: dict[int, int] = {}
    texts = [" ".join(h.text.split()) for h in sources]
    for text, tokens in runs:
        needle = " ".join(text.split())
        if len(needle) < MIN_RUN_CHARS:
            continue
        for i, body in enumerate(texts):
            if needle in body:
                out[i + 1] = out.get(i + 1, 0) + tokens
                break
    return out
