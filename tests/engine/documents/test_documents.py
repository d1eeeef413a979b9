"""Documents in, without a window: every kind reads to text (tables as Markdown tables), a file
without text is refused in one line naming it, and `tandem generate --attach` puts the files
after the prompt in the app's block format (one line and exit 2 for a scanned PDF)."""

from __future__ import annotations

import zipfile

import pytest

from conftest import require_real
from document_files import FACT, WRITERS, scanned_pdf, text_pdf
from engine.cli.main import main as cli
from engine.documents import attachment_block, read_document, read_documents
from engine.documents.model import markdown_sections, markdown_table
from engine.errors import DocumentError, DocumentErrors

pytest.importorskip("pypdf")
pytest.importorskip("docx")


@pytest.mark.parametrize("kind, expect_kind, unit", [
    ("pdf", "PDF", "page"), ("docx", "DOCX", "section"), ("html", "HTML", "section"), ("xlsx", "XLSX", "sheet"),
    ("pptx", "PPTX", "slide"), ("ods", "ODS", "sheet"), ("epub", "EPUB", "chapter"), ("rtf", "RTF", "part"),
])
def test_every_kind_reads_to_its_text(tmp_path, kind, expect_kind, unit):
    doc = read_document(WRITERS[kind](tmp_path / f"file.{kind}"))
    assert doc.kind == expect_kind and doc.unit == unit and doc.name == f"file.{kind}"
    assert FACT in doc.text or "| Teal paint | 12 |" in doc.text


def test_tables_become_markdown_tables_and_scripts_are_dropped(tmp_path):
    docx = read_document(WRITERS["docx"](tmp_path / "memo.docx")).text
    assert docx.startswith("# Memo\n\n" + FACT) and "| Region | Sales |\n|---|---|\n| North | 42 |" in docx
    html = read_document(WRITERS["html"](tmp_path / "page.html")).text
    assert "# Notes" in html and "| k | v |\n|---|---|\n| a | 1 |" in html and "hidden" not in html
    sheet = read_document(WRITERS["xlsx"](tmp_path / "b.xlsx")).text
    assert sheet == "## Sheet: Budget\n\n| Item | Cost |\n|---|---|\n| Teal paint | 12 |"
    assert markdown_table([["a|b", None], ["x\ny", 3], [None, None]]) == "| a\\|b |  |\n|---|---|\n| x y | 3 |"


def test_pages_and_sections_can_be_chosen(tmp_path):
    doc = read_document(text_pdf(tmp_path / "r.pdf", ["one", "two", "three", "four"]))
    assert [s.title for s in doc.sections] == ["Page 1", "Page 2", "Page 3", "Page 4"]
    part = doc.excerpt([0, 1, 3])
    assert part.name == "r.pdf (pages 1-2, 4)" and part.text == "one\n\ntwo\n\nfour"
    assert doc.excerpt([0, 1, 2, 3]) is doc
    md = markdown_sections("intro\n# A\ntext\n```\n# not a heading\n```\n# B\nmore")
    assert [s.title for s in md] == ["Beginning", "A", "B"]


def test_a_text_file_reads_exactly_as_it_is(tmp_path):
    body = "\n".join(f"line {i}" for i in range(300)) + "\n"
    (tmp_path / "log.txt").write_text(body)
    doc = read_document(tmp_path / "log.txt")
    assert doc.text == body and len(doc.sections) == 3 and doc.sections[1].title == "Lines 121-240"


