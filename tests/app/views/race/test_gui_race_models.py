"""The Race and Models views on tiny real GGUF models: a race with both runs and the
replay, the catalog table with fit verdicts, downloads from the fake Hub (progress, cancel,
resume, load), imports with metadata, compatibility checks, and worker errors."""

from __future__ import annotations

import re
import time

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl  # noqa: E402
from PySide6.QtGui import QDropEvent  # noqa: E402

from app.session import Session  # noqa: E402
from app.views.models import ModelsView  # noqa: E402
from app.views.models.pairs import PairsModel  # noqa: E402
from app.views.race import RaceView  # noqa: E402
from engine.models import catalog as catalog_mod  # noqa: E402
from engine.models import download, store  # noqa: E402
from engine.decoding.events import TokenEvent  # noqa: E402
from engine.models.hardware import Hardware, pair_fit, ram_bandwidth  # noqa: E402
from fakehub import fakehub  # noqa: E402,F401  (fixture)

GB = 10**9


@pytest.fixture
def session(qtbot):
    s = Session()
    yield s
    s.shutdown()


def small_machine() -> Hardware:
    """8 GB of RAM free, no GPU: some catalog pairs fit, the big ones do not."""
    return Hardware(ram_total=16 * GB, ram_available=8 * GB, cores_physical=2, cores_usable=2)


def load_tiny(qtbot, session, target, draft) -> None:
    session.load(target, draft, label="tiny")
    qtbot.waitUntil(lambda: session.engine is not None and not session.busy, timeout=60000)


# -- Race --------------------------------------------------------------------------------------
def test_race_runs_both_sides_and_reports_the_result(qtbot, session, tiny_target):
    view = RaceView(session)
    qtbot.addWidget(view)
    assert not view.start_btn.isEnabled(), "Start must wait for a loaded pair"
    load_tiny(qtbot, session, tiny_target, tiny_target)
    assert view.start_btn.isEnabled()
    assert view.drafter.currentData() == "model"

    view.prompt.setPlainText("the value of")
    view.max_tokens.setValue(24)
    view.lookahead.set_value(4)
    streamed = {}  # what each pane showed live, before the replay redraws them
    view.raceFinished.connect(lambda _r: streamed.update(
        {s: (view.panes[s].markdown(), view.panes[s].speed.text()) for s in view.panes}))
    with qtbot.waitSignal(view.raceFinished, timeout=120000) as res:
        view.start()
        assert not view.start_btn.isEnabled() and view.stop_btn.isEnabled()
        assert session.busy == "race"
    r = res.args[0]
    base, spec = r["target"], r["speculative"]
    assert base.stats.generated_tokens == spec.stats.generated_tokens == 24
    assert spec.stats.drafted > 0 and spec.stats.acceptance_rate == 1.0  # the target drafting for itself

    # both panes streamed their run live (and the replay shows the same text when it ends)
    assert streamed["target"] == (base.text, f"{base.stats.decode_tokens_per_s:.1f} tok/s")
    assert streamed["speculative"] == (spec.text, f"{spec.stats.decode_tokens_per_s:.1f} tok/s")
    with qtbot.waitSignal(view.replayFinished, timeout=30000):
        pass
    assert view.panes["target"].markdown() == base.text != ""
    assert view.panes["speculative"].markdown() == spec.text != ""
    assert view.replay_frames >= 1 and not view.replaying

    # the result: engine.race's headline, per-side metrics, the identical check
    race = r["race"]
    assert race.headline.startswith(view.speedup_label.text())
    assert re.fullmatch(r"\d+\.\d\dx (faster|slower) \(wall-clock\)|About the same|The machine was busy|Replayed from memory",
                        view.speedup_label.text())
    assert view.speedup_detail.text() == race.detail and f"{spec.stats.decode_tokens_per_s:.1f}" in race.detail
    assert r["identical"] is True
    assert "Identical output" in view.identical_label.text()
    assert view.metric_labels[("acceptance", "speculative")].text() == "100%"
    assert view.metric_labels[("acceptance", "target")].text() == "–"
    assert view.metric_labels[("per_step", "speculative")].text() == f"{spec.stats.mean_tokens_per_step:.2f}"
    assert view.metric_labels[("tokens", "target")].text() == "24"
    assert view.metric_labels[("ttft", "target")].text().endswith(" ms")
    assert view.bars.values == {"target": base.stats.decode_tokens_per_s, "speculative": spec.stats.decode_tokens_per_s}
    assert view.start_btn.isEnabled() and view.replay_btn.isEnabled() and not session.busy


