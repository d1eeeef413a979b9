"""The catalog's embedding model on the Models page, apart from the pairs: its row says what is
on disk, Download fetches it through the page's one download path (the fake Hub, a tiny BERT in
its place), the row then changes, and the Library page (its setting the catalog's default)
ranks by meaning without a restart; Delete… takes it away again and the Library ranks by words."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("pytestqt")
pytest.importorskip("watchdog")

from PySide6.QtCore import QSettings  # noqa: E402

from app.session import Session  # noqa: E402
from app.views.models import ModelsView, embedding  # noqa: E402
from brief_files import brief_folder  # noqa: E402
from engine.models import catalog as catalog_mod  # noqa: E402
from engine.models import download  # noqa: E402
from engine.models.hardware import Hardware  # noqa: E402
from fakehub import fakehub  # noqa: E402,F401  (fixture)

GB = 10**9


@pytest.fixture
def cat(fakehub, monkeypatch, tiny_bert):
    """A pair of two small random files and the tiny BERT as the catalog's embedding model,
    served by the fake Hub; the engine's catalog.load() gives this catalog (the Library reads it)."""
    monkeypatch.setattr(download, "RETRY_WAIT", 0.0)
    models = {}
    for mid, data in (("tiny-target", os.urandom(40_000)), ("tiny-draft", os.urandom(10_000)),
                      ("tiny-bert", tiny_bert.read_bytes())):
        repo, fname = f"tiny-org/{mid}-GGUF", f"{mid}.gguf"
        s = fakehub.add(repo, fname, data)
        models[mid] = {"title": mid, "repo": repo, "revision": s.commit, "quant": "F32", "license": "mit",
                       "context_length": 512, "tokenizer": "tiny", "params_b": 0.001, "n_layers": 2, "n_kv_heads": 2,
                       "head_dim": 16, "files": [{"filename": fname, "bytes": len(data), "sha256": s.sha256}]}
    models["tiny-bert"]["kind"] = "embedding"
    models["tiny-bert"]["title"] = "Tiny BERT"
    cat = catalog_mod.parse({"schema": 1, "default_pair": "tiny", "models": models, "pairs": [
        {"id": "tiny", "title": "Tiny pair", "target": "tiny-target", "draft": "tiny-draft", "lookahead": 4,
         "tags": ["code"], "note": "test pair"}]})
    monkeypatch.setattr(catalog_mod, "load", lambda *a, **k: cat)
    return cat


def test_the_embedding_row_downloads_and_deletes_and_the_library_follows(qtbot, cat, tmp_path, monkeypatch):
    from app.library_shelf import LibraryShelf
    from app.views.library import LibraryView

    session = Session()
    hw = Hardware(ram_total=16 * GB, ram_available=8 * GB, cores_physical=2, cores_usable=2)
    models = ModelsView(session, cat, hw)
    qtbot.addWidget(models)
    folder = tmp_path / "briefs"
    brief_folder(folder, 6)
    library = LibraryView(LibraryShelf(QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)), catalog=cat)
    qtbot.addWidget(library)
    models.embedding.statesChanged.connect(library.models_changed)  # as the main window wires them
    errors: list[str] = []
    library.error.connect(errors.append)
    models.error.connect(errors.append)
    shelf, panel, ranking = library.shelf, models.embedding, library.ranking
    try:
        info, download_btn, delete_btn = panel.rows["tiny-bert"]
        bert = cat.model("tiny-bert")
        assert "Tiny BERT" in info.text() and info.text().endswith(" · not downloaded")
        assert download_btn.isEnabled() and not delete_btn.isEnabled()
        assert [p.id for p in models.pairs.model.pairs] == ["tiny"], "not mixed with the pairs"
        assert not ranking.combo.model().item(1).isEnabled() and "Models page" in ranking.state.text()
        library.add_folder(str(folder))
        qtbot.waitUntil(lambda: shelf.states[str(folder)].state == "ready", timeout=60000)
        assert not shelf.search(str(folder), "Who leads project Aurora?")[0].fused

        pair_bar: list[bool] = []
        session.downloads.changed.connect(lambda _st: pair_bar.append(models.pairs.progress.isVisible()))
        with qtbot.waitSignal(panel.statesChanged, timeout=60000):
            download_btn.click()
        assert panel.state_word(bert) == "on disk, sha256 verified" and download_btn.text() == "Verify files"
        assert "on disk, sha256 verified</span>" in info.text()
        assert delete_btn.isEnabled() and not any(pair_bar), "the pairs' bar is not the embedding model's"
        assert all("tiny-bert" not in path for _, path in models.compat.choices), "never offered as a chat model"
        qtbot.waitUntil(lambda: shelf.embedder is not None and shelf.states[str(folder)].state == "ready",
                        timeout=60000)  # taken up without a restart: loaded and embedded by the update queued
        hits = shelf.search(str(folder), "Who leads project Aurora?")
        assert hits and all(h.fused and h.cosine is not None for h in hits)
        assert ranking.combo.model().item(1).isEnabled() and ranking.state.text().startswith("Ranked by meaning")

        monkeypatch.setattr(embedding, "confirm", lambda *_: True)
        delete_btn.click()
        assert info.text().endswith(" · not downloaded") and not delete_btn.isEnabled()
        assert shelf.embedder is None and not shelf.search(str(folder), "Who leads project Aurora?")[0].fused
        assert errors == []
    finally:
        library.shutdown()
        session.shutdown()
