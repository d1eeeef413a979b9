"""A folder of briefs in five formats indexed, kept current and searched: the project's own
brief ranks first, new, changed and deleted files are seen on the next update, unreadable
files are listed with why, a cancel keeps what was done, a watch re-reads only what changed."""

from __future__ import annotations

import os
import time

import pytest

from brief_files import Brief, brief, brief_folder, sentence, write_brief
from document_files import scanned_pdf
from engine.library import Library, index_path
from engine.library import indexer as indexer_mod

pytest.importorskip("pypdf")
pytest.importorskip("docx")
pytest.importorskip("openpyxl")


@pytest.fixture
def briefs(tmp_path):
    folder = tmp_path / "briefs"
    return folder, brief_folder(folder)


def _question(b: Brief) -> str:
    return f"Who leads project {b.project} and what is its budget?"


def _reads(monkeypatch) -> list[str]:
    """The files the indexer reads from now on."""
    seen: list[str] = []
    real = indexer_mod.read_document
    monkeypatch.setattr(indexer_mod, "read_document", lambda p, name=None: seen.append(name) or real(p, name))
    return seen


def test_each_projects_brief_ranks_first_in_every_format(briefs):
    folder, all_briefs = briefs
    assert {b.file.rsplit(".", 1)[1] for b in all_briefs} == {"docx", "xlsx", "pdf", "html", "md", "txt"}
    with Library(folder) as lib:
        report = lib.update()
        assert (report.added, report.files, report.unreadable, report.cancelled) == (40, 40, [], False)
        for b in all_briefs:
            hits = lib.search(_question(b), top=3)
            # the other briefs share only "project", "leads" and "budget": far below, left out
            # (a PDF's first page, only its file's name matching, may follow its second)
            assert {h.path for h in hits} == {b.file}, (b, hits)
            assert b.lead in hits[0].text and b.budget in hits[0].text


def test_passages_carry_their_anchor(briefs):
    folder, all_briefs = briefs
    by_ext = {b.file.rsplit(".", 1)[1]: b for b in all_briefs}
    with Library(folder) as lib:
        lib.update()
        where = {ext: lib.search(_question(b), 1)[0].where for ext, b in by_ext.items()}
    assert where["pdf"] == "page 2"  # the sentence naming the lead is on the second page
    assert where["xlsx"] == "sheet Brief"
    assert where["txt"] == "lines 1-3"
    assert where["docx"] == f"section Project {by_ext['docx'].project}"
    assert where["md"] == f"section Project {by_ext['md'].project}"


def test_new_changed_and_deleted_files_are_seen_on_the_next_update(briefs, monkeypatch):
    folder, all_briefs = briefs
    with Library(folder) as lib:
        lib.update()
        reads = _reads(monkeypatch)
        assert lib.update().unchanged == 40 and reads == []  # nothing opened when nothing changed
        extra = Brief("Quetzal", "Ines Duarte", "999,000 EUR", "later/brief-quetzal.docx")
        (folder / "later").mkdir()
        write_brief(folder, extra)
        report = lib.update()
        assert (report.added, report.unchanged, reads) == (1, 40, ["later/brief-quetzal.docx"])
        assert lib.search(_question(extra), 1)[0].path == "later/brief-quetzal.docx"

        changed = all_briefs[3]
        path = folder / changed.file
        path.write_text(path.read_text() + "\nProject lead changed to Nadia Petrova.\n")
        assert lib.update().changed == 1
        assert "Nadia Petrova" in lib.search("Nadia Petrova", 1)[0].text

        reads.clear()
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # same content, new time: not read again
        assert (lib.update().changed, reads) == (0, [])

        gone = all_briefs[7]
        (folder / gone.file).unlink()
        report = lib.update()
        assert (report.removed, report.files) == (1, 40)
        assert all(h.path != gone.file for h in lib.search(_question(gone), 40))


