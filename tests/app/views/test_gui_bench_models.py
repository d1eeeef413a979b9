"""Bench for non-experts (a time estimate before a run, column tooltips, colours only outside
the noise, no single-point plots, why Run is disabled, "use this setting in Chat") and the
Models page's Delete / Show in folder / lookup-only loading, on the real widgets."""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from pathlib import Path

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QColor, QDesktopServices  # noqa: E402
from PySide6.QtWidgets import QMessageBox  # noqa: E402

from app import theme, workers  # noqa: E402
from app.session import Session  # noqa: E402
from app.views.bench_view import COLUMNS, BenchView, ResultsModel  # noqa: E402
from app.views.models import ModelsView  # noqa: E402
from engine.models import catalog as catalog_mod  # noqa: E402
from engine.models import store  # noqa: E402
from engine.measure.bench import Row  # noqa: E402
from engine.models.hardware import Hardware  # noqa: E402
from engine.units import human_bytes  # noqa: E402


@pytest.fixture
def session(qtbot):
    s = Session()
    yield s
    s.shutdown()


def load_tiny(qtbot, session, target, draft) -> None:
    session.load(target, draft, label="tiny")
    qtbot.waitUntil(lambda: session.engine is not None and not session.busy, timeout=60000)


def only_suite(view: BenchView, name: str) -> None:
    for i in range(view.suites.count()):
        it = view.suites.item(i)
        it.setCheckState(Qt.CheckState.Checked if it.data(Qt.ItemDataRole.UserRole) == name else Qt.CheckState.Unchecked)


def click_row(qtbot, table, row: int) -> None:
    rect = table.visualRect(table.model().index(row, 0))
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


# -- Bench: before a run -------------------------------------------------------------------------
def test_run_button_says_why_it_is_disabled(qtbot, session, tiny_target):
    view = BenchView(session)
    qtbot.addWidget(view)
    view.show()
    assert not view.start_btn.isEnabled()
    assert view.why_label.isVisible() and view.why_label.text() == "Load a pair first (Models)."
    assert view.start_btn.toolTip() == "Load a pair first (Models)."
    load_tiny(qtbot, session, tiny_target, "lookup")
    assert view.start_btn.isEnabled() and not view.why_label.isVisible()

    release = threading.Event()  # a chat-like job holds the session until released
    job = workers.CallWorker(lambda: release.wait(30))
    session.run(job, "chat")
    try:
        assert not view.start_btn.isEnabled()
        assert view.why_label.text() == "A chat is running; it must finish first."
        assert view.start_btn.toolTip() == view.why_label.text()
    finally:
        release.set()
    qtbot.waitUntil(lambda: not session.busy, timeout=60000)
    assert view.start_btn.isEnabled()


def test_estimate_before_a_run_follows_the_settings(qtbot, session, tiny_target):
    view = BenchView(session)
    qtbot.addWidget(view)
    # The defaults: code_generation + code_editing, 3 prompts each, 7 configurations, 3 repetitions.
    assert view.estimate_label.text() == "About 126 generations (+7 warm-up); load a pair for a time estimate."
    view.repeat.setValue(1)
    assert view.estimate_label.text().startswith("About 42 generations (+7 warm-up)")
    view.mode_boxes["fixed"].setChecked(False)  # k=1,2,4,8 go: target, auto, lookup remain
    assert view.estimate_label.text().startswith("About 18 generations (+3 warm-up)")
    view.sweep.setText("1,x")
    view.mode_boxes["fixed"].setChecked(True)
    assert view.estimate_label.text() == "Estimate: fix the settings above first."
    view.sweep.setText("2")
    load_tiny(qtbot, session, tiny_target, "lookup")  # a lookup pair: target, lookup k=2, lookup auto
    view.repeat.setValue(3)
    assert view.estimate_label.text().startswith("About 54 generations (+3 warm-up), ~")
    assert view.estimate_label.text().endswith(" on this machine.")
    assert "from uncalibrated: hardware bandwidth estimate" in view.estimate_label.toolTip()
    # A suite of runs of several requests: the limit counts runs, each sent whole (agent_runs' first has 6).
    for i in range(view.suites.count()):
        it = view.suites.item(i)
        it.setCheckState(Qt.CheckState.Checked if it.data(Qt.ItemDataRole.UserRole) == "agent_runs" else Qt.CheckState.Unchecked)
    view.limit.setValue(1)
    view.repeat.setValue(2)
    assert view.estimate_label.text().startswith("About 36 generations (+3 warm-up)")  # 6 requests x 3 configurations x 2


