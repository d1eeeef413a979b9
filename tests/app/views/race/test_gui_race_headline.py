"""The Race view's headline says first what makes its figure no measure of speculation (issue 45,
item 13): a busy machine showed a giant green "1.71x faster" above its own small print saying
the run was unreliable, and a replay of a stored answer read as a speedup."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from app import theme  # noqa: E402
from app.session import Session  # noqa: E402
from app.views.race import RaceView  # noqa: E402
from engine.decoding.engine_api import GenerationResult  # noqa: E402
from engine.decoding.events import RunStats  # noqa: E402
from engine.measure.racing import Comparison, RaceResult, judge, ratios  # noqa: E402


def _result(wall_s: float, others: dict | None = None, remembered: bool = False, **spec_kw) -> dict:
    base = RunStats(generated_tokens=40, steps=40, wall_s=1.71, decode_s=1.6, mode="target", lookahead="0").finalize()
    spec = RunStats(generated_tokens=40, steps=12, wall_s=wall_s, decode_s=wall_s - 0.1, mode="model",
                    lookahead="auto (k=2 x10)", drafted=30, accepted=28, **spec_kw).finalize()
    v = judge(base, spec, others_cpu=others, remembered=remembered)
    wall, decode = ratios(base, spec)
    race = RaceResult(GenerationResult("a", [1, 2], base), GenerationResult("a", [1, 2], spec), wall, decode,
                      Comparison(True, None), v.headline, v.detail, others or {}, v.kind, remembered)
    return {"target": race.target, "speculative": race.speculative, "identical": True, "divergence": None,
            "headline": race.headline, "detail": race.detail, "race": race}


@pytest.fixture
def view(qtbot):
    s = Session()
    v = RaceView(s)
    qtbot.addWidget(v)
    yield v
    v.stop_replay()
    s.shutdown()


def _colour(view) -> str:
    return view.speedup_label.styleSheet()


def test_a_measured_gain_is_green(view):
    view._on_result(_result(1.0))
    assert view.speedup_label.text() == "1.71x faster (wall-clock)"
    assert theme.palette(False).good in _colour(view)


def test_on_a_busy_machine_the_headline_says_so_first_in_no_colour(view):
    view._on_result(_result(1.0, others={"target": 0.05, "speculative": 0.62}))
    assert view.speedup_label.text() == "The machine was busy"
    assert view.speedup_hint.text().startswith("1.71x faster by the clock, but other programs took 5% of the CPU")
    assert _colour(view) == "" and view.bars.neutral


def test_a_replay_of_a_stored_answer_says_replayed_from_memory_not_faster(view):
    view._on_result(_result(0.45, remembered=True, accepted_by={"suffix:history": 26, "model": 2}))
    assert view.speedup_label.text() == "Replayed from memory"
    hint = view.speedup_hint.text()
    assert hint.startswith("3.80x faster because 26 of its 28 accepted draft tokens were copied from an answer "
                           "stored for this same prompt") and "--no-history-draft" in hint
    assert _colour(view) == "" and view.bars.neutral
    view._on_result(_result(0.45, remembered=False, accepted_by={"suffix:history": 26, "model": 2}))
    assert view.speedup_label.text() == "3.80x faster (wall-clock)", "memory of another prompt: a speedup"