def test_race_with_prompt_lookup_and_stop(qtbot, session, tiny_target):
    view = RaceView(session)
    qtbot.addWidget(view)
    load_tiny(qtbot, session, tiny_target, tiny_target)
    assert view.status.text() == "Ready."
    view.drafter.setCurrentIndex(view.drafter.findData("lookup"))
    view.prompt.setPlainText("the value of the value of the value of")
    view.max_tokens.setValue(40)
    with qtbot.waitSignal(view.raceFinished, timeout=60000) as res:
        view.start()
    assert res.args[0]["speculative"].stats.mode == "lookup"
    assert res.args[0]["target"].stats.mode == "target"
    assert view.panes["speculative"].subtitle.text().startswith("prompt lookup")
    qtbot.waitUntil(lambda: not view.running and not session.busy, timeout=30000)

    view.max_tokens.setValue(4000)
    view.start()
    qtbot.waitUntil(lambda: len(view.tokens["target"]) > 5, timeout=60000)
    view.stop()
    qtbot.waitUntil(lambda: not view.running and not session.busy, timeout=30000)
    assert view.result is None and view.status.text() == "Stopped."
    assert view.panes["target"].markdown() and view.tokens["speculative"] == []
    assert view.start_btn.isEnabled() and not view.replay_btn.isEnabled()


def _tokens(n: int, dt: float, word: str) -> list:
    return [TokenEvent(f"{word}{i} ", i, "plain", i, i, 0.1 + i * dt) for i in range(n)]


def test_replay_is_synchronised_on_recorded_timestamps(qtbot, session):
    view = RaceView(session)
    qtbot.addWidget(view)
    view.tokens = {"target": _tokens(20, 0.05, "t"), "speculative": _tokens(20, 0.02, "s")}
    full = {s: "".join(ev.text for ev in toks) for s, toks in view.tokens.items()}
    view.replay_speed.setCurrentIndex(view.replay_speed.findData(2.0))
    t0 = time.perf_counter()
    view.replay()
    assert view.replaying
    qtbot.wait(150)  # about 0.3 s of recorded time at 2x: target part-way, speculative further on
    ratio = view.replay_time() / (time.perf_counter() - t0)
    assert 1.2 < ratio <= 2.05, f"the replay clock runs at {ratio:.2f}x, not 2x"
    shown_t = view.panes["target"].markdown()
    shown_s = view.panes["speculative"].markdown()
    assert full["target"].startswith(shown_t) and 0 < len(shown_t) < len(full["target"])
    assert full["speculative"].startswith(shown_s) and len(shown_s) > len(shown_t)
    with qtbot.waitSignal(view.replayFinished, timeout=60000):
        pass
    took = time.perf_counter() - t0
    # the last token is at 1.05 s recorded: 0.53 s at 2x (generous bounds for a busy machine)
    assert 0.4 < took < 5.0  # a loaded CI machine may stretch frames; never shorter than the clock
    assert view.replay_frames >= 8
    assert view.panes["target"].markdown() == full["target"]
    assert view.panes["speculative"].markdown() == full["speculative"]
    assert not view.replaying


