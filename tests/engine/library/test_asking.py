"""A question's prompt: numbered sources within the token budget, the sources list an answer
carries, and the accepted draft tokens traced to the source they were copied from."""

from __future__ import annotations

from engine.documents import Document, Section
from engine.library import DraftRuns, drafted_from, fit_prompt, fit_to_context, source_entry, sources_lines
from engine.library.chunks import PASSAGE_CHARS, passages
from engine.library.search import Hit, query_terms


def _hit(path: str, text: str, unit: str = "page", anchor: str = "1", score: float = 1.0) -> Hit:
    return Hit(path, unit, anchor, text, score)


def _words(text: str) -> int:
    return len(text.split())


def test_the_prompt_numbers_the_sources_and_asks_for_citations():
    hits = [_hit("a.pdf", "Alpha is led by Ann.", anchor="2"), _hit("b.xlsx", "| Lead | Bo |", "sheet", "Brief")]
    ask = fit_prompt("Who leads Alpha?", hits, _words, 1000)
    assert ask.sources == tuple(hits)
    assert "[1] a.pdf, page 2:\nAlpha is led by Ann." in ask.text and "[2] b.xlsx, sheet Brief:\n| Lead | Bo |" in ask.text
    assert "[1]" in ask.text.split("Sources:")[0]  # the instruction says how to cite
    assert ask.text.endswith("Question: Who leads Alpha?")


def test_sources_are_chosen_within_the_budget_best_first_skipping_one_too_long():
    short, long_, other = _hit("a.md", "one two three"), _hit("b.md", "word " * 200), _hit("c.md", "four five")
    base = _words(fit_prompt("q?", [], _words, 10_000).text)
    ask = fit_prompt("q?", [short, long_, other], _words, base + 20)
    assert ask.sources == (short, other)  # the long one passed over, the next one still taken
    assert "[2] c.md" in ask.text
    assert fit_prompt("q?", [long_], _words, base + 20).sources == ()


def test_source_entries_say_page_or_section():
    assert source_entry(1, _hit("a.pdf", "x", "page", "3", 2.5)) == {"n": 1, "file": "a.pdf", "page": 3, "score": 2.5}
    assert source_entry(2, _hit("b.xlsx", "x", "sheet", "Budget"))["section"] == "Sheet Budget"
    assert source_entry(3, _hit("c.txt", "x", "lines", "4-9"))["section"] == "Lines 4-9"
    assert source_entry(4, _hit("d.md", "x", "section", "Overview"))["section"] == "Overview"
    assert sources_lines([_hit("a.pdf", "x", "page", "3", 2.5)]) == ["[1] a.pdf, page 3 (score 2.50)"]


def test_drafted_tokens_are_traced_to_the_source_holding_them():
    hits = [_hit("a.md", "Project Alpha is led by Ann Lee."), _hit("b.md", "The budget is 300,000 EUR.")]
    runs = [(" led by Ann Lee", 4), ("300,000 EUR", 3), ("the", 1), (" nowhere in them", 2)]
    assert drafted_from(runs, hits) == {1: 4, 2: 3}


def test_long_sections_are_cut_and_text_parts_keep_their_line_ranges():
    para = "word " * 100
    doc = Document("r.pdf", "PDF", (Section("Page 4", "\n\n".join([para] * 6)),), "page")
    cut = passages(doc)
    assert len(cut) > 1 and all(p.unit == "page" and p.anchor == "4" for p in cut)
    assert all(len(p.text) <= PASSAGE_CHARS for p in cut)
    lines = "\n".join(f"line {i} " + "x" * 50 for i in range(1, 121))
    text = Document("log.txt", "text", (Section("Lines 1-120", lines),), "part")
    parts = passages(text)
    assert parts[0].unit == "lines" and parts[0].anchor.startswith("1-") and parts[-1].anchor.endswith("-120")
    first, last = parts[1].anchor.split("-")
    assert parts[1].text.startswith(f"line {first} ") and parts[1].text.rstrip().split("\n")[-1].startswith(f"line {last} ")


def test_the_query_keeps_the_words_that_tell_passages_apart():
    assert query_terms("Who leads project Kestrel, and what is its budget?") == ["leads", "project", "kestrel", "budget"]
    assert query_terms("?!") == []


def test_the_prompt_fits_the_context_with_the_chat_templates_tokens_counted_once():
    template = 30  # what a chat template adds around the whole prompt

    def count(text: str, chat: bool) -> int:
        return _words(text) + (template if chat else 0)

    hits = [_hit(f"{n}.md", "word " * 40) for n in range(10)]
    base = _words(fit_prompt("q?", [], _words, 10_000).text)
    ask = fit_to_context(count, "q?", hits, True, base + template + 3 * 48)
    assert ask is not None and len(ask.sources) == 3 and count(ask.text, True) <= base + template + 3 * 48
    assert fit_to_context(count, "q?", hits, False, base + 3 * 48).sources == ask.sources
    assert fit_to_context(count, "q?", hits, True, base + template - 1) is None  # not even the question


def test_draft_runs_follow_the_stream():
    runs = DraftRuns()
    for text, prov in [("A", "plain"), (" led", "draft"), (" by", "draft"), (" Ann", "target"), (".", "draft")]:
        runs.add(text, prov)
    assert runs.end() == [(" led by", 2), (".", 1)]
