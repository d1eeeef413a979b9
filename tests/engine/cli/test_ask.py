"""`tandem ask QUESTION --folder DIR`: the folder indexed before each question, the right
brief among `sources`, a file added afterwards found on the next ask, the sources numbered in
the prompt within the context, the free drafters drafting by default, bad input in one line."""

from __future__ import annotations

import json

import pytest

from brief_files import Brief, brief_folder, write_brief
from conftest import require_real
from engine.cli.main import main as cli

pytest.importorskip("pypdf")
pytest.importorskip("docx")
pytest.importorskip("openpyxl")


@pytest.fixture(scope="module")
def briefs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ask") / "briefs"
    return folder, brief_folder(folder)


def _ask(capsys, *args: str) -> dict:
    assert cli(["ask", *args, "--json"]) == 0
    out = capsys.readouterr().out
    return json.loads(out)


def _prompts(monkeypatch) -> list:
    """The requests `ask` makes, as made."""
    from engine.decoding.request import GenerationRequest

    seen: list = []
    real = GenerationRequest.from_options.__func__
    monkeypatch.setattr(GenerationRequest, "from_options",
                        classmethod(lambda cls, prompt, **kw: seen.append((prompt, kw)) or real(cls, prompt, **kw)))
    return seen


def test_ask_json_names_the_right_brief_and_finds_one_added_later(briefs, tmp_path, capsys, monkeypatch, tiny_target):
    folder, all_briefs = briefs
    kestrel = next(b for b in all_briefs if b.project == "Kestrel")
    seen = _prompts(monkeypatch)
    got = _ask(capsys, "Who leads project Kestrel and what is its budget?", "--folder", str(folder),
               "--target", str(tiny_target), "--max-tokens", "6")
    assert isinstance(got["text"], str) and got["stats"]["generated_tokens"] >= 1
    assert got["sources"][0]["file"] == kestrel.file and got["sources"][0]["n"] == 1
    assert set(got["sources"][0]) >= {"file", "score"} and ("page" in got["sources"][0] or "section" in got["sources"][0])
    assert got["library"]["files"] == 40 and got["library"]["unreadable"] == []
    prompt, kw = seen[-1]
    assert f"[1] {kestrel.file}, " in prompt and kestrel.lead in prompt and "[1] or [2]" in prompt
    assert kw["draft_model"] == "suffix" and kw["lookahead"] == "auto" and kw["chat"]  # the free drafters read the sources

    extra = Brief("Quetzal", "Ines Duarte", "999,000 EUR", "brief-quetzal.html")
    write_brief(folder, extra)
    got = _ask(capsys, "Who leads project Quetzal?", "--folder", str(folder), "--target", str(tiny_target),
               "--max-tokens", "2", "--draft", "none", "--lookahead", "0")
    assert got["sources"][0]["file"] == "brief-quetzal.html"
    assert (got["library"]["added"], got["library"]["files"]) == (1, 41)
    assert seen[-1][1]["draft_model"] is None
    (folder / extra.file).unlink()


def test_sources_fill_only_what_the_context_leaves_the_answer(briefs, capsys, tiny_target):
    folder, _ = briefs
    got = _ask(capsys, "project budget lead", "--folder", str(folder), "--target", str(tiny_target), "--top", "30",
               "--ctx", "2048", "--max-tokens", "100")
    assert 1 <= len(got["sources"]) < 30
    assert got["stats"]["prompt_tokens"] <= 2048 - 100


def test_the_answer_streams_then_the_sources(briefs, capsys, tiny_target):
    folder, _ = briefs
    assert cli(["ask", "Who leads project Lynx?", "--folder", str(folder), "--target", str(tiny_target),
                "--max-tokens", "4"]) == 0
    out, err = capsys.readouterr()
    assert "\nSources:\n[1] brief-lynx.xlsx, sheet Brief (score " in out
    assert "tok/s" in err and "Traceback" not in err


