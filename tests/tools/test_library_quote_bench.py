"""The Library's quote-heavy bench holds together: the suite's questions are what its generator
makes, its two sets share no document, each question's expected file and words are in the
folder it writes, and a run on a tiny model prints the table, records every field and checks
that greedy answers are alike under every config (a parting is flagged with its margin; one not
at a near-tie fails the run)."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from tools import library_quote_bench as qb
from tools.library_quote_suite.documents import SETS, questions, write_folder

pytest.importorskip("pypdf")
pytest.importorskip("docx")
pytest.importorskip("openpyxl")

ROW_FIELDS = {"id", "set", "kind", "config", "rep", "wall_s", "ttft_s", "engine_ttft_s", "decode_tps", "prompt_tokens",
              "generated", "drafted", "accepted", "accepted_by", "drafted_from_sources", "sources", "right_file",
              "answer_holds", "text", "tokens"}


def test_the_jsonl_is_the_generators_and_the_sets_share_no_document():
    loaded = qb.load_questions("all")
    made = [asdict(q) for spec in SETS for q in questions(spec)]
    assert loaded == made  # run `python -m tools.library_quote_suite.documents --jsonl` after changing the generator
    files = {s: {q["file"] for q in loaded if q["set"] == s} for s in ("tuning", "heldout")}
    assert files["tuning"] and files["heldout"] and not files["tuning"] & files["heldout"]
    assert not {q["id"] for q in loaded if q["set"] == "tuning"} & {q["id"] for q in loaded if q["set"] == "heldout"}
    assert {q["kind"] for q in loaded} == set(qb.KINDS)
    assert [q["kind"] for q in qb.load_questions("heldout", per_kind=1)] == ["quote", "list", "table"]


def test_each_question_finds_its_file_and_words_in_the_folder(tmp_path):
    from engine.library import Library

    write_folder(tmp_path / "docs")
    with Library(tmp_path / "docs", tmp_path / "index.sqlite3") as lib:
        assert lib.update().files == 10
        for q in qb.load_questions("all"):
            hits = lib.search(q["question"], 6)
            assert hits[0].path == q["file"], q["id"]
            assert qb.holds(" ".join(h.text for h in hits if h.path == q["file"]), q["answer_has"]), q["id"]


def test_a_tiny_run_prints_the_table_and_every_row_and_checks_exactness(tiny_target, tiny_draft, tmp_path, capsys):
    out = tmp_path / "rows.json"
    rc = qb.main(["--target", str(tiny_target), "--draft", str(tiny_draft), "--set", "tuning", "--per-kind", "1",
                  "--repeat", "1", "--max-tokens", "6", "--ctx", "2048", "--json", str(out)])
    printed = capsys.readouterr().out
    got = json.loads(out.read_text(encoding="utf-8"))
    rows = got["rows"]
    assert len(rows) == 3 * 3 and all(ROW_FIELDS <= set(r) for r in rows)
    assert {(r["kind"], r["config"]) for r in rows} == {(k, c) for k in qb.KINDS for c in qb.CONFIGS}
    assert all(r["generated"] >= 1 and r["wall_s"] >= r["ttft_s"] > 0 for r in rows)
    assert all(r["accepted"] == 0 for r in rows if r["config"] == "none")
    for kind in qb.KINDS:
        assert f"| tuning | {kind} | none | 1 |" in printed and f"| tuning | {kind} | auto | 1 |" in printed
    assert "vs none (range)" in printed and "accepted by drafter" in printed
    assert rc == 0 and got["differences"] == [] and "every config answered alike" in printed  # greedy is exact

    changed = [dict(r) for r in rows]
    lookup = next(r for r in changed if r["config"] == "lookup")
    lookup["text"] += " and more"
    lookup["tokens"] = lookup["tokens"][:-1] + [lookup["tokens"][-1] + 1]
    flagged = qb.exactness(changed)
    assert len(flagged) == 1 and not flagged[0]["near_tie"]
    assert flagged[0]["line"].startswith(f"{lookup['id']} rep 0: lookup parted from none at character")
    from engine.decoding.quality import Divergence

    tie = qb.exactness(changed, lambda base, r: Divergence(len(r["tokens"]) - 1, 0.05, True, 1, 2))
    assert tie[0]["near_tie"] and tie[0]["margin"] == 0.05 and "margin there 0.050: a near-tie" in tie[0]["line"]


def test_a_difference_fails_the_run(tiny_target, tmp_path, capsys, monkeypatch):
    real = qb.run_once

    def skewed(eng, ask, q, config, draft, max_tokens):
        row = real(eng, ask, q, config, draft, max_tokens)
        return {**row, "text": row["text"] + "!"} if config == "auto" else row

    monkeypatch.setattr(qb, "run_once", skewed)
    rc = qb.main(["--target", str(tiny_target), "--set", "heldout", "--per-kind", "1", "--repeat", "1",
                  "--max-tokens", "2", "--ctx", "2048"])
    printed = capsys.readouterr().out
    assert rc == 1 and "3 difference(s), 0 at near-ties, 3 NOT at a near-tie" in printed
    assert "auto parted from none" in printed


def test_a_missing_model_or_an_unwritable_folder_is_one_line(tiny_target, tmp_path, capsys):
    assert qb.main(["--target", str(tmp_path / "nope.gguf"), "--per-kind", "1", "--repeat", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("library_quote_bench: error: ") and err.count("\n") == 1
    (tmp_path / "a-file").write_text("x")
    assert qb.main(["--target", str(tiny_target), "--folder", str(tmp_path / "a-file"), "--repeat", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("library_quote_bench: error: ") and err.count("\n") == 1
