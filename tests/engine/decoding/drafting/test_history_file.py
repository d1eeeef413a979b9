"""The suffix drafter's history file when it is not what it should be: a 6 GB file refused from
its size without a read, a damaged one set aside with one line of ours (never NumPy's pickle
advice), a long one read from its newest end only; and the CLI's warning on its own line."""

from __future__ import annotations

import io
import logging
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from engine.decoding.drafting import history_file
from engine.decoding.drafting.suffix_drafter import SuffixDrafter
from engine.decoding.drafting.suffix_stores import AnswerStore, clear_history_files

SIX_GB = 6 * 1024**3


@pytest.fixture
def no_np_load(monkeypatch):
    """The history is read without np.load (which reads a whole array, 51 s for 6 GB)."""
    def refuse(*a, **k):
        raise AssertionError("np.load was called on a draft history")

    monkeypatch.setattr(np, "load", refuse)


def _sparse(path: Path, size: int, header: dict | None = None) -> Path:
    """A file of `size` bytes taking no disk (truncate), optionally after a .npy header."""
    with open(path, "wb") as f:
        if header is not None:
            np.lib.format.write_array_header_1_0(f, header)
        f.truncate(size)
    return path


def _load(path: Path, caplog) -> SuffixDrafter:
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        t0 = time.monotonic()
        d = SuffixDrafter(history_path=path, n_vocab=500)
        assert time.monotonic() - t0 < 5.0  # generous for a busy machine: no 6 GB read
    return d