# -- Bench: reading the results -----------------------------------------------------------------
def run_small_bench(qtbot, session, target, sweep: str, *, auto: bool = True) -> BenchView:
    """A shown Bench view on a tiny lookup pair, after one click on Run: one chat prompt, once."""
    view = BenchView(session)
    qtbot.addWidget(view)
    view.show()
    load_tiny(qtbot, session, target, "lookup")
    only_suite(view, "chat")
    view.sweep.setText(sweep)
    view.mode_boxes["auto"].setChecked(auto)
    view.repeat.setValue(1)
    view.limit.setValue(1)
    view.max_tokens.setValue(10)
    qtbot.mouseClick(view.start_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.result is not None and view.worker is None, timeout=60000)
    return view


def test_a_one_repetition_run_is_not_coloured_has_tooltips_and_no_single_point_plot(qtbot, session, tiny_target):
    view = run_small_bench(qtbot, session, tiny_target, "2")
    m = view.model
    assert [r.config for r in m.rows] == ["target", "lookup k=2", "lookup auto"]
    speed_col = [k for k, _ in COLUMNS].index("speedup_median")
    for row in range(m.rowCount()):
        idx = m.index(row, speed_col)
        assert idx.data(Qt.ItemDataRole.ForegroundRole) is None, "one repetition: no green or red"
        if m.rows[row].mode != "target":
            assert idx.data(Qt.ItemDataRole.ToolTipRole).startswith("one repetition: no noise estimate; all runs ")
            wall = m.index(row, [k for k, _ in COLUMNS].index("wall_speedup_median"))
            assert wall.data() == f"{m.rows[row].wall_speedup_median:.2f}x"  # the headline, beside decode
            assert wall.data(Qt.ItemDataRole.ToolTipRole).startswith("wall-clock ratio over ")
    for col in range(m.columnCount()):
        assert len(m.headerData(col, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole) or "") > 20
    assert "Pred. ×" in m.COLUMNS and "cost model" in m.headerData(m.COLUMNS.index("Pred. ×"), Qt.Orientation.Horizontal,
                                                                     Qt.ItemDataRole.ToolTipRole)
    # One lookahead value is one point: a note instead of the charts.
    assert view.plot_note.isVisible() and not view.charts.isVisible()
    assert "only k=2 was run" in view.plot_note.text()

    # Use this setting in Chat: the selected row's drafter and lookahead go out as a signal.
    assert not view.use_btn.isEnabled()
    click_row(qtbot, view.table, 1)
    assert view.use_btn.isEnabled()
    with qtbot.waitSignal(view.useSetting, timeout=60000) as sig:
        qtbot.mouseClick(view.use_btn, Qt.MouseButton.LeftButton)
    assert sig.args == [{"drafter": "lookup", "lookahead": 2}]
    click_row(qtbot, view.table, 0)
    with qtbot.waitSignal(view.useSetting, timeout=60000) as sig:
        qtbot.mouseClick(view.use_btn, Qt.MouseButton.LeftButton)
    assert sig.args == [{"drafter": "none", "lookahead": "auto"}]


def test_a_sweep_of_two_values_is_plotted(qtbot, session, tiny_target):
    view = run_small_bench(qtbot, session, tiny_target, "1,3", auto=False)
    assert view.charts.isVisible() and not view.plot_note.isVisible()
    assert len(view.tps_plot.listDataItems()) == 1 and len(view.tps_plot.listDataItems()[0].xData) == 2
    for p in (view.tps_plot, view.acc_plot):  # ticks at the lookaheads run: no "1.5" or "2.5"
        assert p.getAxis("bottom")._tickLevels == [[(1.0, "1"), (3.0, "3")]]


