"""The Library's quote-heavy suite (docs/benchmarks.md section 20): a seeded folder of analyst
documents (policies with numbered clauses, project briefs with deliverables, meeting minutes
with action items, a price table) in the formats the Library reads, and the questions that ask
to quote, list and give table rows from them, in a tuning set and a held-out set that share no
document. documents.py writes both (writers.py the files); tuning.jsonl and heldout.jsonl are its questions, kept in
the repository so a change to the generator shows in review.

May import: the standard library, the `docs` extra's writers (python-docx, openpyxl, pypdf) and tools.text_pdf.
"""
