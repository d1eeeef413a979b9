"""GUI-thread CPU of one streamed chat answer in the real window, without a model.

    DISPLAY=:94 python -m tools.gui_stream_cost ANSWER.md [TOK_PER_S=20] [REPEAT=3]

A shown `MainWindow` (a real X server such as Xvfb, or offscreen) loads a tiny generated
model, then a scripted engine writes ANSWER.md (a real answer: Markdown, code fences) at
TOK_PER_S, a few characters per token, with step events as a model draft makes them; no
model computes, so the figures are the window's own work: CPU seconds of the GUI thread
(psutil) per answer, of the X server when XVFB_PID names it, and the transcript's renders.
Env: CHARTS=0 hides the live charts; CHART_MS=N changes their redraw interval;
STREAM_MS=N the streaming answer's render interval;
CPROFILE=FILE profiles the last answer. On 2 cores every GUI-thread second is taken from
llama.cpp's compute threads (docs/benchmarks.md, section 7).
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    import psutil
    from PySide6.QtCore import QEventLoop, QSettings, QTimer
    from PySide6.QtWidgets import QApplication, QMessageBox

    from app.history import History
    from app.main_window import MainWindow
    from engine.decoding.events import DoneEvent, RunStats, StepEvent, TokenEvent
    from engine.models.tinymodel import write_model

    answer = Path(argv[0]).read_text()
    rate = float(argv[1]) if len(argv) > 1 else 20.0
    reps = int(argv[2]) if len(argv) > 2 else 3
    tmp = Path(tempfile.mkdtemp(prefix="gui-stream-cost-"))
    os.environ["TANDEM_HOME"] = str(tmp)
    app = QApplication.instance() or QApplication([sys.argv[0]])
    QMessageBox.question = lambda *a, **k: QMessageBox.StandardButton.Yes  # type: ignore[method-assign]
    w = MainWindow(history=History(tmp / "h.db"), settings=QSettings(str(tmp / "s.ini"), QSettings.Format.IniFormat),
                   autoload=False)
    w.resize(1360, 860)
    w.show()

    def wait(done, timeout_s: float = 120) -> None:
        loop, tick, end = QEventLoop(), QTimer(), QTimer()
        tick.setInterval(50)
        tick.timeout.connect(lambda: loop.quit() if done() else None)
        tick.start()
        end.setSingleShot(True)
        end.timeout.connect(loop.quit)
        end.start(int(timeout_s * 1000))
        if not done():
            loop.exec()
        tick.stop()

    model = write_model(tmp / "tiny.gguf", seed=1)
    w.session.load(model, model, label="tiny")
    wait(lambda: w.session.engine is not None)
    rng = random.Random(1)
    pieces, i = [], 0
    while i < len(answer):
        n = rng.choice([1, 2, 3, 4, 4, 5, 6])
        pieces.append(answer[i:i + n])
        i += n

    def stream(request, *a, **kw):
        t0, idx, step = time.perf_counter(), 0, 0
        while idx < len(pieces):
            group = pieces[idx:idx + rng.choice([1, 1, 2, 3])]
            time.sleep(len(group) / rate)
            for j, text in enumerate(group):
                yield TokenEvent(text, idx + j, rng.choice(["draft", "draft", "target", "bonus"]), idx + j, step,
                                 time.perf_counter() - t0)
            yield StepEvent(step, 3, 3, len(group) - 1, len(group), 1.0, 2.0, time.perf_counter() - t0)
            idx += len(group)
            step += 1
        yield DoneEvent(answer, list(range(len(pieces))),
                        RunStats(generated_tokens=len(pieces), decode_s=time.perf_counter() - t0).finalize())

    w.session.engine.stream = stream
    chat = w.chat
    chat.apply_settings({"drafter": "model", "lookahead": 3, "temperature": 0.0, "max_tokens": 512})
    if os.environ.get("CHARTS") == "0":
        chat.set_charts_visible(False)
    if os.environ.get("CHART_MS"):
        chat.charts._timer.setInterval(int(os.environ["CHART_MS"]))
    if os.environ.get("STREAM_MS"):
        import app.widgets.transcript.transcript as transcript

        transcript.STREAM_INTERVAL_MS = int(os.environ["STREAM_MS"])
    proc, main_id = psutil.Process(), threading.main_thread().native_id
    xserver = psutil.Process(int(os.environ["XVFB_PID"])) if os.environ.get("XVFB_PID") else None

    def cpu() -> tuple[float, float]:
        gui = sum(t.user_time + t.system_time for t in proc.threads() if t.id == main_id)
        return gui, (sum(xserver.cpu_times()[:2]) if xserver else 0.0)

    runs = []
    for r in range(reps):
        w._new_chat()
        chat.prompt.setPlainText("Write a Python function that parses a CSV line with quoted fields, with a docstring.")
        wait(lambda: False, 0.5)
        edits0, (gui0, x0) = chat.transcript.edits, cpu()
        prof = None
        if os.environ.get("CPROFILE") and r == reps - 1:
            import cProfile
            prof = cProfile.Profile()
            prof.enable()
        chat.send()
        wait(lambda: chat.worker is None, 600)
        if prof is not None:
            prof.disable()
            prof.dump_stats(os.environ["CPROFILE"])
        gui1, x1 = cpu()
        runs.append((gui1 - gui0, x1 - x0, chat.transcript.edits - edits0))
        print(f"answer {r}: GUI thread {runs[-1][0]:.2f} s, X server {runs[-1][1]:.2f} s, renders {runs[-1][2]}", flush=True)
    print(f"median: GUI thread {statistics.median(g for g, _, _ in runs):.2f} s, "
          f"X server {statistics.median(x for _, x, _ in runs):.2f} s")
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
