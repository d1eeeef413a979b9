"""A folder holding hostile files (issue #50): a DOCX bomb, a file too large to read, a binary
file named .txt, a symbolic link loop, a file that cannot be opened, a file removed while the
folder is indexed. Each is skipped with its one line (the removed one simply gone), the rest
of the folder indexed, in bounded time, without a traceback."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from brief_files import brief_folder
from document_files import bomb_docx
from engine.documents.reader import MAX_DOCUMENT_BYTES
from engine.library import Library

pytest.importorskip("docx")
pytest.importorskip("openpyxl")
pytest.importorskip("pypdf")

MB = 1 << 20


@pytest.fixture
def hostile(tmp_path) -> Path:
    folder = tmp_path / "folder"
    brief_folder(folder, 10)
    made = bomb_docx(tmp_path / "bomb.docx", 1 << 30)  # ~3 MB on disk, 1 GB of XML inflated
    shutil.move(made, folder / "bomb.docx")  # (its memo stays outside the folder)
    with open(folder / "huge.pdf", "wb") as f:  # sparse: over the limit without the disk space
        f.write(b"%PDF-1.7\n")
        f.truncate(MAX_DOCUMENT_BYTES + MB)
    (folder / "program.txt").write_bytes(bytes(range(256)) * 64)
    os.symlink(folder / "loop-b.md", folder / "loop-a.md")
    os.symlink(folder / "loop-a.md", folder / "loop-b.md")
    os.symlink(folder, folder / "again")  # a folder linking to itself: not followed
    (folder / "locked.md").write_text("# Locked\n\nThe vault code is 1234.\n")
    return folder


def _lock(monkeypatch, name: str) -> None:
    """`name` cannot be opened, as a file without read permission is for a user (the tests may
    run as root, which chmod does not stop)."""
    real = Path.open

    def opener(self, *a, **k):
        if self.name == name:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "open", opener)


def test_each_hostile_file_is_one_line_and_the_rest_indexed(hostile, monkeypatch):
    _lock(monkeypatch, "locked.md")
    started = time.monotonic()
    with Library(hostile) as lib:
        report = lib.update()
        hits = lib.search("Who leads project and what is its budget?", 20)
    assert time.monotonic() - started < 60
    assert report.files == 10
    reasons = dict(report.unreadable)
    assert sorted(reasons) == ["bomb.docx", "huge.pdf", "locked.md", "loop-a.md", "loop-b.md", "program.txt"]
    assert all(reason and "\n" not in reason and "Traceback" not in reason for reason in reasons.values())
    assert "zip bomb" in reasons["bomb.docx"]
    assert "too large" in reasons["huge.pdf"]
    assert "not a UTF-8 text file" in reasons["program.txt"]
    assert "link" in reasons["loop-a.md"] and "link" in reasons["loop-b.md"]
    assert "Permission denied" in reasons["locked.md"]
    assert hits and not any(h.path.startswith("again/") for h in hits)


def test_a_file_removed_while_the_folder_is_indexed_is_skipped_and_the_rest_indexed(hostile):
    last = sorted(p.name for p in hostile.iterdir() if p.name.startswith("brief-"))[-1]

    def progress(done: int, total: int, name: str) -> None:
        if done == 0:
            (hostile / last).unlink()  # gone after the walk found it, before it is read

    with Library(hostile) as lib:
        report = lib.update(progress=progress)
        assert report.files == 10 and report.added == 15 and not report.cancelled  # 9 briefs and locked.md
        assert last not in dict(report.unreadable)
        again = lib.update()
    assert again.files == 10 and again.added == again.changed == again.removed == 0


def test_a_hostile_file_is_not_read_again_until_it_changes(hostile, monkeypatch):
    with Library(hostile) as lib:
        lib.update()
        from engine.library import indexer

        seen: list[str] = []
        real = indexer.read_document
        monkeypatch.setattr(indexer, "read_document", lambda p, name=None: seen.append(name) or real(p, name))
        report = lib.update()
        assert seen == [] and len(report.unreadable) == 5
        (hostile / "program.txt").write_text("Project Kestrel is led by Ana.\n")
        report = lib.update()
    assert seen == ["program.txt"] and "program.txt" not in dict(report.unreadable)