def test_race_that_drafted_nothing_says_about_the_same(qtbot, session, tiny_target):
    view = RaceView(session)
    qtbot.addWidget(view)
    load_tiny(qtbot, session, tiny_target, tiny_target)
    view.prompt.setPlainText("the value of")
    view.max_tokens.setValue(12)
    view.lookahead.set_value(0)  # a draft model, but no lookahead: nothing is drafted
    with qtbot.waitSignal(view.raceFinished, timeout=120000) as res:
        view.start()
    race = res.args[0]["race"]
    assert race.speculative.stats.drafted == 0
    assert view.speedup_label.text() == "About the same"
    assert view.speedup_label.styleSheet() == "", "no green or orange for a tie"
    hint = view.speedup_hint.text()  # on a machine other programs keep busy, the reason adds that
    assert hint == "Nothing was drafted — the lookahead was 0." or \
        hint.startswith("Nothing was drafted — the lookahead was 0 — the machine was busy (")
    assert "faster" not in view.speedup_label.text() + view.speedup_hint.text()
    qtbot.waitUntil(lambda: not view.running and not session.busy, timeout=30000)


# -- Models: the catalog table -----------------------------------------------------------------
def test_models_table_lists_every_pair_with_fit_verdicts(qtbot, session):
    cat = catalog_mod.load()
    hw = small_machine()
    view = ModelsView(session, cat, hw)
    qtbot.addWidget(view)
    m = view.pairs.table.model()
    assert isinstance(m, PairsModel)
    assert m.rowCount() == len(cat.pairs) > 0
    verdicts = set()
    bw = ram_bandwidth(hw)
    for row, pair in enumerate(cat.pairs.values()):
        fit = pair_fit(pair, hw, bandwidth=bw)
        assert m.index(row, 0).data().startswith(pair.title)
        assert m.index(row, 3).data() == fit.label
        assert ("tok/s expected" in fit.label) == (fit.verdict == "fits in RAM")
        assert m.index(row, 3).data(Qt.ItemDataRole.ToolTipRole) == fit.detail
        assert m.index(row, 4).data() in ("ready", "ready (not verified)", "target only", "draft only", "not downloaded")
        assert m.index(row, 4).data(Qt.ItemDataRole.ToolTipRole) == store.pair_state(pair).detail(pair)
        assert ("★ default" in m.index(row, 0).data()) == (pair.id == cat.default_pair)
        verdicts.add(fit.verdict)
    assert {"fits in RAM", "does not fit"} <= verdicts
    assert view.pairs.selected_pair().id == cat.default_pair


def test_pairs_table_shows_the_engine_pair_state(qtbot, monkeypatch):
    cat = catalog_mod.load()
    pair = cat.default
    states = {m.id: "missing" for m in cat.models.values()}
    states[pair.target.id] = "verified"
    monkeypatch.setattr(store, "model_state", lambda spec: states[spec.id])
    m = PairsModel(cat, small_machine())
    row = m.row_of(pair.id)
    assert m.index(row, 4).data() == "target only"
    states[pair.draft.id] = "present"
    m.refresh_states()
    assert m.index(row, 4).data() == "ready (not verified)"
    assert m.index(row, 4).data(Qt.ItemDataRole.ForegroundRole) is not None  # coloured as ready
    m.set_loaded(pair.id)
    assert m.index(row, 4).data() == "ready (not verified)  · loaded"


# -- Models: downloads from the fake Hub --------------------------------------------------------
def tiny_catalog_data(fakehub, target_path, draft_path) -> dict:
    """A one-pair catalog whose two models are served by the fake Hub."""
    files = {}
    for mid, repo, fname, path in (("tiny-target", "tiny-org/target-GGUF", "target.gguf", target_path),
                                   ("tiny-draft", "tiny-org/draft-GGUF", "draft.gguf", draft_path)):
        s = fakehub.add(repo, fname, path)
        files[mid] = {
            "title": mid, "repo": repo, "revision": s.commit, "quant": "F32", "license": "mit",
            "context_length": 2048, "tokenizer": "tiny", "params_b": 0.001, "n_layers": 2, "n_kv_heads": 2,
            "head_dim": 16, "files": [{"filename": fname, "bytes": len(s.data), "sha256": s.sha256}],
        }
    return {
        "schema": 1, "default_pair": "tiny", "models": files,
        "pairs": [{"id": "tiny", "title": "Tiny pair", "target": "tiny-target", "draft": "tiny-draft",
                   "lookahead": 4, "tags": ["code"], "note": "test pair"}],
    }


