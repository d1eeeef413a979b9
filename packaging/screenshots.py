"""Start the real app with a real small model, exercise each view, save screenshots.

    xvfb-run -a -s "-screen 0 1600x1000x24" .venv/bin/python packaging/screenshots.py [--model ID] [--out docs/screenshots]

Uses SmolLM2-135M (the store's copy; `tandem pull smollm2-135m-instruct-q4_1 --source mirror`)
as both target and draft unless --target/--draft are given, so it runs in a minute on a CPU.
The app's own data (history, settings) goes to a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target")
    ap.add_argument("--draft")
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    ap.add_argument("--size", default="1440x900")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tandem-shots-")
    os.environ["TANDEM_HOME"] = tmp
    os.environ.setdefault("TANDEM_METRICS_LOG", str(Path(tmp) / "metrics.jsonl"))

    from engine.models import store

    target = Path(a.target) if a.target else store.find_model("smollm2-135m-instruct-q4_1")
    if target is None:
        print("SmolLM2-135M is not in the store: run `tandem pull smollm2-135m-instruct-q4_1 --source mirror`", file=sys.stderr)
        return 2
    draft = Path(a.draft) if a.draft else target

    from PySide6.QtCore import QSettings, Qt
    from PySide6.QtWidgets import QApplication, QMessageBox

    from app.history import History
    from app.main_window import MainWindow

    app = QApplication([sys.argv[0]])
    QMessageBox.warning = lambda *x, **k: print("dialog:", x[2], file=sys.stderr)  # type: ignore[assignment]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    w, h = (int(x) for x in a.size.split("x"))
    win = MainWindow(history=History(Path(tmp) / "h.db"), settings=QSettings(str(Path(tmp) / "s.ini"), QSettings.Format.IniFormat), autoload=False)
    win.resize(w, h)
    win.show()

    def pump(seconds: float = 0.3) -> None:
        end = time.time() + seconds
        while time.time() < end:
            app.processEvents()
            time.sleep(0.01)

    def wait(cond, timeout: float = 180) -> None:
        end = time.time() + timeout
        while not cond() and time.time() < end:
            app.processEvents()
            time.sleep(0.02)
        if not cond():
            raise SystemExit("timed out waiting for the app")

    def shot(name: str) -> None:
        pump(0.5)
        path = out / f"{name}.png"
        win.grab().save(str(path))
        print(f"saved {path}")

    # Models first (nothing loaded yet): the catalog with fit verdicts
    win.nav.setCurrentRow(2)
    shot("models")
    win.session.load(target, draft, label=f"{target.stem} + {draft.stem}")
    wait(lambda: win.session.engine is not None)

    # Chat: two turns with the draft at lookahead 4, then one with Auto
    win.nav.setCurrentRow(0)
    chat = win.chat
    chat.apply_settings({"drafter": "model", "lookahead": 4, "temperature": 0.0, "max_tokens": 160})
    for q, drafter in (("Write a Python function that checks whether a string is a palindrome, with a docstring.", "model"),
                       ("Now add type hints to that function. Reply with the code only.", "lookup")):
        chat.apply_settings({"drafter": drafter, "lookahead": 4 if drafter == "model" else "auto",
                             "temperature": 0.0, "max_tokens": 160})
        chat.prompt.setPlainText(q)
        chat.send()
        wait(lambda: chat.worker is None)
    shot("chat")
    chat.legend.toggle.setChecked(False)  # Markdown rendering instead of provenance colours
    shot("chat-markdown")
    chat.legend.toggle.setChecked(True)

    # Race: target alone vs speculative, then the replay
    win.nav.setCurrentRow(1)
    race = win.views["Race"]
    if hasattr(race, "prompt"):
        race.prompt.setPlainText("Write a Python function that merges two sorted lists into one sorted list.")
    if hasattr(race, "start"):
        race.start()
        wait(lambda: getattr(race, "last_result", None) is not None or not win.session.busy, 300)
        pump(1.5)
    shot("race")

    # Bench: a small run
    win.nav.setCurrentRow(3)
    bench = win.views["Bench"]
    for i in range(bench.suites.count()):
        it = bench.suites.item(i)
        keep = it.data(Qt.ItemDataRole.UserRole) in ("code_editing", "chat")
        it.setCheckState(Qt.CheckState.Checked if keep else Qt.CheckState.Unchecked)
    bench.sweep.setText("1,2,4")
    bench.repeat.setValue(1)
    bench.limit.setValue(2)
    bench.max_tokens.setValue(48)
    bench.start()
    wait(lambda: bench.result is not None, 600)
    shot("bench")
    win.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