@pytest.mark.parametrize("header", [None, "valid"])
def test_a_6_gb_history_is_refused_from_its_size_and_set_aside(tmp_path, caplog, no_np_load, header):
    path = tmp_path / "big.npy"
    hdr = None
    if header == "valid":  # an int32 array header whose length matches the file: only the size gives it away
        hdr = {"descr": "<i4", "fortran_order": False, "shape": ((SIX_GB - 128) // 4,)}
    _sparse(path, SIX_GB, hdr)
    d = _load(path, caplog)
    assert d.answers.tokens == 0
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith(f"draft history {path} is damaged (6.4 GB: a draft history is at most")
    assert lines[0].endswith("set aside as big.npy.damaged; starting empty")
    assert not path.exists() and (tmp_path / "big.npy.damaged").stat().st_size == SIX_GB  # kept for the user
    d.finish([], [5, 6, 7])  # the next answer starts a new file beside it
    assert path.exists()


def test_a_6_gb_file_of_zeros_is_not_read_either(tmp_path, caplog, no_np_load, monkeypatch):
    monkeypatch.setattr(history_file, "MAX_FILE_BYTES", 8 * SIX_GB)  # past the size check: the header refuses it
    path = _sparse(tmp_path / "zeros.npy", SIX_GB)
    assert _load(path, caplog).answers.tokens == 0
    assert "is damaged (not a NumPy array file)" in caplog.text


@pytest.mark.parametrize("damage, words", [
    (lambda p: p.write_bytes(b"not numpy"), "not a NumPy array file"),
    (lambda p: np.save(p, np.array([{"a": 1}], dtype=object), allow_pickle=True), "not a 1-D int32 token list"),
    (lambda p: np.save(p, np.zeros((2, 3), np.int32)), "not a 1-D int32 token list"),
    (lambda p: p.write_bytes(p.read_bytes()[:-3]), "where its header says"),
    (lambda p: p.write_bytes(p.read_bytes()[:20]), "its NumPy header is unreadable"),
])
def test_a_damaged_history_is_one_line_of_ours(tmp_path, caplog, damage, words):
    path = tmp_path / "h.npy"
    SuffixDrafter(history_path=path, n_vocab=500).finish([], [100, 5, 6, 7, 8])
    damage(path)
    d = _load(path, caplog)
    assert d.answers.tokens == 0
    assert len(caplog.records) == 1 and words in caplog.text and "set aside as h.npy.damaged" in caplog.text
    assert "allow_pickle" not in caplog.text and "Traceback" not in caplog.text


def test_a_damaged_history_that_cannot_be_moved_still_starts_empty(tmp_path, caplog, monkeypatch):
    path = tmp_path / "h.npy"
    path.write_bytes(b"not numpy")

    def refuse(*a):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(history_file.os, "replace", refuse)
    assert _load(path, caplog).answers.tokens == 0
    assert "not set aside either (Permission denied); starting empty" in caplog.text and path.exists()


def test_a_longer_history_is_read_from_its_newest_end(tmp_path, monkeypatch):
    from engine.decoding.drafting import suffix_stores

    big = AnswerStore(max_tokens=100_000)
    for i in range(300):
        big.add([200 + i % 50, i % 100, (i + 1) % 100, (i + 2) % 100])
    path = tmp_path / "h.npy"
    big.save(path)
    asked = []
    real = history_file.read_tail
    monkeypatch.setattr(suffix_stores, "read_tail", lambda p, keep: asked.append(keep) or real(p, keep))
    small = AnswerStore(max_tokens=200)
    small.load(path, n_vocab=500)
    assert asked == [200]  # only the newest 200 tokens were read
    kept = small.answers()
    assert 0 < small.tokens <= 200 and all(len(a) == 4 for a in kept)  # the cut answer at the start dropped
    assert [a.tolist() for a in kept] == [a.tolist() for a in big.answers()[-len(kept):]]


def test_clearing_the_history_removes_what_was_set_aside(tmp_path, caplog):
    path = tmp_path / "h.npy"
    path.write_bytes(b"not numpy")
    d = _load(path, caplog)
    d.finish([], [5, 6, 7])
    assert (tmp_path / "h.npy.damaged").exists()
    d.clear_history()
    assert not list(tmp_path.iterdir())
    path.write_bytes(b"x")
    (tmp_path / "other.npy.damaged").write_bytes(b"y")
    assert clear_history_files(tmp_path) == 2 and not list(tmp_path.iterdir())


def test_the_cli_writes_a_history_warning_on_its_own_line(tiny_target, monkeypatch):
    """The save fails at the end of the answer, mid-line: the warning waits for the answer's
    newline (stdout and stderr share one terminal here: one buffer)."""
    from engine import paths
    from engine.cli.main import main as cli
    from engine.models import calibration

    history = paths.draft_history(calibration.file_id(tiny_target))
    (history / "in-the-way").mkdir(parents=True)  # a folder where the file goes: read and save both fail
    term = io.StringIO()
    monkeypatch.setattr(sys, "stdout", term)
    monkeypatch.setattr(sys, "stderr", term)
    args = ["generate", "the value of", "--target", str(tiny_target), "--draft", "suffix", "--max-tokens", "6"]
    assert cli(args) == 0
    lines = term.getvalue().splitlines()
    warnings = [ln for ln in lines if "draft history" in ln]
    assert len(warnings) == 2, lines  # not read at the start, not saved at the end
    assert all(ln.startswith("tandem: warning: draft history ") for ln in warnings), lines
    assert warnings[0].endswith("could not be read (Is a directory); starting empty")
    assert "not saved" in warnings[1] and lines.index(warnings[1]) >= 2  # after the answer's own line
    assert lines[lines.index(warnings[1]) - 1].strip()  # the line before it is the answer, complete
    assert "acceptance" in lines[-1]  # the stats line last


def test_warnings_wait_for_the_answers_line_to_end(capsys):
    from engine.cli.console import Console

    c = Console()
    c.warn("before")  # at a line's start: at once
    c.answer("one two")
    c.warn("during")  # mid-line: held
    assert capsys.readouterr() == ("one two", "tandem: warning: before\n")
    c.answer(" three\n")  # the line ends: what was held follows it
    assert capsys.readouterr() == (" three\n", "tandem: warning: during\n")
    c.answer("four")
    c.warn("after")
    c.end_answer()
    assert capsys.readouterr() == ("four\n", "tandem: warning: after\n")