def tiny_catalog(fakehub, target_path, draft_path):
    return catalog_mod.parse(tiny_catalog_data(fakehub, target_path, draft_path))


def _toml_value(v) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(v)


def catalog_toml(data: dict) -> str:
    """The little TOML our catalog needs (no TOML writer is installed)."""
    out = [f"schema = {data['schema']}", f"default_pair = {_toml_value(data['default_pair'])}"]
    for mid, m in data["models"].items():
        out.append(f'[models."{mid}"]')
        out += [f"{k} = {_toml_value(v)}" for k, v in m.items() if k != "files"]
        for f in m["files"]:
            out.append(f'[[models."{mid}".files]]')
            out += [f"{k} = {_toml_value(v)}" for k, v in f.items()]
    for p in data["pairs"]:
        out.append("[[pairs]]")
        out += [f"{k} = {_toml_value(v)}" for k, v in p.items()]
    return "\n".join(out) + "\n"


@pytest.fixture
def slow_chunks(monkeypatch, fakehub):
    monkeypatch.setattr(download, "TRANSFER_CHUNK", 8 * 1024)
    monkeypatch.setattr(download, "RETRY_WAIT", 0.0)
    fakehub.chunk = 8 * 1024


def test_download_pair_with_progress_then_load(qtbot, session, fakehub, slow_chunks, tiny_target, tiny_draft):
    from app.main_window import WelcomeBanner

    fakehub.delay = 0.004
    cat = tiny_catalog(fakehub, tiny_target, tiny_draft)
    view = ModelsView(session, cat, small_machine())
    qtbot.addWidget(view)
    pairs = view.pairs
    assert pairs.model.index(0, 4).data() == "not downloaded"
    assert not pairs.load_btn.isEnabled()
    texts: list[str] = []
    set_text = pairs.progress_label.setText
    pairs.progress_label.setText = lambda t: (texts.append(t), set_text(t))  # record every line shown
    banner = WelcomeBanner()  # a second listener of the session's downloads, as in the main window
    qtbot.addWidget(banner)
    session.downloads.changed.connect(banner.show_download)
    values: list[int] = []
    banner.progress.valueChanged.connect(values.append)

    with qtbot.waitSignal(pairs.downloadFinished, timeout=60000) as fin:
        assert pairs.download_pair("tiny", then_load=True)
        assert pairs.cancel_btn.isEnabled() and not pairs.download_btn.isEnabled()
        assert not banner.button.isEnabled() and not banner.progress.isHidden()
        assert not pairs.download_pair("tiny"), "one download at a time"
    assert fin.args == [True]
    qtbot.waitUntil(lambda: session.engine is not None, timeout=60000)
    assert session.pair.pair_id == "tiny" and session.pair.label == "Tiny pair"
    assert session.pair.target == store.find_model("tiny-target", cat)

    assert pairs.model.index(0, 4).data().startswith("ready")
    qtbot.waitUntil(lambda: "loaded" in pairs.model.index(0, 4).data(), timeout=60000)
    assert banner.progress.value() == 1000 and pairs.progress.value() == 1000
    assert len(set(values)) >= 4 and values == sorted(values)  # rises steadily across both files
    dl = [t for t in texts if t.startswith("Downloading")]
    assert any("/s" in t and "ETA" in t for t in dl), dl[:5]
    assert any("draft.gguf" in t for t in dl) and any("target.gguf" in t for t in dl)
    assert view.compat.target_combo.findData(str(session.pair.target)) > 0  # offered for the combination check
    qtbot.waitUntil(lambda: not session.busy, timeout=60000)  # the load job ends after the pair arrives
    assert not pairs.cancel_btn.isEnabled() and pairs.download_btn.isEnabled() and pairs.load_btn.isEnabled()