def _row(config: str, mode: str, reps: list[float], acceptance: float = 0.0) -> Row:
    med = sorted(reps)[len(reps) // 2]
    return Row("s", config, mode, 2 if mode == "fixed" else "auto", len(reps), 10.0, 9.0, 11.0, med, min(reps), max(reps),
               med, min(reps), max(reps), 0.1, acceptance, 1.0, 0.0, None, 0, 0, 0, list(reps))


def test_ratios_are_coloured_only_outside_the_repetition_noise(qtbot):
    m = ResultsModel()
    m.set_rows([
        _row("lookup", "lookup", [1.05]),  # the case: one repetition, 0% acceptance, 1.05x
        _row("lookup auto", "lookup", [1.05, 0.96, 1.02]),  # spans 1.00x: noise
        _row("k=2", "fixed", [1.2, 1.1, 1.3], acceptance=0.6),
        _row("auto", "auto", [0.8, 0.9, 0.85], acceptance=0.1),
    ])
    col = [k for k, _ in COLUMNS].index("speedup_median")
    colours = [m.index(r, col).data(Qt.ItemDataRole.ForegroundRole) for r in range(4)]
    pal = theme.palette(False)
    assert colours == [None, None, QColor(pal.gain), QColor(pal.loss)]
    assert m.index(1, col).data(Qt.ItemDataRole.ToolTipRole).startswith("within the noise: 3 repetitions ranged 0.96–1.05x")
    assert m.index(2, col).data(Qt.ItemDataRole.ToolTipRole).startswith("faster in every repetition")


# -- Models: Delete, Show in folder, one GGUF with prompt lookup ----------------------------------
GB = 10**9


def small_machine() -> Hardware:
    return Hardware(ram_total=16 * GB, ram_available=8 * GB, cores_physical=2, cores_usable=2)


def cached_tiny_catalog(monkeypatch, tmp_path, target: Path, draft: Path) -> catalog_mod.Catalog:
    """A one-pair catalog whose two files sit in a private HF cache, laid out as the Hub does."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    models = {}
    for mid, repo, fname, src in (("tiny-target", "tiny-org/target-GGUF", "target.gguf", target),
                                  ("tiny-draft", "tiny-org/draft-GGUF", "draft.gguf", draft)):
        data = src.read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        blob = store.repo_dir(repo) / "blobs" / sha
        blob.parent.mkdir(parents=True)
        blob.write_bytes(data)
        snap = store.repo_dir(repo) / "snapshots" / ("a" * 40) / fname
        snap.parent.mkdir(parents=True)
        os.symlink(os.path.relpath(blob, snap.parent), snap)
        models[mid] = {"title": mid, "repo": repo, "revision": "a" * 40, "quant": "F32", "license": "mit",
                       "context_length": 2048, "tokenizer": "tiny", "params_b": 0.001, "n_layers": 2, "n_kv_heads": 2,
                       "head_dim": 16, "files": [{"filename": fname, "bytes": len(data), "sha256": sha}]}
    return catalog_mod.parse({
        "schema": 1, "default_pair": "tiny", "models": models,
        "pairs": [{"id": "tiny", "title": "Tiny pair", "target": "tiny-target", "draft": "tiny-draft",
                   "lookahead": 4, "tags": ["code"], "note": "test pair"}],
    })


class Questions:
    """QMessageBox.question, answered with `answer` and recorded."""

    def __init__(self, monkeypatch, answer=QMessageBox.StandardButton.Cancel):
        self.asked: list[str] = []
        self.answer = answer
        monkeypatch.setattr(QMessageBox, "question", lambda _parent, _title, text, *a, **k: self.asked.append(text) or self.answer)


def test_delete_pair_asks_refuses_while_loaded_and_removes_the_cache_files(qtbot, session, monkeypatch, tmp_path,
                                                                             tiny_target, tiny_draft):
    cat = cached_tiny_catalog(monkeypatch, tmp_path, tiny_target, tiny_draft)
    view = ModelsView(session, cat, small_machine())
    qtbot.addWidget(view)
    pairs = view.pairs
    messages: list[str] = []
    pairs.message.connect(messages.append)
    q = Questions(monkeypatch)
    opened: list[str] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url.toLocalFile()) or True)
    assert pairs.model.index(0, 4).data() == "ready (not verified)"
    assert pairs.delete_btn.isEnabled() and pairs.folder_btn.isEnabled()

    qtbot.mouseClick(pairs.folder_btn, Qt.MouseButton.LeftButton)
    assert opened == [str(store.repo_dir("tiny-org/target-GGUF") / "snapshots" / ("a" * 40))]
    # The same actions on a right click on the row.
    pairs.table.customContextMenuRequested.emit(pairs.table.visualRect(pairs.model.index(0, 0)).center())
    qtbot.waitUntil(lambda: pairs.row_menu.isVisible(), timeout=60000)
    actions = {a.text(): a for a in pairs.row_menu.actions()}
    assert set(actions) == {"Load", "Verify files", "Delete…", "Show in folder"}
    assert all(a.isEnabled() for a in actions.values())
    actions["Show in folder"].trigger()
    pairs.row_menu.close()
    assert len(opened) == 2 and opened[1] == opened[0]

    pairs.load_selected()
    qtbot.waitUntil(lambda: session.engine is not None and not session.busy, timeout=60000)
    qtbot.mouseClick(pairs.delete_btn, Qt.MouseButton.LeftButton)
    assert q.asked == [] and messages[-1] == "Not deleting Tiny pair: it is loaded: Unload it first"
    qtbot.mouseClick(pairs.unload_btn, Qt.MouseButton.LeftButton)

    qtbot.mouseClick(pairs.delete_btn, Qt.MouseButton.LeftButton)  # Cancel: nothing happens
    assert len(q.asked) == 1 and "from the Tandem model cache" in q.asked[0] and str(store.hub_cache()) in q.asked[0]
    assert "tiny-target" in q.asked[0] and "tiny-draft" in q.asked[0]
    assert store.pair_state(cat.pair("tiny")).ready
    q.answer = QMessageBox.StandardButton.Yes
    qtbot.mouseClick(pairs.delete_btn, Qt.MouseButton.LeftButton)
    assert store.pair_state(cat.pair("tiny")).word == "not downloaded"
    assert not list((store.repo_dir("tiny-org/target-GGUF") / "blobs").iterdir())
    assert messages[-1].startswith("Deleted tiny-target") and "freed" in messages[-1]
    assert pairs.model.index(0, 4).data() == "not downloaded"
    assert not pairs.delete_btn.isEnabled() and not pairs.folder_btn.isEnabled()
    assert tiny_target.exists(), "the source file outside the cache is untouched"


def test_download_column_shows_only_what_is_left_to_fetch(qtbot, session, monkeypatch, tmp_path, tiny_target, tiny_draft):
    cat = cached_tiny_catalog(monkeypatch, tmp_path, tiny_target, tiny_draft)
    store.delete_model(cat.model("tiny-draft"))  # the target is on disk: Download fetches the draft only
    view = ModelsView(session, cat, small_machine())
    qtbot.addWidget(view)
    m = view.pairs.model
    assert m.index(0, 4).data() == "target only"
    assert m.index(0, 2).data() == f"{human_bytes(tiny_draft.stat().st_size)} (draft)"
    assert "Download fetches the draft only" in m.index(0, 2).data(Qt.ItemDataRole.ToolTipRole)


def test_an_imported_gguf_loads_with_prompt_lookup_or_no_draft_and_is_forgotten_not_deleted(
        qtbot, session, monkeypatch, tmp_path, tiny_target):
    mine = tmp_path / "my-model.gguf"
    shutil.copy(tiny_target, mine)
    view = ModelsView(session, catalog_mod.load(), small_machine())
    qtbot.addWidget(view)
    view.imports.import_file(mine)
    qtbot.waitUntil(lambda: view.imports.model.rowCount() == 1, timeout=60000)
    compat = view.compat
    drafts = [compat.draft_combo.itemData(i) for i in range(compat.draft_combo.count())]
    assert drafts[:3] == ["", "lookup", "none"] and str(mine) in drafts

    compat.target_combo.setCurrentIndex(compat.target_combo.findData(str(mine)))
    compat.draft_combo.setCurrentIndex(compat.draft_combo.findData("lookup"))
    qtbot.waitUntil(lambda: compat.load_btn.isEnabled(), timeout=60000)
    assert "✓ Ready" in compat.verdict_label.text() and "prompt lookup" in compat.verdict_label.text()
    qtbot.mouseClick(compat.load_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: session.engine is not None and not session.busy, timeout=60000)
    assert session.pair.target == mine and session.pair.draft == "lookup"

    # Loaded: removing it is refused, without a question.
    q = Questions(monkeypatch, QMessageBox.StandardButton.Yes)
    messages: list[str] = []
    view.imports.message.connect(messages.append)
    click_row(qtbot, view.imports.table, 0)
    name = view.imports.selected().name
    qtbot.mouseClick(view.imports.forget_btn, Qt.MouseButton.LeftButton)
    assert q.asked == [] and messages[-1] == f"Not removing {name}: it is loaded: Unload it first"

    session.unload()
    compat.draft_combo.setCurrentIndex(compat.draft_combo.findData("none"))
    qtbot.waitUntil(lambda: compat.load_btn.isEnabled(), timeout=60000)
    qtbot.mouseClick(compat.load_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: session.engine is not None and not session.busy, timeout=60000)
    assert session.pair.target == mine and session.pair.draft is None
    session.unload()

    qtbot.mouseClick(view.imports.forget_btn, Qt.MouseButton.LeftButton)
    assert len(q.asked) == 1 and "Your file is not deleted" in q.asked[0] and str(mine) in q.asked[0]
    assert store.imported_models() == [] and mine.exists()
    assert view.imports.model.rowCount() == 0 and not view.imports.forget_btn.isEnabled()
    assert compat.target_combo.findData(str(mine)) < 0, "the forgotten file leaves the combination lists"
