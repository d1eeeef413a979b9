"""The window must not eat the speed it shows: batched transcript, rate-limited charts,
coalesced worker signals, the live tok/s in the status bar, and the GUI-overhead benchmark
on a tiny model (pytest-qt, offscreen)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QSettings, Qt  # noqa: E402
from PySide6.QtGui import QColor, QFontMetrics  # noqa: E402

from app.history import History  # noqa: E402
from app.widgets.charts.live_stats import REFRESH_MS  # noqa: E402
from app.widgets.charts.charts import MAX_K, REDRAW_MS, ROLLING, LiveCharts, StepSeries, nice_ceiling  # noqa: E402
from app.widgets.transcript.markdown_render import render_markdown  # noqa: E402
from app.widgets.transcript.provenance import COLOURS  # noqa: E402
from app.widgets.transcript.transcript import Transcript, spans_from_tokens  # noqa: E402
from engine.decoding.events import StepEvent  # noqa: E402
from engine.decoding.request import GenerationRequest  # noqa: E402


def tok(text: str, prov: str) -> SimpleNamespace:
    return SimpleNamespace(text=text, provenance=prov)


def _merge(runs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Drop newlines (block separators carry no visible colour) and empty runs; merge neighbours."""
    out: list[tuple[str, str]] = []
    for text, prov in runs:
        text = text.replace("\n", "")
        if not text:
            continue
        if out and out[-1][1] == prov:
            out[-1] = (out[-1][0] + text, prov)
        else:
            out.append((text, prov))
    return out


def doc_runs(doc, start: int = 0) -> list[tuple[str, str]]:
    """A document's text from `start` as (text, provenance) runs, read back from its fragments' tint."""
    by_colour = {COLOURS[p].name(QColor.NameFormat.HexArgb): p for p in COLOURS if COLOURS[p].alpha()}
    runs: list[tuple[str, str]] = []
    block = doc.findBlock(start)
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            if frag.position() + frag.length() > start:
                text = frag.text()[max(0, start - frag.position()):]
                bg = frag.charFormat().background()
                prov = "plain"
                if bg.style() != Qt.BrushStyle.NoBrush:
                    prov = by_colour.get(bg.color().name(QColor.NameFormat.HexArgb), "unknown colour")
                runs.append((text, prov))
            it += 1
        block = block.next()
    return _merge(runs)


def shown_runs(tr: Transcript) -> list[tuple[str, str]]:
    """The streamed answer as shown: (text, provenance) runs of the document after its header."""
    return doc_runs(tr.document(), tr._stream_start)


def expected_runs(tokens: list) -> list[tuple[str, str]]:
    """The runs the whole answer has when rendered at once with its tokens' provenance."""
    text = "".join(t.text for t in tokens)
    return doc_runs(render_markdown(text, spans_from_tokens(tokens), COLOURS).document)


# -- the batched transcript --------------------------------------------------------------------
def test_transcript_batches_per_frame_with_colours_intact_across_batches(qtbot):
    tr = Transcript()
    qtbot.addWidget(tr)
    tr.begin_stream()
    # A provenance run that continues across batches, changes at a batch boundary, and
    # characters split across tokens: the engine sends "" for the first bytes and the whole
    # character with the token that completes it (é: 2 bytes, €: 3, 😀: 4 and two UTF-16 units).
    batches = [
        [tok("def ", "draft"), tok("f", "draft")],
        [tok("(x):", "draft"), tok("", "target"), tok("é", "target")],
        [tok("\n    ", "bonus"), tok("", "draft"), tok("", "draft"), tok("€", "draft")],
        [tok("", "draft"), tok("", "draft"), tok("", "draft"), tok("😀", "draft"), tok(" ok", "plain")],
        [tok("\n", "target"), tok("return x", "target")],
    ]
    for b in batches:
        tr.append_tokens(b)
    assert tr.stream_source() == "" and tr.edits == 0  # nothing before the next frame
    qtbot.waitUntil(lambda: tr.stream_source() != "", timeout=60000)
    everything = [t for b in batches for t in b]
    assert tr.stream_source() == "".join(t.text for t in everything)
    assert shown_runs(tr) == expected_runs(everything)  # rendered, each character in its token's colour
    assert tr.edits == 1 and tr.stream_renders == 1  # one edit per frame, one rendering of the open block


def test_transcript_text_is_the_engines_text(qtbot, tiny_target, tiny_draft):
    from engine import Engine

    eng = Engine(tiny_target, n_ctx=512, metrics_log=False)
    try:
        res = eng.generate("the value of", draft_model=tiny_draft, lookahead=3, max_tokens=120)
    finally:
        eng.close()
    assert {t.provenance for t in res.token_events} >= {"draft", "target"}
    tr = Transcript()
    qtbot.addWidget(tr)
    tr.begin_stream()
    rng = random.Random(7)
    events = list(res.token_events)
    i = 0
    while i < len(events):  # batches of random sizes, some flushed at once, some at the frame
        n = rng.randint(1, 9)
        tr.append_tokens(events[i:i + n])
        i += n
        if rng.random() < 0.4:
            tr.flush()
    tr.flush()
    assert tr.stream_source() == res.text
    assert shown_runs(tr) == expected_runs(events)