def test_cancel_keeps_the_partial_and_download_resumes(qtbot, session, fakehub, slow_chunks, tiny_target, tiny_draft):
    fakehub.delay = 0.02  # ~400 KB/s: time to cancel part-way through the first file
    cat = tiny_catalog(fakehub, tiny_target, tiny_draft)
    view = ModelsView(session, cat, small_machine())
    qtbot.addWidget(view)
    pairs = view.pairs
    pairs.source.setCurrentIndex(pairs.source.findData("hub"))
    with qtbot.waitSignal(pairs.downloadFinished, timeout=60000) as fin:
        pairs.download_pair("tiny")
        qtbot.waitUntil(lambda: pairs.progress.value() > 20, timeout=30000)
        pairs.cancel_btn.click()
        assert "Cancelling" in pairs.progress_label.text()
    assert fin.args == [False]
    assert "partial file is kept" in pairs.progress_label.text() and pairs.progress.isHidden()
    assert pairs.model.index(0, 4).data().endswith("(partial)") and pairs.download_btn.text() == "Resume"
    spec = cat.model("tiny-target").files[0]
    partial = store.repo_dir(spec.repo) / "blobs" / f"{spec.sha256}.incomplete"
    assert partial.is_file() and 0 < partial.stat().st_size < spec.bytes
    kept = partial.stat().st_size

    fakehub.delay = 0
    with qtbot.waitSignal(pairs.downloadFinished, timeout=60000) as fin:
        pairs.download_selected()
    assert fin.args == [True]
    assert pairs.model.index(0, 4).data() == "ready"
    gets = fakehub.requests("GET", "target.gguf")
    assert gets[-1].range == f"bytes={kept}-", "the second run must resume, not start over"
    assert session.engine is None, "then_load was not asked for"


def test_download_error_is_reported_and_the_view_stays_usable(qtbot, session, fakehub, tiny_target, tiny_draft):
    from fakehub import Failure

    from app.main_window import WelcomeBanner

    cat = tiny_catalog(fakehub, tiny_target, tiny_draft)
    fakehub.fail["*"] = Failure(404, "EntryNotFound", "gone")
    view = ModelsView(session, cat, small_machine())
    qtbot.addWidget(view)
    banner = WelcomeBanner()
    qtbot.addWidget(banner)
    session.downloads.changed.connect(banner.show_download)
    view.pairs.source.setCurrentIndex(view.pairs.source.findData("hub"))
    banner.button.setEnabled(False)  # as while its download runs
    with qtbot.waitSignal(view.error, timeout=30000) as err:
        session.downloads.download(cat.pair("tiny"), source="hub", then_load=True)
    assert "404" in err.args[0]
    qtbot.waitUntil(lambda: not session.downloads.active, timeout=60000)
    assert view.pairs.progress_label.text().startswith("Download failed: ")
    assert banner.progress.isHidden() and banner.button.isEnabled() and view.pairs.download_btn.isEnabled()
    fakehub.fail.clear()
    with qtbot.waitSignal(view.pairs.downloadFinished, timeout=60000) as fin:
        view.pairs.download_selected()
    assert fin.args == [True]