def test_unreadable_files_are_listed_with_why_and_the_rest_indexed(briefs):
    folder, _ = briefs
    scanned_pdf(folder / "scan.pdf")
    (folder / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    (folder / "photo.png").write_bytes(b"\x89PNG\r\n")  # not a document kind: left alone, not listed
    (folder / ".hidden.md").write_text("# Secret\n")
    with Library(folder) as lib:
        report = lib.update()
    assert report.files == 40
    reasons = dict(report.unreadable)
    assert sorted(reasons) == ["broken.docx", "scan.pdf"]
    assert reasons["scan.pdf"].startswith("no text layer")
    assert "DOCX" in reasons["broken.docx"] and "\n" not in reasons["broken.docx"]


def test_a_cancel_keeps_what_was_indexed_and_the_next_update_finishes(briefs):
    folder, _ = briefs
    steps: list[tuple[int, int, str]] = []
    with Library(folder) as lib:
        report = lib.update(progress=lambda n, total, name: steps.append((n, total, name)),
                            cancelled=lambda: len(steps) >= 5)
        assert report.cancelled and report.files == 5 and report.removed == 0
        assert [s[:2] for s in steps] == [(n, 40) for n in range(5)]
        report = lib.update()
        assert (report.added, report.unchanged, report.files, report.cancelled) == (35, 5, 40, False)


def test_the_index_lives_in_tandems_data_folder_one_file_per_folder(tmp_path):
    (tmp_path / "a" / "docs").mkdir(parents=True)
    (tmp_path / "b" / "docs").mkdir(parents=True)
    one, two = index_path(tmp_path / "a" / "docs"), index_path(tmp_path / "b" / "docs")
    assert one != two and one.parent == two.parent
    assert one.parent == __import__("engine.paths", fromlist=["x"]).library_dir()
    with Library(tmp_path / "a" / "docs") as lib:
        assert lib.index == one and one.exists()


def test_a_missing_folder_is_one_line(tmp_path):
    from engine.errors import DocumentError

    with pytest.raises(DocumentError, match="no such folder"):
        Library(tmp_path / "nowhere")
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(DocumentError, match="not a folder"):
        Library(tmp_path / "f.txt")


def _until(check, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.05)
    return False


def test_a_watched_library_rereads_only_what_changed(briefs, monkeypatch):
    pytest.importorskip("watchdog")
    folder, all_briefs = briefs
    with Library(folder, watch=True) as lib:
        assert lib.update().added == 40
        assert not _until(lambda: lib.watch.dirty, 0.5)  # the indexer's own reads mark nothing
        walks = []
        real_walk = indexer_mod.walk
        monkeypatch.setattr(indexer_mod, "walk", lambda f, *a: walks.append(f) or real_walk(f, *a))
        reads = _reads(monkeypatch)
        assert lib.update().files == 40 and (walks, reads) == ([], [])  # nothing changed: nothing touched
        extra = brief(40, "md")
        extra = Brief("Quetzal", extra.lead, extra.budget, "brief-quetzal.md")
        write_brief(folder, extra)
        (folder / all_briefs[0].file).unlink()
        (folder / ".cache").mkdir()
        (folder / ".cache" / "notes.md").write_text("# hidden, as the walk leaves it\n")
        assert _until(lambda: lib.watch.dirty)
        time.sleep(0.2)  # the write's last events
        report = lib.update()
        assert (report.added, report.removed, report.files) == (1, 1, 40)
        assert walks == [] and reads == ["brief-quetzal.md"]  # no walk of the folder
        assert lib.search(_question(extra), 1)[0].path == "brief-quetzal.md"
        assert sentence(extra) in lib.search(_question(extra), 1)[0].text


def test_a_library_holding_tandems_data_folder_never_reads_it(briefs, monkeypatch):
    """A home folder as a library, with Tandem's data folder inside it (macOS keeps it under
    ~/Library, not a hidden folder): the index, the metrics log and the calibration file written
    there on every question are neither indexed nor seen as changes to re-read."""
    pytest.importorskip("watchdog")
    folder, _ = briefs
    home = folder / "Application Support" / "tandem"
    monkeypatch.setenv("TANDEM_HOME", str(home))
    home.mkdir(parents=True)
    (home / "calibration.json").write_text('{"Tandem": "its own numbers"}')
    with Library(folder, watch=True) as lib:
        assert lib.index.is_relative_to(home)
        report = lib.update()
        assert report.added == 40 and report.files == 40  # the briefs only
        assert not any(h.path.startswith("Application Support") for h in lib.search("Tandem own numbers", 5))
        (home / "metrics.jsonl").write_text("{}\n")
        (home / "notes.md").write_text("# a file Tandem wrote\n")
        lib.update()  # commits to the index inside the data folder
        (folder / "new.md").write_text("# seen\n")
        assert _until(lambda: lib.watch.dirty)
        time.sleep(0.2)
        noted = set(lib.watch._noted)
        assert noted and all(not p.is_relative_to(home) for p in noted), noted
        lib.watch._noted.add(home / "notes.md")  # a change noted there all the same is passed over
        report = lib.update()
        assert (report.added, report.files) == (1, 41)  # new.md
        assert not any(h.path.startswith("Application Support") for h in lib.search("a file Tandem wrote", 5))


def test_a_thousand_files_index_once_and_the_next_update_opens_none(tmp_path, monkeypatch):
    folder = tmp_path / "many"
    for i in range(1000):
        sub = folder / f"d{i % 20}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"note{i}.md").write_text(f"# Note {i}\n\nquarterly report number{i}\n")
    with Library(folder) as lib:
        assert lib.update().files == 1000
        reads = _reads(monkeypatch)
        report = lib.update()
        assert (report.unchanged, report.added, reads) == (1000, 0, [])
        assert lib.search("report number737", 1)[0].path == "d17/note737.md"


def test_a_damaged_index_is_rebuilt_from_the_folder(briefs, caplog):
    folder, all_briefs = briefs
    path = index_path(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"this is no SQLite database" * 100)
    with Library(folder) as lib:
        assert lib.update().added == 40
        assert lib.search(_question(all_briefs[5]), 1)[0].path == all_briefs[5].file
    assert "could not be read" in caplog.text and "rebuilding it" in caplog.text