# -- rate-limited, incremental charts ---------------------------------------------------------
def _step_events(n: int, seed: int = 3) -> list[StepEvent]:
    rng = random.Random(seed)
    evs, t = [], 0.0
    for i in range(n):
        k = rng.choice([0, 0, 1, 3, 4, 6])
        acc = rng.randint(0, k)
        t += rng.uniform(0.01, 0.08)
        evs.append(StepEvent(i, k, k, acc, acc + 1, 1.0, 2.0, t))
    return evs


def _reference(evs: list[StepEvent]) -> dict[str, np.ndarray]:
    """The charts' data recomputed from the whole step series at once (the old way)."""
    d = np.array([e.drafted for e in evs], float)
    a = np.array([e.accepted for e in evs], float)
    e = np.cumsum([ev.emitted for ev in evs])
    t = np.array([ev.t for ev in evs])
    cum = np.divide(np.cumsum(a), np.cumsum(d), out=np.full(len(d), np.nan), where=np.cumsum(d) > 0)
    rd, ra = np.convolve(d, np.ones(ROLLING))[:len(d)], np.convolve(a, np.ones(ROLLING))[:len(a)]
    roll = np.divide(ra, rd, out=np.full(len(d), np.nan), where=rd > 0)
    lag = np.maximum(np.arange(len(t)) - ROLLING, 0)
    rate = np.divide(e - e[lag], t - t[lag], out=np.zeros(len(t)), where=(t - t[lag]) > 0)
    hist = np.bincount([ev.accepted for ev in evs if ev.drafted > 0], minlength=MAX_K + 1)[:MAX_K + 1]
    return {"roll": roll, "cum": cum, "rate": rate, "t": t, "hist": hist, "k": np.array([ev.k for ev in evs], float)}


def test_incremental_series_equals_the_full_computation():
    evs = _step_events(300)
    s = StepSeries()
    for ev in evs:
        s.add(ev)
    ref = _reference(evs)
    _, roll, cum = s.acceptance()
    np.testing.assert_allclose(roll, ref["roll"], equal_nan=True)
    np.testing.assert_allclose(cum, ref["cum"], equal_nan=True)
    t, rate = s.tokens_per_s()
    np.testing.assert_allclose(t, ref["t"])
    np.testing.assert_allclose(rate, ref["rate"])
    np.testing.assert_array_equal(s.histogram(), ref["hist"])
    assert s.live_rate() == pytest.approx(ref["rate"][-1])


def test_charts_redraw_at_a_bounded_rate_and_end_with_the_full_series(qtbot):
    charts = LiveCharts()
    qtbot.addWidget(charts)
    charts.resize(420, 500)
    charts.show()
    qtbot.waitExposed(charts)
    evs = _step_events(240)
    charts.reset()
    for i in range(0, len(evs), 2):  # 120 step batches arriving faster than a frame
        charts.add_steps(evs[i:i + 2])
    assert charts.redraws == 0  # nothing drawn per step: the timer draws later
    qtbot.waitUntil(lambda: charts.redraws >= 1, timeout=60000)
    qtbot.wait(350)
    assert charts.redraws == 1  # all of it in one redraw, and none while nothing changed
    t = evs[-1].t
    tail = [StepEvent(len(evs) + i, 0, 0, 0, 1, 0.0, 2.0, t + 0.05 * (i + 1)) for i in range(40)]
    charts.add_steps(tail)  # Auto stopped drafting: acceptance and histogram stay, speed and k go on
    qtbot.waitUntil(lambda: charts.redraws == 2, timeout=60000)
    evs = evs + tail
    ref = _reference(evs)
    drafted = np.array([e.drafted > 0 for e in evs])  # acceptance is plotted at the steps that drafted
    x, y = charts.acc_roll.getData()
    np.testing.assert_allclose(x, np.arange(len(evs))[drafted])
    np.testing.assert_allclose(y, ref["roll"][drafted])
    np.testing.assert_allclose(charts.acc_cum.getData()[1], ref["cum"][drafted])
    x, y = charts.tps_curve.getData()
    np.testing.assert_allclose(x, ref["t"])
    np.testing.assert_allclose(y, ref["rate"])
    np.testing.assert_allclose(charts.k_curve.getData()[1], ref["k"])
    np.testing.assert_array_equal(charts.hist_bars.opts["height"], ref["hist"])
    # the axes grew to nice bounds that contain the data
    assert charts.acc_plot.viewRange()[0][1] == pytest.approx(nice_ceiling(len(evs), 16))
    assert nice_ceiling(len(evs), 16) >= len(evs)
    assert charts.tps_plot.viewRange()[1][1] >= ref["rate"].max()


