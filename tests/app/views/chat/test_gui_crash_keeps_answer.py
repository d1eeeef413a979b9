"""kill -9 in the middle of an answer keeps what had streamed: the chat writes the answer
being generated into the history as it goes (batched), and a reopen shows it, marked as
interrupted, with Continue offered.

The crash is real: a child process runs the app's window on a tiny model, sends a message
and, when the first tokens have reached the chat view, SIGKILLs itself (no close, no final
save). The parent reopens the database that process left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from app.history import History, stop_reason  # noqa: E402

ROOT = Path(__file__).resolve().parents[4]

CHILD = r"""
import os, signal, sys, time
from pathlib import Path
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication, QMessageBox
from app.history import History
from app.main_window import MainWindow

db, folder, model = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
app = QApplication([])
QMessageBox.warning = lambda *a, **k: print("warning:", a[2], flush=True) or QMessageBox.StandardButton.Ok
w = MainWindow(history=History(db), settings=QSettings(str(folder / "s.ini"), QSettings.Format.IniFormat),
               autoload=False)
w.session.load(model, None, label="tiny")
deadline = time.monotonic() + 300
while w.session.engine is None or w.session.busy:
    if time.monotonic() > deadline:
        sys.exit("the model did not load")
    app.processEvents()
    time.sleep(0.01)
chat = w.chat
chat.apply_settings({"drafter": "none", "max_tokens": 2000, "temperature": 0.0})
chat.prompt.setPlainText("Tell me a long story")
chat.send()
assert chat.worker is not None, "no answer started"
# after the chat view's own handler (connected first) has taken the tokens: die as kill -9 does
chat.worker.tokens.connect(lambda _tokens: os.kill(os.getpid(), signal.SIGKILL))
while True:
    if time.monotonic() > deadline:
        sys.exit("no tokens arrived")
    app.processEvents()
    time.sleep(0.005)
"""


def test_kill_9_mid_answer_keeps_what_streamed(tmp_path, tiny_target):
    db = tmp_path / "h.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run([sys.executable, "-c", CHILD, str(db), str(tmp_path), str(tiny_target)],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert out.returncode == -signal.SIGKILL, f"the child was to be killed mid-answer: {out.returncode}\n{out.stderr[-3000:]}"
    h = History(db)
    (conv,) = h.conversations()
    question, answer = h.messages(conv.id)
    assert question.content == "Tell me a long story"
    assert answer.role == "assistant" and answer.status == "generating"
    assert answer.content, "what had streamed before the crash is kept"
    assert sum(n for n, _ in answer.spans) == len(answer.content), "its colours are kept with it"
    assert stop_reason(answer) == "interrupted"
    h.close()


def test_the_answer_being_written_is_in_the_history_and_a_reopen_marks_it_interrupted(qtbot, tmp_path, monkeypatch,
                                                                                       tiny_target):
    """In-process: the row holds the partial text while the answer runs; a window opened on
    that row shows it with the "interrupted" badge and offers Continue."""
    from test_gui_chat_input import _load, _make_window
    from test_gui_transcript import _fragments

    w = _make_window(qtbot, tmp_path, monkeypatch)
    _load(qtbot, w, tiny_target)
    chat = w.chat
    chat.apply_settings({"drafter": "none", "max_tokens": 2000, "temperature": 0.0})
    seen: list[str] = []

    def look(_tokens: list) -> None:  # runs after the chat view's handler, while the answer is still open
        if not seen and chat.stream.message is not None:
            seen.append(w.history.message(chat.stream.message.id).content)

    chat.prompt.setPlainText("Tell me a long story")
    chat.send()
    chat.worker.tokens.connect(look)
    qtbot.waitUntil(lambda: bool(seen) or chat.worker is None, timeout=120000)
    chat.stop()  # enough seen: no need to wait for 2000 tokens on a busy machine
    qtbot.waitUntil(lambda: chat.worker is None, timeout=120000)
    assert seen and seen[0], "the row held the streamed text before the answer ended"
    assert chat.history.message(chat.transcript.last_answer_id()).content.startswith(seen[0])

    # the row as a crash leaves it, in another window
    answer = w.history.messages(chat.conversation_id)[-1]
    w.history.save_partial(answer.id, seen[0], [(len(seen[0]), "target")])
    w.history._db.execute("UPDATE messages SET status='generating' WHERE id=?", (answer.id,))
    w.history._db.commit()
    w.close()
    w2 = _make_window(qtbot, tmp_path, monkeypatch)
    w2.chat.open_conversation(answer.conversation_id)
    text = w2.chat.transcript.toPlainText()
    assert seen[0].strip()[:20] in text and "interrupted" in text
    hrefs = {f.charFormat().anchorHref() for _, f in _fragments(w2.chat.transcript)}
    assert f"msg:continue:{answer.id}" in hrefs, "Continue is offered for an interrupted answer"
    w2.close()