@pytest.mark.parametrize("args, says", [
    (["q?", "--folder", "{tmp}/nowhere"], "nowhere: no such folder"),
    (["q?", "--folder", "{tmp}/empty"], "empty: no document Tandem reads in it"),
    (["q?", "--folder", "{tmp}/empty", "--top", "0"], "--top must be in 1..100, got 0"),
    (["  ", "--folder", "{tmp}/empty"], "the question is empty"),
    (["q?", "--folder", ""], "--folder is empty"),
    (["@{tmp}/no-such-question.txt", "--folder", "{tmp}/empty"], "no-such-question.txt: cannot read prompt file"),
])
def test_bad_input_is_one_line_before_any_model_loads(tmp_path, capsys, monkeypatch, tiny_target, args, says):
    from engine.cli import rpc

    monkeypatch.setattr(rpc, "engine_for", lambda *a: pytest.fail("a model was loaded"))
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "photo.png").write_bytes(b"\x89PNG")
    assert cli(["ask", *[a.replace("{tmp}", str(tmp_path)) for a in args], "--target", str(tiny_target)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and says in err, err


def test_unreadable_files_are_named_in_one_warning(tmp_path, capsys, tiny_target):
    from document_files import scanned_pdf

    folder = tmp_path / "mixed"
    brief_folder(folder, 3)
    scanned_pdf(folder / "scan.pdf")
    assert cli(["ask", "Who leads project Aurora?", "--folder", str(folder), "--target", str(tiny_target),
                "--max-tokens", "2", "--json"]) == 0
    out, err = capsys.readouterr()
    unreadable = json.loads(out)["library"]["unreadable"]
    assert [u["file"] for u in unreadable] == ["scan.pdf"] and unreadable[0]["reason"].startswith("no text layer")
    assert "tandem: warning: 1 file(s) in the folder could not be read: scan.pdf (no text layer" in err


@pytest.mark.real
@pytest.mark.slow
def test_the_real_model_answers_from_the_right_brief(briefs, capsys):
    target = require_real("smollm2-135m-instruct-q4_1")
    folder, all_briefs = briefs
    kestrel = next(b for b in all_briefs if b.project == "Kestrel")
    got = _ask(capsys, "Who leads project Kestrel and what is its budget?", "--folder", str(folder),
               "--target", str(target), "--max-tokens", "40")
    assert [s["file"] for s in got["sources"]] == [kestrel.file]
    assert kestrel.lead.split()[-1] in got["text"]


def test_a_missing_model_is_said_before_the_folder_is_read(briefs, capsys):
    folder, _ = briefs
    assert cli(["ask", "Who leads project Lynx?", "--folder", str(folder), "--target", "no-such-model.gguf"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no-such-model.gguf" in err and "indexed" not in err, err


# -- ranking by meaning ------------------------------------------------------------------------
def test_the_catalogs_embedding_model_on_disk_ranks_by_meaning_too(briefs, capsys, monkeypatch, tiny_target,
                                                                  tiny_bert):
    """With the catalog's embedding model downloaded, `ask` embeds the passages (once) and fuses
    the rankings: the sources carry their cosine; `--embed-model none` is BM25 alone."""
    from engine.models import store

    real = store.locate_model
    monkeypatch.setattr(store, "locate_model", lambda spec, **kw: tiny_bert if spec.kind == "embedding" else real(spec, **kw))
    folder, all_briefs = briefs
    kestrel = next(b for b in all_briefs if b.project == "Kestrel")
    question = "Who leads project Kestrel and what is its budget?"
    got = _ask(capsys, question, "--folder", str(folder), "--target", str(tiny_target), "--max-tokens", "1",
               "--draft", "none")
    assert got["library"]["vectors"] == got["library"]["passages"] > 0
    assert all("cosine" in s and "score" in s for s in got["sources"])
    assert kestrel.file in [s["file"] for s in got["sources"]]
    again = _ask(capsys, question, "--folder", str(folder), "--target", str(tiny_target), "--max-tokens", "1",
                 "--draft", "none")
    assert again["library"]["embedded"] == 0  # kept from the first question
    plain = _ask(capsys, question, "--folder", str(folder), "--target", str(tiny_target), "--max-tokens", "1",
                 "--draft", "none", "--embed-model", "none")
    assert plain["sources"][0]["file"] == kestrel.file and all("cosine" not in s for s in plain["sources"])


def test_a_bad_embedding_model_is_one_line_and_an_embedding_model_is_no_target(tmp_path, capsys, monkeypatch,
                                                                              tiny_target):
    from engine.models import store

    folder = tmp_path / "b"
    brief_folder(folder, 2)
    bad = tmp_path / "embed.gguf"
    bad.write_bytes(b"not a model at all")
    assert cli(["ask", "Who leads project Aurora?", "--folder", str(folder), "--target", str(tiny_target),
                "--embed-model", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "embed.gguf" in err and "Traceback" not in err, err
    # the catalog's, damaged on disk, was not asked for: a warning, and the words alone rank
    real = store.locate_model
    monkeypatch.setattr(store, "locate_model", lambda spec, **kw: bad if spec.kind == "embedding" else real(spec, **kw))
    assert cli(["ask", "Who leads project Aurora?", "--folder", str(folder), "--target", str(tiny_target),
                "--max-tokens", "1", "--json"]) == 0
    out, err = capsys.readouterr()
    got = json.loads(out)
    assert got["library"]["vectors"] == 0 and all("cosine" not in s for s in got["sources"])
    assert "embed.gguf" in err and "passages are ranked by their words alone" in err, err
    monkeypatch.undo()
    assert cli(["ask", "Who leads project Aurora?", "--folder", str(folder),
                "--target", "nomic-embed-text-v1.5-q8_0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "is an embedding model" in err, err


def test_tandem_models_lists_the_embedding_model_apart_from_the_pairs(capsys):
    from engine.cli.main import main

    assert main(["models"]) == 0
    out = capsys.readouterr().out
    pairs, _, rest = out.partition("Embedding models")
    assert "nomic-embed-text" not in pairs
    assert "nomic-embed-text-v1.5-q8_0      146.1 MB  " in rest, rest
    assert "not downloaded: tandem pull nomic-embed-text-v1.5-q8_0" in rest or "on disk" in rest, rest