def test_hidden_charts_do_no_drawing_and_catch_up_when_shown(qtbot):
    charts = LiveCharts()
    qtbot.addWidget(charts)
    charts.show()
    qtbot.waitExposed(charts)
    charts.hide()
    evs = _step_events(50)
    charts.add_steps(evs)
    qtbot.wait(350)
    assert charts.redraws == 0
    charts.show()
    qtbot.waitUntil(lambda: charts.redraws == 1, timeout=60000)
    np.testing.assert_allclose(charts.k_curve.getData()[1], [e.k for e in evs])


def test_nice_ceiling():
    assert [nice_ceiling(x, 1) for x in (0, 0.5, 1, 1.2, 3, 7, 10, 11, 99, 101, 430)] == [1, 1, 1, 2, 5, 10, 10, 20, 100, 200, 500]
    assert nice_ceiling(17, 16) == 20 and nice_ceiling(3, 16) == 16 and nice_ceiling(float("nan"), 10) == 10


# -- the worker and the whole window ----------------------------------------------------------
@pytest.fixture
def window(qtbot, tmp_path, monkeypatch, tiny_target):
    from PySide6.QtWidgets import QMessageBox

    from app.main_window import MainWindow

    monkeypatch.setattr(QMessageBox, "warning", lambda *a, **k: QMessageBox.StandardButton.Ok)
    w = MainWindow(history=History(tmp_path / "h.db"), settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat), autoload=False)
    qtbot.addWidget(w)
    w.show()
    w.session.load(tiny_target, tiny_target, label="tiny self-draft")
    qtbot.waitUntil(lambda: w.session.engine is not None, timeout=60000)
    yield w
    w.close()


def test_worker_signals_come_once_per_frame_not_per_token(qtbot, window):
    import time

    from app import workers

    chat = window.chat
    chat.apply_settings({"drafter": "model", "lookahead": 2, "temperature": 0.0, "max_tokens": 1500})
    emissions = {"tokens": 0, "steps": 0, "n_tokens": 0}
    chat.prompt.setPlainText("the value of")
    t0 = time.perf_counter()
    chat.send()
    w = chat.worker
    w.tokens.connect(lambda toks: emissions.update(tokens=emissions["tokens"] + 1, n_tokens=emissions["n_tokens"] + len(toks)))
    w.steps.connect(lambda steps: emissions.update(steps=emissions["steps"] + 1))
    qtbot.waitUntil(lambda: chat.worker is None, timeout=60000)
    wall = time.perf_counter() - t0
    answer = window.history.messages(chat.conversation_id)[-1]
    assert answer.stats["generated_tokens"] > 200
    frames = wall / workers.FRAME_S + 2
    assert emissions["tokens"] <= frames and emissions["steps"] <= frames
    assert emissions["n_tokens"] > 0 and emissions["tokens"] <= emissions["steps"] + 1  # text travels with its steps



class _PausingEngine:
    """Two quick steps, then a long silence (as before Auto's first draft catch-up), then done."""

    PAUSE_S = 1.5

    def __init__(self) -> None:
        from engine.decoding.queue import GenerationQueue

        self.queue = GenerationQueue()  # every engine owns its queue (the workers take turns in it)

    def stream(self, request, cancel=None, **kw):
        import time

        from engine.decoding.events import DoneEvent, RunStats, TokenEvent

        for i in range(2):
            yield TokenEvent(f"w{i} ", i, "plain", i, i, 0.0)
            yield StepEvent(i, 0, 0, 0, 1, 0.0, 5.0, 0.0)
        time.sleep(self.PAUSE_S)
        yield DoneEvent("w0 w1 ", [0, 1], RunStats(generated_tokens=2))