# -- Models: imports, compatibility, errors ------------------------------------------------------
def test_import_shows_metadata_and_registers(qtbot, session, tiny_draft):
    view = ModelsView(session, catalog_mod.load(), small_machine())
    qtbot.addWidget(view)
    assert view.imports.model.rowCount() == 0
    with qtbot.waitSignal(view.imports.imported, timeout=30000) as imp:
        view.imports.import_file(tiny_draft)
    got = imp.args[0]
    assert (got.record.architecture, got.record.name, got.fact("context length")) == ("llama", "tiny-draft", "2,048")
    from engine.models.gguf_header import read_header

    n_vocab = len(read_header(tiny_draft).get("tokenizer.ggml.tokens"))
    info = view.imports.info.text()
    for word in ("tiny-draft", "llama", "2,048", f"{n_vocab:,}", "registered"):
        assert word in info
    assert [m.path for m in store.imported_models()] == [str(tiny_draft.resolve())]
    assert view.imports.model.rowCount() == 1
    assert view.imports.model.index(0, 0).data() == "tiny-draft"
    assert view.compat.target_combo.findData(str(tiny_draft.resolve())) > 0  # offered for the combination check


def test_drop_of_gguf_files_imports_them(qtbot, session, tiny_target, tmp_path):
    view = ModelsView(session, catalog_mod.load(), small_machine())
    qtbot.addWidget(view)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(tiny_target)), QUrl.fromLocalFile(str(tmp_path / "notes.txt"))])
    ev = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)
    with qtbot.waitSignal(view.imports.imported, timeout=30000) as imp:
        view.dropEvent(ev)
    assert imp.args[0].record.name == "tiny-target"
    assert view.imports.model.rowCount() == 1


def test_compatibility_check_verdicts(qtbot, session, tiny_target, tiny_draft, other_vocab_model, no_byte_fallback):
    view = ModelsView(session, catalog_mod.load(), small_machine())
    qtbot.addWidget(view)
    compat = view.compat
    with qtbot.waitSignal(compat.checked, timeout=30000) as chk:
        compat.check_combination(tiny_target, tiny_draft)
    assert chk.args[0].compatible
    assert "Compatible" in compat.verdict_label.text()
    assert compat.load_btn.isEnabled()

    with qtbot.waitSignal(compat.checked, timeout=30000) as chk:
        compat.check_combination(tiny_target, other_vocab_model)
    assert chk.args[0].bridged  # another vocabulary: drafts go through text
    assert "Bridged (text)" in compat.verdict_label.text()
    assert "tokenisation" in compat.verdict_label.text()
    assert compat.load_btn.isEnabled()

    with qtbot.waitSignal(compat.checked, timeout=30000) as chk:
        compat.check_combination(tiny_target, no_byte_fallback)
    v = chk.args[0]
    assert not v.compatible and v.reasons
    text = compat.verdict_label.text()
    assert "Incompatible" in text
    for reason in v.reasons:
        assert reason.replace("<", "&lt;").replace(">", "&gt;") in text
    assert not compat.load_btn.isEnabled()


def test_worker_errors_become_messages_and_the_view_stays_usable(qtbot, session, tiny_target, tiny_draft, tmp_path):
    bad = tmp_path / "notes.gguf"
    bad.write_text("these are notes, not a model\n" * 20)
    view = ModelsView(session, catalog_mod.load(), small_machine())
    qtbot.addWidget(view)

    with qtbot.waitSignal(view.error, timeout=30000) as err:
        view.imports.import_file(bad)
    assert "notes.gguf" in err.args[0]
    assert "Not imported" in view.imports.info.text()
    assert store.imported_models() == []
    qtbot.waitUntil(lambda: not session.busy, timeout=60000)  # the signal comes before the worker ends

    with qtbot.waitSignal(view.error, timeout=30000) as err:
        view.compat.load_combination(tiny_target, bad)
    assert "notes.gguf" in err.args[0]
    qtbot.waitUntil(lambda: not session.busy, timeout=60000)
    assert session.engine is None
    assert "Cannot check" in view.compat.verdict_label.text()

    # still usable: a good combination checks and loads
    with qtbot.waitSignal(view.compat.checked, timeout=30000):
        view.compat.check_combination(tiny_target, tiny_draft)
    qtbot.waitUntil(lambda: not session.busy, timeout=60000)
    with qtbot.waitSignal(view.compat.loadStarted, timeout=30000) as started:
        view.compat.load_combination()
    assert started.args == ["target + draft"] and view.pairs.progress_label.text() == "Loading target + draft…"
    qtbot.waitUntil(lambda: session.engine is not None, timeout=60000)
    assert session.pair.label == "target + draft"
    # the view hears of the load through a queued signal, a moment after the session has it
    qtbot.waitUntil(view.pairs.unload_btn.isEnabled, timeout=60000)
    view.pairs.unload()
    assert session.engine is None


