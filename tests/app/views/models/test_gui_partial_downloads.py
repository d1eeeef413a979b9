"""A download that stopped part-way, on the Models page: the row says how much is on disk
(after a cancel, and after the app starts again), Resume continues from the kept bytes, and
Delete… frees the unfinished files only, never while that download runs, with any failure
one line on the page. Small files from the fake Hub into a temp cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from app.session import Session  # noqa: E402
from app.views.models import ModelsView  # noqa: E402
from app.views.models import partial_delete  # noqa: E402
from engine.models import catalog as catalog_mod  # noqa: E402
from engine.models import download, store  # noqa: E402
from engine.models.hardware import Hardware  # noqa: E402
from engine.units import human_bytes  # noqa: E402
from fakehub import fakehub, refuse_unlink  # noqa: E402,F401  (fixture)

GB = 10**9
DISK = 4  # the On disk column


@pytest.fixture
def session(qtbot):
    s = Session()
    yield s
    s.shutdown()


@pytest.fixture
def cat(fakehub, monkeypatch):
    """A one-pair catalog of two small files served by the fake Hub, sent in small pieces."""
    monkeypatch.setattr(download, "TRANSFER_CHUNK", 8 * 1024)
    monkeypatch.setattr(download, "RETRY_WAIT", 0.0)
    fakehub.chunk = 8 * 1024
    models = {}
    for mid, size in (("tiny-target", 400_000), ("tiny-draft", 100_000)):
        repo, fname = f"tiny-org/{mid}-GGUF", f"{mid}.gguf"
        s = fakehub.add(repo, fname, os.urandom(size))
        models[mid] = {"title": mid, "repo": repo, "revision": s.commit, "quant": "F32", "license": "mit",
                       "context_length": 2048, "tokenizer": "tiny", "params_b": 0.001, "n_layers": 2, "n_kv_heads": 2,
                       "head_dim": 16, "files": [{"filename": fname, "bytes": size, "sha256": s.sha256}]}
    return catalog_mod.parse({"schema": 1, "default_pair": "tiny", "models": models, "pairs": [
        {"id": "tiny", "title": "Tiny pair", "target": "tiny-target", "draft": "tiny-draft", "lookahead": 4,
         "tags": ["code"], "note": "test pair"}]})


def open_view(qtbot, session, cat) -> ModelsView:
    hw = Hardware(ram_total=16 * GB, ram_available=8 * GB, cores_physical=2, cores_usable=2)
    view = ModelsView(session, cat, hw)
    qtbot.addWidget(view)
    view.resize(1000, 700)
    view.show()
    qtbot.waitExposed(view)
    return view


def partial_of(cat, mid: str) -> Path:
    f = cat.model(mid).files[0]
    return store.repo_dir(f.repo) / "blobs" / f"{f.sha256}.incomplete"


def leave_partial(cat, mid: str, n: int) -> Path:
    """A partial file as a cancelled download leaves it (the fake Hub's first n bytes)."""
    p = partial_of(cat, mid)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(b"\0" * n)
    return p


def size_of(p: Path) -> int:
    try:
        return p.stat().st_size
    except FileNotFoundError:
        return 0


def place_whole(fakehub, cat, mid: str) -> Path:
    """A complete, verified copy in the cache, as a finished download leaves it."""
    f = cat.model(mid).files[0]
    return download.obtain(f, source="hub")


def test_cancel_leaves_the_row_partial_a_restart_shows_it_and_resume_continues(qtbot, session, fakehub, cat):
    fakehub.delay = 0.05  # ~160 KB/s: time to cancel part-way through the first file, even on a busy machine
    view = open_view(qtbot, session, cat)
    pairs = view.pairs
    pairs.source.setCurrentIndex(pairs.source.findData("hub"))
    assert pairs.download_btn.text() == "Download"
    cancel_at = pairs.cancel_btn.geometry()
    with qtbot.waitSignal(pairs.downloadFinished, timeout=60000):
        pairs.download_pair("tiny")
        qtbot.waitUntil(lambda: pairs.progress.value() > 20, timeout=30000)
        pairs.cancel_btn.click()
    kept = partial_of(cat, "tiny-target").stat().st_size
    assert 0 < kept < 400_000
    row = f"{human_bytes(kept)} of {human_bytes(500_000)} (partial)"
    assert pairs.model.index(0, DISK).data() == row, "the row shows the partial as soon as the cancel ended"
    assert pairs.download_btn.text() == "Resume" and pairs.delete_btn.isEnabled()
    assert pairs.progress_label.text() == "Download cancelled; the partial file is kept: Resume continues it."
    assert pairs.model.index(0, 2).data() == f"{human_bytes(500_000 - kept)} (rest)"
    qtbot.wait(20)
    assert pairs.cancel_btn.geometry() == cancel_at, "Cancel stays where it was when Download reads Resume"

    view.close()
    again = open_view(qtbot, session, cat)  # the app started again: read from the disk alone
    assert again.pairs.model.index(0, DISK).data() == row
    tip = again.pairs.model.index(0, DISK).data(Qt.ItemDataRole.ToolTipRole)
    assert "target tiny-target: " + human_bytes(kept) in tip and "draft tiny-draft: not downloaded" in tip

    cancel_at = again.pairs.cancel_btn.geometry()
    fakehub.delay = 0
    with qtbot.waitSignal(again.pairs.downloadFinished, timeout=60000) as fin:
        again.pairs.download_btn.click()
    assert fin.args == [True]
    assert fakehub.requests("GET", "tiny-target.gguf")[-1].range == f"bytes={kept}-", "Resume continues, not from 0"
    assert again.pairs.model.index(0, DISK).data() == "ready" and again.pairs.download_btn.text() == "Verify files"
    qtbot.wait(20)
    assert again.pairs.cancel_btn.geometry() == cancel_at, "Cancel stays where it was when Resume reads Verify files"


def test_delete_frees_the_partial_only_and_updates_the_row(qtbot, session, fakehub, cat, monkeypatch):
    draft = place_whole(fakehub, cat, "tiny-draft")
    part = leave_partial(cat, "tiny-target", 123_000)
    view = open_view(qtbot, session, cat)
    pairs = view.pairs
    assert pairs.model.index(0, DISK).data() == f"{human_bytes(223_000)} of {human_bytes(500_000)} (partial)"
    asked: list[str] = []
    monkeypatch.setattr(partial_delete, "confirm", lambda _p, _t, text: asked.append(text) or False)
    pairs.delete_btn.click()
    assert part.exists() and "frees 123.0 KB" in asked[0] and "tiny-target (123.0 KB)" in asked[0]

    monkeypatch.setattr(partial_delete, "confirm", lambda *_: True)
    pairs.delete_btn.click()
    assert not part.exists() and draft.is_file() and store.find_file(cat.model("tiny-draft").files[0]) is not None
    assert pairs.model.index(0, DISK).data() == "draft only" and pairs.download_btn.text() == "Download"
    assert pairs.progress_label.text() == "Deleted the partial download of Tiny pair: 123.0 KB freed"


def test_delete_is_refused_while_that_model_downloads(qtbot, session, fakehub, cat, monkeypatch):
    part = leave_partial(cat, "tiny-target", 50_000)
    fakehub.delay = 0.2  # 40 KB/s: the download is still running when Delete is tried
    view = open_view(qtbot, session, cat)
    pairs = view.pairs
    pairs.source.setCurrentIndex(pairs.source.findData("hub"))
    monkeypatch.setattr(partial_delete, "confirm", lambda *_: pytest.fail("no question while it downloads"))
    with qtbot.waitSignal(pairs.downloadFinished, timeout=60000):
        pairs.download_btn.click()
        qtbot.waitUntil(lambda: size_of(part) > 60_000, timeout=30000)
        assert not pairs.delete_btn.isEnabled()
        assert not pairs.delete_selected()
        assert pairs.progress_label.text() == "Tiny pair is downloading: cancel it before deleting its partial download"
        assert part.exists()
        pairs.cancel_btn.click()
    assert part.exists() and pairs.model.index(0, DISK).data().endswith("(partial)")


def test_a_failed_or_vanished_delete_is_one_line_and_keeps_the_rest(qtbot, session, fakehub, cat, monkeypatch):
    part = leave_partial(cat, "tiny-target", 40_000)
    view = open_view(qtbot, session, cat)
    pairs = view.pairs
    errors: list[str] = []
    view.error.connect(errors.append)  # the error signal opens a dialog: a failure here is a line instead
    monkeypatch.setattr(partial_delete, "confirm", lambda *_: True)
    real_unlink = Path.unlink
    refuse_unlink(monkeypatch, part)
    assert not pairs.delete_selected()
    line = pairs.progress_label.text()
    assert line.startswith("Could not delete all of the partial download of Tiny pair: cannot delete ")
    assert line.endswith("Permission denied") and "\n" not in line and not errors
    assert part.stat().st_size == 40_000 and pairs.model.index(0, DISK).data().endswith("(partial)")

    monkeypatch.setattr(Path, "unlink", real_unlink)
    part.unlink()  # gone behind the app's back: the row still shows it until Delete looks again
    assert pairs.model.index(0, DISK).data().endswith("(partial)")
    assert not pairs.delete_selected()
    assert pairs.progress_label.text() == "Nothing of a partial download of Tiny pair is on disk any more"
    assert pairs.model.index(0, DISK).data() == "not downloaded" and not errors


def test_cancel_stays_put_whatever_download_reads(qtbot, session, cat):
    from PySide6.QtWidgets import QApplication

    from app.views.models.pairs import DOWNLOAD_TEXTS

    app = QApplication.instance()
    font = app.font()
    big = app.font()
    big.setPointSize(20)  # a font in which the three texts differ in width (offscreen's default one does not)
    app.setFont(big)
    try:
        pairs = open_view(qtbot, session, cat).pairs
        places = set()
        for text in DOWNLOAD_TEXTS:
            pairs.download_btn.setText(text)
            qtbot.wait(10)
            places.add(pairs.cancel_btn.geometry().getRect())
        assert len(places) == 1, places
    finally:
        app.setFont(font)