@pytest.mark.parametrize("kind", ["chat", "race"])
def test_tokens_before_a_long_pause_reach_the_gui_within_a_frame_or_two(qtbot, monkeypatch, kind):
    """The worker flushes when the next event comes; a token followed by a pause must not
    wait for the pause to end (it did, by up to the whole pause, before LateFlush)."""
    import threading
    import time

    from app import workers

    arrived: dict[str, float] = {}
    threads: set[str] = set()

    def receiver(name: str):
        def note(*args) -> None:
            threads.add(threading.current_thread().name)
            arrived.setdefault(name, time.perf_counter())
        return note

    if kind == "chat":
        w = workers.GenerationWorker(_PausingEngine(), GenerationRequest.from_options("hi", lookahead=0, max_tokens=4))
        w.tokens.connect(receiver("tokens"))
        w.done.connect(receiver("done"))
    else:
        from engine.measure import racing

        def fake_race(engine, request, on_event, cancel):
            for ev in engine.stream(request):
                on_event("target", ev)

        monkeypatch.setattr(racing, "race", fake_race)
        w = workers.RaceWorker(_PausingEngine(), GenerationRequest.from_options("hi", lookahead=0, max_tokens=4))
        w.tokens.connect(receiver("tokens"))
        w.side_done.connect(receiver("done"))
    w.finished.connect(receiver("finished"))
    t0 = time.perf_counter()
    thread = workers.start(w)  # held: a running QThread must not be garbage-collected
    qtbot.waitUntil(lambda: "finished" in arrived, timeout=60000)
    qtbot.wait(50)  # its thread quits and is deleted by Qt
    del thread
    assert arrived["done"] - t0 >= _PausingEngine.PAUSE_S
    assert arrived["tokens"] - t0 < 4 * workers.FRAME_S + 0.3  # not at the end of the pause
    assert threads == {threading.main_thread().name}  # plain callables too run on the GUI thread


def test_race_rewrites_its_live_speed_a_few_times_a_second_not_per_batch(qtbot, window):
    """A label's new text re-lays out the window: per token batch that took CPU from
    the compute threads of the race's target-alone side."""
    import time

    race = window.views["Race"]
    window.nav.setCurrentRow(1)
    race.prompt.setPlainText("the value of")
    race.max_tokens.setValue(1500)
    race.lookahead.set_value(2)
    live, batches, shown = [], [], []
    window.session.liveSpeed.connect(live.append)
    race.raceFinished.connect(lambda _r: shown.append(race.panes["target"].speed.text()))
    t0 = time.perf_counter()
    with qtbot.waitSignal(race.raceFinished, timeout=120000) as res:
        race.start()
        race.worker.tokens.connect(lambda side, toks: batches.append(side))
    wall = time.perf_counter() - t0
    # The replay begins when the race's worker has ended, which comes after its result: on a
    # busy machine a Stop sent at the result found no replay yet to stop.
    qtbot.waitUntil(lambda: race.replaying, timeout=60000)
    race.stop_replay()
    r = res.args[0]
    assert r["target"].stats.generated_tokens > 200
    assert len(batches) > 2 * (wall * 4 + 3), "the tiny model must stream many batches for this test to mean anything"
    rates = [v for v in live if v > 0]
    assert 0 < len(rates) <= wall * 1000 / REFRESH_MS + 3, (len(rates), wall)
    assert race.panes["target"].markdown() == r["target"].text
    assert shown == [f"{r['target'].stats.decode_tokens_per_s:.1f} tok/s"]  # the final figure, not a late live one
    for side in ("target", "speculative"):  # a replay stopped early shows the runs' final figures
        assert race.panes[side].speed.text().startswith("✓ "), race.panes[side].speed.text()


def test_status_bar_shows_live_speed_with_glyphs_the_font_has(qtbot, window):
    chat = window.chat
    chat.apply_settings({"drafter": "none", "max_tokens": 20000})
    chat.prompt.setPlainText("the value of")
    chat.send()
    qtbot.waitUntil(lambda: window.speed_label.text().endswith("tok/s"), timeout=60000)
    assert float(window.speed_label.text().split()[0]) > 0
    busy = window.busy_label.text()
    assert "chat" in busy
    fm = QFontMetrics(window.busy_label.font())
    assert all(fm.inFontUcs4(ord(c)) for c in busy if not c.isspace()), busy
    chat.stop()
    qtbot.waitUntil(lambda: chat.worker is None, timeout=60000)
    qtbot.waitUntil(lambda: window.speed_label.text() == "", timeout=60000)


def test_gui_overhead_benchmark_on_a_tiny_model(tiny_target):
    """The real figure (default pair, 2 cores) is in docs/benchmarks.md; this catches gross
    regressions such as a redraw or a layout per token: counts first, then a loose ratio."""
    from tools import bench_gui

    res = bench_gui.run(str(tiny_target), str(tiny_target), lookahead=3, max_tokens=400, repeat=1,
                        modes=("chat", "chat-nocharts"), prompt="the value of")
    rows = res.summary()
    chat = next(r for r in res.runs[0] if r.mode == "chat")
    assert rows["chat"]["identical"] and rows["chat-nocharts"]["identical"]
    assert chat.tokens > 100
    assert chat.redraws <= chat.wall_s * 1000 / REDRAW_MS + 3  # the redraw rate, whatever the token rate
    assert chat.edits <= chat.wall_s * 62 + 3  # text lands once per frame, not per token
    hidden = next(r for r in res.runs[0] if r.mode == "chat-nocharts")
    assert hidden.redraws == 0
    assert rows["chat"]["ratio"] > 0.25, rows
