"""The streaming answer takes little of the GUI thread: a few renders a second (the tokens
that arrive meanwhile join the next one), highlighting that colours each run of one colour
once, and the code lexer made before the first answer needs it (pytest-qt, offscreen)."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from app.widgets.transcript import code_highlight, transcript  # noqa: E402
from app.widgets.transcript.code_highlight import PALETTE, token_colours  # noqa: E402
from app.widgets.transcript.transcript import FRAME_MS, STREAM_INTERVAL_MS, Transcript  # noqa: E402


class Tok:
    def __init__(self, text: str, provenance: str = "draft"):
        self.text, self.provenance = text, provenance


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(transcript.time, "monotonic", c)
    return c


def test_after_a_render_the_next_waits_for_the_stream_interval(qtbot, clock):
    assert STREAM_INTERVAL_MS >= 4 * FRAME_MS  # the point: far fewer renders than frames
    tr = Transcript()
    qtbot.addWidget(tr)
    tr.begin_stream()
    tr.append_tokens([Tok("The first")])
    assert tr._frame.isActive() and tr._frame.interval() == FRAME_MS  # the first tokens show within a frame
    tr.flush()
    assert tr.edits == 1
    clock.now += 0.050
    tr.append_tokens([Tok(" words")])
    assert tr._frame.interval() == STREAM_INTERVAL_MS - 50  # not before the interval has passed
    for word in (" of", " the", " answer"):  # more deliveries meanwhile: the timer is not restarted
        clock.now += 0.040
        tr.append_tokens([Tok(word)])
        assert tr._frame.interval() == STREAM_INTERVAL_MS - 50
    tr.flush()
    assert tr.edits == 2 and tr.stream_renders == 2  # four deliveries, one render
    assert tr.stream_source() == "The first words of the answer"
    clock.now += 1.0  # a pause longer than the interval: the next tokens show within a frame again
    tr.append_tokens([Tok(".")])
    assert tr._frame.interval() == FRAME_MS
    tr.begin_stream()  # a new answer starts without waiting for the last one's render
    tr.append_tokens([Tok("Next")])
    assert tr._frame.interval() == FRAME_MS


def test_the_queued_tokens_render_when_the_timer_fires(qtbot):
    tr = Transcript()
    qtbot.addWidget(tr)
    tr.begin_stream()
    tr.append_tokens([Tok("one")])
    qtbot.waitUntil(lambda: tr.edits == 1, timeout=60000)
    tr.append_tokens([Tok(" two")])
    tr.append_tokens([Tok(" three")])
    qtbot.waitUntil(lambda: tr.edits == 2, timeout=60000)
    assert tr.stream_text() == "one two three"


def test_adjacent_tokens_of_one_colour_are_coloured_as_one_run():
    strings = dict(PALETTE)["Literal.String"]
    # Pygments splits a string into its quotes and its text: three tokens, one colour
    assert token_colours("s = 'abc'", "python") == [(4, 5, strings)]
    runs = token_colours("def f(x):\n    return 'a' + 'b'  # done\n", "python")
    assert [(a, n) for a, n, _ in runs] == [(0, 3), (4, 1), (14, 6), (21, 3), (27, 3), (32, 6)]
    assert all(earlier[0] + earlier[1] < later[0] or earlier[2] is not later[2] for earlier, later in zip(runs, runs[1:]))


def test_the_python_lexer_is_made_when_a_pair_loads_not_at_the_first_code_block(qtbot, monkeypatch, tmp_path, tiny_target):
    from PySide6.QtCore import QSettings

    from app.history import History
    from app.main_window import MainWindow

    made: list[str] = []
    monkeypatch.setattr(code_highlight, "_lexer", made.append)
    w = MainWindow(history=History(tmp_path / "h.db"), settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat),
                   autoload=False)
    qtbot.addWidget(w)
    qtbot.wait(50)
    assert made == []  # not at start: the window shows first
    w.session.load(tiny_target, tiny_target, label="tiny self-draft")
    qtbot.waitUntil(lambda: made == ["python"], timeout=20000)


def test_the_live_charts_redraw_at_most_once_a_second(qtbot):
    """Their redraw and its paint were the largest GUI cost of a streaming answer (py-spy,
    docs/benchmarks.md section 7: still 48% of the GUI thread's busy time at twice a second):
    trends, not figures, so once a second is live enough."""
    from app.widgets.charts.charts import REDRAW_MS, LiveCharts

    charts = LiveCharts()
    qtbot.addWidget(charts)
    assert charts._timer.interval() == REDRAW_MS >= 1000