def test_files_without_text_are_refused_in_one_line_naming_them(tmp_path):
    cases = {
        "scan.pdf": (lambda p: scanned_pdf(p), "no text layer"),
        "photo.png": (lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 32), "PNG image has no text"),
        "old.doc": (lambda p: p.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 64), "old binary Office"),
        "x.bin": (lambda p: p.write_bytes(b"\x81\xfe\x00\xff"), "not a UTF-8 text file"),
        "broken.docx": (lambda p: p.write_bytes(b"PK\x03\x04 not really a zip"), "not a readable DOCX file"),
        "files.zip": (lambda p: _zip(p), "a zip archive, not a document"),
    }
    for name, (make, says) in cases.items():
        make(tmp_path / name)
        with pytest.raises(DocumentError) as e:
            read_document(tmp_path / name)
        assert str(e.value).startswith(f"{name}: ") and says in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(DocumentErrors) as e:
        read_documents([tmp_path / "scan.pdf", tmp_path / "photo.png"])
    assert str(e.value).startswith("2 files cannot be attached: scan.pdf: ") and "; photo.png: " in str(e.value)


def _zip(path):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("a.txt", "text")


def test_a_damaged_document_is_one_line(tmp_path):
    with zipfile.ZipFile(tmp_path / "bad.docx", "w") as z:
        z.writestr("word/document.xml", "<not-xml")
    with pytest.raises(DocumentError, match=r"^bad\.docx: not a readable DOCX file \("):
        read_document(tmp_path / "bad.docx")


def _capture_prompt(monkeypatch) -> list[str]:
    import engine.cli.main as c

    seen: list[str] = []
    real = c._request
    monkeypatch.setattr(c, "_request", lambda args, prompt, draft: seen.append(prompt) or real(args, prompt, draft))
    return seen


@pytest.mark.parametrize("kind", ["pdf", "docx", "html"])
def test_generate_attaches_a_document_as_the_app_does(tmp_path, monkeypatch, capsys, tiny_target, kind):
    f = WRITERS[kind](tmp_path / f"notes.{kind}")
    seen = _capture_prompt(monkeypatch)
    assert cli(["generate", "what colour?", "--attach", str(f), "--target", str(tiny_target), "--max-tokens", "3"]) == 0
    doc = read_document(f)
    assert seen == [attachment_block(f"notes.{kind}", doc.text) + "\n\nwhat colour?"]  # files first, as the app
    assert "Traceback" not in capsys.readouterr().err


def test_race_takes_several_attachments(tmp_path, monkeypatch, tiny_target):
    a, b = WRITERS["pdf"](tmp_path / "a.pdf"), WRITERS["xlsx"](tmp_path / "b.xlsx")
    seen = _capture_prompt(monkeypatch)
    assert cli(["race", "sum it up", "--attach", str(a), "--attach", str(b), "--target", str(tiny_target),
                "--draft", "lookup", "--max-tokens", "2"]) == 0
    assert seen and seen[0].startswith("Attached file `a.pdf`:") and "\n\nAttached file `b.xlsx`:" in seen[0]
    assert seen[0].endswith("\n```\n\nsum it up")


def test_a_pdf_without_text_is_one_line_and_exit_2(tmp_path, capsys):
    scan = scanned_pdf(tmp_path / "scan.pdf")
    assert cli(["generate", "read this", "--attach", str(scan), "--target", "no-such-model.gguf"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("tandem: error: scan.pdf: no text layer"), err
    (tmp_path / "p.jpg").write_bytes(b"\xff\xd8\xff\xe0" + b"\0" * 16)
    assert cli(["generate", "x", "--attach", str(scan), "--attach", str(tmp_path / "p.jpg"), "--target", "t.gguf"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "2 files cannot be attached" in err and "p.jpg: a JPEG image" in err


@pytest.mark.real
@pytest.mark.slow
def test_the_real_model_answers_from_the_document(tmp_path, capsys):
    target = require_real("smollm2-135m-instruct-q4_1")
    f = text_pdf(tmp_path / "notes.pdf", ["Project codename: BLUEBIRD. " + FACT])
    assert cli(["generate", "What is the project codename? Answer with the codename only.", "--attach", str(f),
                "--chat", "--target", str(target), "--draft", "none", "--max-tokens", "12"]) == 0
    assert "BLUEBIRD" in capsys.readouterr().out.upper()
