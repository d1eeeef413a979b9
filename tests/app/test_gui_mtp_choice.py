"""The app offers "MTP head" where the target carries MTP layers: the Draft box, the race,
and the status line."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402

from test_gui_chat_input import _load, _make_window, _send  # noqa: E402


def test_draft_box_offers_mtp_only_for_a_target_with_mtp_layers(qtbot, tmp_path, monkeypatch, tiny_hybrid,
                                                                tiny_hybrid_draft):
    from engine.models import store

    store.register_import(tiny_hybrid)
    store.register_import(tiny_hybrid_draft)
    w = _make_window(qtbot, tmp_path, monkeypatch, {"performance/n_ctx": 1024})
    bar = w.chat.model_bar
    labels = [bar.model.itemText(i) for i in range(bar.model.count())]
    mtp_item = bar.draft.model().item(bar.draft.findData("mtp"))
    bar.model.setCurrentIndex(labels.index("tiny-qwen35 (imported)"))  # the seed-7 draft: no MTP layer
    assert not mtp_item.isEnabled()
    bar.model.setCurrentIndex(labels.index("tiny-qwen35-mtp (imported)"))
    assert mtp_item.isEnabled()
    bar.draft.setCurrentIndex(bar.draft.findData("mtp"))
    qtbot.mouseClick(bar.load_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: w.session.engine is not None and not w.session.busy, timeout=20000)
    assert w.session.pair.draft == "mtp" and w.chat.draft_spec() == "mtp"
    assert "drafting with its own MTP head" in w.pair_label.text()
    _send(qtbot, w, "the value of the data", drafter="mtp", lookahead=3)
    stats = w.history.messages(w.chat.conversation_id)[-1].stats
    assert stats["mode"] == "mtp" and stats["drafted"] > 0
    bar.model.setCurrentIndex(labels.index("tiny-qwen35 (imported)"))
    assert bar.draft.currentData() == "lookup"  # moved off a choice this target cannot take
    w.close()


def test_race_offers_mtp_for_a_loaded_mtp_target(qtbot, tmp_path, monkeypatch, tiny_hybrid, tiny_target):
    w = _make_window(qtbot, tmp_path, monkeypatch)
    race = w.views["Race"]
    _load(qtbot, w, tiny_target, "lookup")
    race._sync_buttons()
    assert not race.drafter.model().item(race.drafter.findData("mtp")).isEnabled()
    _load(qtbot, w, tiny_hybrid, "mtp")
    race._sync_buttons()
    assert race.drafter.model().item(race.drafter.findData("mtp")).isEnabled()
    race.drafter.setCurrentIndex(race.drafter.findData("mtp"))
    assert race._draft_spec() == "mtp"
    w.close()


def test_a_gpu_machine_is_offered_the_pair_that_pays_there_labelled_as_a_prediction(qtbot, tmp_path, monkeypatch):
    from engine.llamacpp import ggml_devices
    from engine.models.hardware import GB, Device, Hardware

    devs = [Device("CPU", "cpu", "CPU", "CPU", 32 * GB, 32 * GB), Device("CUDA0", "RTX", "GPU", "CUDA", 24 * GB, 24 * GB)]
    monkeypatch.setattr(ggml_devices, "probe", lambda: Hardware(64 * GB, 32 * GB, 8, 8, devs))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))  # a first run: no pair downloaded here
    w = _make_window(qtbot, tmp_path, monkeypatch)
    text = w.welcome.text.text()
    assert not w.welcome.isHidden() and "GB download, fits on GPU" in text
    assert "Predicted speed-up on a GPU:" in text and "a prediction from others' runs" in text
    pair = w.catalog.pair(str(w.welcome.button.property("pair")))
    assert pair.target.params_b >= 27 and pair.gpu_speedup in text
    assert w.session.downloads.status is None, "nothing downloads before the click"
    w.close()
