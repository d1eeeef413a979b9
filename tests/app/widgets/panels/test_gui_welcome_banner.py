"""The first-run banner and a download that stopped part-way: the offer says how much is on
disk and its button reads "Resume download"; clicking it continues from the kept bytes."""

from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from fakehub import fakehub  # noqa: E402,F401  (fixture)
from test_gui_shell import _tiny_catalog, make_window  # noqa: E402,F401  (fixture)

from engine.models import catalog, partial, store  # noqa: E402
from engine.units import human_bytes  # noqa: E402


def test_banner_offers_to_resume_a_partial_download_with_its_bytes_on_disk(qtbot, make_window, fakehub, tmp_path,
                                                                           monkeypatch, tiny_target):
    spec = _tiny_catalog(fakehub, tmp_path, monkeypatch, tiny_target)
    banner = make_window((1024, 700)).welcome
    assert banner.button.text() == "Download and load" and "GB download" in banner.text.text()

    kept = spec.bytes // 3
    blob = store.repo_dir(spec.repo) / "blobs" / f"{spec.sha256}.incomplete"
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(tiny_target.read_bytes()[:kept])  # what a cancelled download left, the app started again
    pair = catalog.load().pair("tiny")
    found = partial.pair_partial(pair)
    assert found is not None and found.resumable
    w = make_window((1024, 700))
    banner = w.welcome
    assert banner.button.text() == "Resume download"
    assert f"{human_bytes(found.on_disk)} of {human_bytes(pair.bytes)} on disk from an earlier download" in banner.text.text()
    assert human_bytes(pair.bytes - found.on_disk) in banner.button.toolTip()

    banner.button.click()
    qtbot.waitUntil(lambda: w.session.downloads.status.ended, timeout=60000)
    assert w.session.downloads.status.ok
    assert fakehub.requests("GET", spec.filename)[0].range == f"bytes={kept}-", "Resume continues, not from 0"
    qtbot.waitUntil(lambda: not w.session.busy, timeout=30000)  # the pair loads after its download
