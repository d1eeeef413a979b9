"""GUI-overhead benchmark: does the window eat the speed it shows?

    python -m tools.bench_gui --target T.gguf [--draft D.gguf|lookup|none] [--lookahead auto]
                            [--max-tokens 352] [--repeat 3] [--modes chat,chat-nocharts,race] [--json F]

One process, one loaded engine. Each repetition runs, in an order rotated per repetition
so machine drift hits every mode alike:
- `engine`: `Engine.generate` on the GUI thread (the event loop idle: the engine alone),
- `chat`: the same prompt typed into the real Chat view of a shown main window, sent,
  streamed with every chart visible, until the answer is stored,
- `chat-nocharts`: the same with the live charts switched off,
- `race`: the Race view's start(): target alone then target + drafter, both streamed
  (compared with `Engine.generate` without and with the drafter).
Speeds are the engine's own decode tok/s of each run; ratios are per repetition against
the engine run of the same repetition, reported as median (min-max). Outputs are compared
too: greedy runs of the window and of the engine must write the same text.

The window runs on whatever Qt platform is set (offscreen when there is no display, or a
real X server such as Xvfb).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

PROMPT = "Write a Python function that parses a CSV line with quoted fields, with a docstring."
MODES = ("chat", "chat-nocharts", "race")


@dataclass
class Run:
    mode: str
    tok_s: float
    tokens: int
    text: str
    gui_cpu_s: float = 0.0  # CPU time of the GUI (main) thread during the run
    cpu_s: float = 0.0  # CPU time of the whole process during the run
    wall_s: float = 0.0
    redraws: int = 0  # chart redraws during the run (Chat)
    edits: int = 0  # streaming edits of the transcript during the run (Chat)


class _CpuClock:
    """CPU seconds of the main thread and of the process (psutil), to show where time goes."""

    def __init__(self) -> None:
        import threading

        import psutil

        self.proc = psutil.Process()
        self.main_id = threading.main_thread().native_id

    def read(self) -> tuple[float, float, float]:
        threads = self.proc.threads()
        main = sum(t.user_time + t.system_time for t in threads if t.id == self.main_id)
        total = self.proc.cpu_times()
        return main, total.user + total.system, time.perf_counter()


@dataclass
class GuiBench:
    """Every run, and per GUI mode the ratio to `Engine.generate` in the same repetition."""

    platform: str
    target: str
    draft: str | None
    lookahead: str
    max_tokens: int
    repeat: int
    runs: list[list[Run]] = field(default_factory=list)  # per repetition

    def speeds(self, mode: str) -> list[float]:
        return [r.tok_s for rep in self.runs for r in rep if r.mode == mode]

    def ratios(self, mode: str, baseline: str) -> list[float]:
        out = []
        for rep in self.runs:
            by = {r.mode: r for r in rep}
            if mode in by and baseline in by and by[baseline].tok_s > 0:
                out.append(by[mode].tok_s / by[baseline].tok_s)
        return out

    def identical(self, mode: str, baseline: str) -> bool:
        return all({r.mode: r for r in rep}[mode].text == {r.mode: r for r in rep}[baseline].text
                   for rep in self.runs if mode in {r.mode for r in rep})

    def summary(self) -> dict[str, Any]:
        modes = [m for m in ("engine", "engine-target", "chat", "chat-nocharts", "race-target", "race-speculative")
                 if self.speeds(m)]
        rows = {}
        for m in modes:
            base = BASELINE.get(m)
            row: dict[str, Any] = {"tok_s": statistics.median(self.speeds(m)),
                                   "gui_cpu_s": statistics.median(r.gui_cpu_s for rep in self.runs for r in rep if r.mode == m)}
            if base:
                rs = self.ratios(m, base)
                row.update(ratio=statistics.median(rs), ratio_min=min(rs), ratio_max=max(rs),
                           identical=self.identical(m, base), baseline=base)
            rows[m] = row
        return rows

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["summary"] = self.summary()
        return d


BASELINE = {"chat": "engine", "chat-nocharts": "engine", "race-target": "engine-target", "race-speculative": "engine"}


class _Harness:
    """A shown main window with a loaded pair, and ways to run one generation in each mode."""

    def __init__(self, target: str, draft: Any, *, lookahead: Any, max_tokens: int, prompt: str, tmp: Path):
        from PySide6.QtCore import QSettings
        from PySide6.QtWidgets import QApplication, QMessageBox

        from app.history import History
        from app.main_window import MainWindow

        self.app = QApplication.instance() or QApplication([sys.argv[0]])
        self.errors: list[str] = []
        self._warning = QMessageBox.warning  # no modal dialog may block an unattended run
        QMessageBox.warning = lambda *a, **k: self.errors.append(str(a[2])) or QMessageBox.StandardButton.Ok  # type: ignore[method-assign]
        self.win = MainWindow(history=History(tmp / "history.db"),
                              settings=QSettings(str(tmp / "settings.ini"), QSettings.Format.IniFormat), autoload=False)
        self.win.resize(1360, 860)
        self.win.show()
        self.draft, self.lookahead, self.max_tokens, self.prompt = draft, lookahead, max_tokens, prompt
        self.win.session.load(target, draft if draft is not None else None, label="bench")
        self._wait(lambda: self.win.session.engine is not None or bool(self.errors), 600)
        if self.win.session.engine is None:
            raise RuntimeError(f"could not load the pair: {'; '.join(self.errors) or 'unknown error'}")
        self.engine = self.win.session.engine

    def _wait(self, done: Callable[[], bool], timeout_s: float) -> None:
        """Run the real event loop (no busy polling: that would cost CPU) until `done()`."""
        from PySide6.QtCore import QEventLoop, QTimer

        loop = QEventLoop()
        check = QTimer()
        check.setInterval(100)
        check.timeout.connect(lambda: loop.quit() if done() else None)
        check.start()
        deadline = QTimer()
        deadline.setSingleShot(True)
        deadline.timeout.connect(loop.quit)
        deadline.start(int(timeout_s * 1000))
        if not done():
            loop.exec()
        check.stop()
        if not done():
            raise TimeoutError(f"no result within {timeout_s:.0f} s")

    def engine_run(self, with_draft: bool) -> Run:
        """`Engine.generate` alone: the GUI thread waits (no event is processed meanwhile).

        It runs on a fresh thread, as the app's workers and the CLI do: libgomp (llama.cpp's
        OpenMP build) keeps a pool per thread that ever computed, and once it manages more
        threads than there are cores it cuts its spin-wait to 100 iterations, which cost
        ~30% of decode speed here. Computing once on the GUI thread would leave such a pool
        behind and slow every later run in the window, which the app itself never does.
        """
        import threading

        out: list[Any] = []

        def go() -> None:
            try:
                out.append(self.engine.generate(self.prompt, chat=True, draft_model=self.draft if with_draft else None,
                                                lookahead=self.lookahead if with_draft else 0, max_tokens=self.max_tokens,
                                                temperature=0.0, tag="bench-gui"))
            except BaseException as e:  # re-raised on the calling thread
                out.append(e)

        t = threading.Thread(target=go, name="bench-engine")
        t.start()
        t.join()
        r = out[0]
        if isinstance(r, BaseException):
            raise r
        return Run("engine" if with_draft else "engine-target", r.stats.decode_tokens_per_s, r.stats.generated_tokens, r.text)

    def chat_run(self, charts: bool) -> Run:
        chat = self.win.chat
        self.win.nav.setCurrentRow(0)
        chat.set_charts_visible(charts)
        chat.new_conversation()
        drafter = "none" if self.draft is None else ("lookup" if self.draft == "lookup" else "model")
        chat.apply_settings({"drafter": drafter, "lookahead": self.lookahead, "temperature": 0.0, "top_p": 1.0,
                             "seed": None, "max_tokens": self.max_tokens, "system": ""})
        chat.prompt.setPlainText(self.prompt)
        redraws0, edits0 = getattr(chat.charts, "redraws", 0), getattr(chat.transcript, "edits", 0)
        chat.send()
        if chat.worker is None:
            raise RuntimeError(f"the chat view did not start: {'; '.join(self.errors)}")
        self._wait(lambda: chat.worker is None, 3600)
        answer = self.win.history.messages(chat.conversation_id)[-1]
        if answer.status != "complete" or not answer.stats:
            raise RuntimeError(f"the chat answer ended as {answer.status}: {'; '.join(self.errors)}")
        run = Run("chat" if charts else "chat-nocharts", float(answer.stats["decode_tokens_per_s"]),
                  int(answer.stats["generated_tokens"]), answer.content,
                  redraws=getattr(chat.charts, "redraws", 0) - redraws0, edits=getattr(chat.transcript, "edits", 0) - edits0)
        chat.set_charts_visible(True)
        return run

    def race_run(self) -> list[Run]:
        race = self.win.views["Race"]
        self.win.nav.setCurrentRow(1)
        race.prompt.setPlainText(self.prompt)  # type: ignore[attr-defined]
        race.max_tokens.setValue(self.max_tokens)  # type: ignore[attr-defined]
        race.temperature.setValue(0.0)  # type: ignore[attr-defined]
        race.lookahead.set_value(self.lookahead)  # type: ignore[attr-defined]
        if self.draft == "lookup":
            race.drafter.setCurrentIndex(race.drafter.findData("lookup"))  # type: ignore[attr-defined]
        got: list[dict] = []
        race.raceFinished.connect(got.append)  # type: ignore[attr-defined]
        race.start()  # type: ignore[attr-defined]
        try:
            self._wait(lambda: bool(got) and race.worker is None, 3600)  # type: ignore[attr-defined]
        finally:
            race.raceFinished.disconnect(got.append)  # type: ignore[attr-defined]
            # The view replays a finished race side by side on its own; left running, that
            # animation would share the CPU with the next job and skew its figure.
            race.stop_replay()  # type: ignore[attr-defined]
            self.win.nav.setCurrentRow(0)
        r = got[0]
        return [Run(f"race-{side}", r[side].stats.decode_tokens_per_s, r[side].stats.generated_tokens, r[side].text)
                for side in ("target", "speculative")]

    def close(self) -> None:
        from PySide6.QtWidgets import QMessageBox

        self.win.close()
        self.app.processEvents()
        QMessageBox.warning = self._warning  # type: ignore[method-assign]


def run(target: str, draft: Any = None, *, lookahead: Any = "auto", max_tokens: int = 352, repeat: int = 3,
        modes: tuple[str, ...] = MODES, prompt: str = PROMPT, progress: Callable[[str], None] | None = None) -> GuiBench:
    """Interleaved repetitions of every mode plus its `Engine.generate` baseline."""
    say = progress or (lambda _s: None)
    unknown = set(modes) - set(MODES)
    if unknown:
        raise ValueError(f"unknown mode(s) {', '.join(sorted(unknown))}; choose from {', '.join(MODES)}")
    if "race" in modes and draft is None:
        raise ValueError("the race needs a drafter (--draft D.gguf or lookup)")
    from PySide6.QtGui import QGuiApplication

    with tempfile.TemporaryDirectory() as tmp:
        h = _Harness(target, draft, lookahead=lookahead, max_tokens=max_tokens, prompt=prompt, tmp=Path(tmp))
        try:
            res = GuiBench(QGuiApplication.platformName(), Path(target).name,
                           None if draft is None else (draft if draft == "lookup" else Path(draft).name),
                           str(lookahead), max_tokens, repeat)
            jobs: list[tuple[str, Callable[[], list[Run]]]] = [("engine", lambda: [h.engine_run(True)])]
            if "race" in modes:
                jobs.append(("engine-target", lambda: [h.engine_run(False)]))
            if "chat" in modes:
                jobs.append(("chat", lambda: [h.chat_run(True)]))
            if "chat-nocharts" in modes:
                jobs.append(("chat-nocharts", lambda: [h.chat_run(False)]))
            if "race" in modes:
                jobs.append(("race", h.race_run))
            say("warm-up (loads pages, calibrates Auto)")
            for _name, job in jobs:
                job()
            clock = _CpuClock()
            for i in range(repeat):
                rep: list[Run] = []
                rot = i % len(jobs)
                for name, job in jobs[rot:] + jobs[:rot]:
                    g0, c0, t0 = clock.read()
                    runs = job()
                    g1, c1, t1 = clock.read()
                    for r in runs:  # a race's two runs share the figures of the whole race
                        r.gui_cpu_s, r.cpu_s, r.wall_s = g1 - g0, c1 - c0, t1 - t0
                    rep.extend(runs)
                    say(f"rep {i + 1}/{repeat} {name}: " + ", ".join(f"{r.mode} {r.tok_s:.1f} tok/s ({r.tokens} tokens)"
                                                                       for r in runs)
                        + f" [{t1 - t0:.1f} s wall, GUI thread {g1 - g0:.2f} s CPU, process {c1 - c0:.1f} s CPU"
                        + "".join(f", {r.redraws} chart redraws, {r.edits} text edits" for r in runs if r.mode.startswith("chat"))
                        + "]")
                res.runs.append(rep)
            return res
        finally:
            h.close()


def format_summary(res: GuiBench) -> str:
    lines = [f"platform {res.platform}, target {res.target}, draft {res.draft}, lookahead {res.lookahead}, "
             f"{res.max_tokens} tokens max, {res.repeat} repetitions (medians, min-max)"]
    for mode, row in res.summary().items():
        line = f"  {mode:17s} {row['tok_s']:7.1f} tok/s  GUI thread {row['gui_cpu_s']:5.2f} s CPU"
        if "ratio" in row:
            line += (f"   {row['ratio']:.3f}x of {row['baseline']} ({row['ratio_min']:.3f}-{row['ratio_max']:.3f}),"
                     f" output {'identical' if row['identical'] else 'DIFFERENT'}")
        lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.bench_gui", description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True, help="target GGUF")
    ap.add_argument("--draft", default=None, help="draft GGUF, 'lookup' or 'none' (default: none)")
    ap.add_argument("--lookahead", default="auto", help="0-16 or auto (default auto)")
    ap.add_argument("--max-tokens", type=int, default=352)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, from {','.join(MODES)}")
    ap.add_argument("--prompt", default=PROMPT)
    ap.add_argument("--json", dest="json_out", help="write every run and the summary to this file")
    args = ap.parse_args(argv)
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    draft: Any = None if args.draft in (None, "none") else ("lookup" if args.draft == "lookup" else args.draft)
    la: Any = args.lookahead if args.lookahead == "auto" else int(args.lookahead)
    for p in [args.target] + ([draft] if draft not in (None, "lookup") else []):
        if not Path(p).is_file():
            print(f"bench_gui: error: {p}: no such file", file=sys.stderr)
            return 2
    try:
        res = run(args.target, draft, lookahead=la, max_tokens=args.max_tokens, repeat=args.repeat,
                  modes=tuple(m.strip() for m in args.modes.split(",") if m.strip()), prompt=args.prompt,
                  progress=lambda s: print(s, flush=True))
    except (ValueError, RuntimeError, TimeoutError) as e:
        print(f"bench_gui: error: {e}", file=sys.stderr)
        return 2
    print(format_summary(res))
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(res.to_dict(), indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