def test_incompatible_combination_is_not_loaded(qtbot, session, tiny_target, no_byte_fallback):
    view = ModelsView(session, catalog_mod.load(), small_machine())
    qtbot.addWidget(view)
    with qtbot.waitSignal(view.error, timeout=30000) as err:
        view.compat.load_combination(tiny_target, no_byte_fallback)
    assert "cannot draft for" in err.args[0]
    qtbot.waitUntil(lambda: not session.busy, timeout=60000)
    assert session.engine is None


# -- through the main window: the first-run banner ------------------------------------------------
def test_first_run_banner_downloads_and_loads_through_the_models_view(qtbot, fakehub, tiny_target, tiny_draft,
                                                                       tmp_path, monkeypatch):
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QMessageBox

    from app.history import History
    from app.main_window import MainWindow

    toml = tmp_path / "models.toml"
    toml.write_text(catalog_toml(tiny_catalog_data(fakehub, tiny_target, tiny_draft)))
    assert catalog_mod.load(toml).pair("tiny").target.files[0].filename == "target.gguf"
    monkeypatch.setenv("TANDEM_CATALOG", str(toml))
    errors: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning", lambda *a, **k: errors.append(a[2]) or QMessageBox.StandardButton.Ok)
    w = MainWindow(history=History(tmp_path / "h.db"), settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat),
                   autoload=False)
    qtbot.addWidget(w)
    assert not w.welcome.isHidden() and w.welcome.button.property("pair") == "tiny"
    w.welcome.button.click()
    qtbot.waitUntil(lambda: w.session.engine is not None, timeout=60000)
    assert errors == []
    assert w.session.pair.pair_id == "tiny"
    assert w.welcome.progress.value() == 1000
    qtbot.waitUntil(lambda: w.welcome.isHidden(), timeout=60000)
    qtbot.waitUntil(lambda: w.views["Race"].start_btn.isEnabled(), timeout=60000)  # once the load says it is done
    assert w.views["Models"].pairs.model.index(0, 4).data() == "ready  · loaded"
    w.close()


def test_optimise_draft_button_opens_the_optimiser_or_says_why_not(qtbot, session, monkeypatch):
    """The Models view's "Optimise draft…" button: a pair not on disk gets one line; a
    downloaded one opens the optimiser dialog (app/views/optimize_draft.py) for its files."""
    from app.views import optimize_draft

    cat = catalog_mod.load()
    view = ModelsView(session, cat, small_machine())
    qtbot.addWidget(view)
    said: list[str] = []
    view.pairs.message.connect(said.append)
    monkeypatch.setattr(store, "find_model", lambda *a, **k: None)  # as if nothing were downloaded
    view.pairs.optimize_selected()
    assert said and "not downloaded" in said[-1]
    opened: list[tuple] = []

    class FakeDialog:
        @classmethod
        def for_pair(cls, pair, catalog, parent):
            opened.append((pair.id, catalog is cat, parent is view.pairs))
            return cls()

        def show(self):
            opened.append("shown")

    monkeypatch.setattr(optimize_draft, "OptimizeDraftDialog", FakeDialog)
    view.pairs.optimize_selected()
    assert opened == [(cat.default_pair, True, True), "shown"]
