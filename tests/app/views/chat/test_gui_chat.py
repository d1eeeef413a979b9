"""The chat view through the real engine on tiny models (pytest-qt, offscreen)."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtWidgets import QMessageBox  # noqa: E402

from app.history import History  # noqa: E402


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch, tiny_target):
    from app.main_window import MainWindow

    errors: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning", lambda *a, **k: errors.append(a[2]) or QMessageBox.StandardButton.Ok)
    w = MainWindow(history=History(tmp_path / "h.db"), settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat), autoload=False)
    w.errors = errors  # type: ignore[attr-defined]
    qtbot.addWidget(w)
    w.session.load(tiny_target, tiny_target, label="tiny self-draft")
    qtbot.waitUntil(lambda: w.session.engine is not None, timeout=60000)
    yield w
    w.close()


def _send(qtbot, w, text: str, **settings) -> None:
    chat = w.chat
    chat.apply_settings({"drafter": "model", "lookahead": 4, "temperature": 0.0, "max_tokens": 60, **settings})
    chat.prompt.setPlainText(text)
    chat.send()
    qtbot.waitUntil(lambda: chat.worker is None, timeout=30000)


def test_message_streams_with_provenance_and_is_stored(qtbot, window):
    chat = window.chat
    got: list = []
    chat.transcript.append_tokens = lambda toks, orig=chat.transcript.append_tokens: (got.extend(toks), orig(toks))
    _send(qtbot, window, "the value of")
    assert len(got) == 60
    assert {t.provenance for t in got} <= {"draft", "bonus", "target", "plain"}
    assert any(t.provenance == "draft" for t in got)
    msgs = window.history.messages(chat.conversation_id)
    assert [m.role for m in msgs] == ["user", "assistant"]
    answer = msgs[1]
    assert answer.status == "complete" and answer.content == "".join(t.text for t in got)
    assert sum(n for n, _ in answer.spans) == len(answer.content)
    assert answer.stats["acceptance_rate"] == 1.0
    assert "tok/s" in chat.stats_label.text() and "acceptance 100%" in chat.stats_label.text()
    assert answer.content[:20] in chat.transcript.toPlainText()
    assert len(chat.charts.series) > 0 and chat.charts.series.histogram().sum() > 0


def test_slider_moved_mid_generation_changes_lookahead(qtbot, window):
    chat = window.chat
    chat.apply_settings({"drafter": "model", "lookahead": 1, "max_tokens": 3000})
    seen: list[int] = []
    moved, stopped = [], []

    def on_steps(steps):
        seen.extend(s.k for s in steps)
        if not moved and len(seen) >= 3:
            moved.append(True)
            chat.lookahead.slider.setValue(6)  # what a user's drag does
        elif moved and not stopped and seen.count(6) >= 8:
            stopped.append(True)
            chat.stop()  # seen enough: a busy machine need not write all 3000 tokens

    chat.prompt.setPlainText("the value of")
    chat.send()
    chat.worker.steps.connect(on_steps)
    qtbot.waitUntil(lambda: chat.worker is None, timeout=240000)
    assert seen[0] == 1 and seen.count(6) >= 8
    first6 = seen.index(6)
    assert set(seen[:first6]) == {1} and set(seen[first6:-3]) == {6}


def test_stop_keeps_the_partial_answer(qtbot, window):
    chat = window.chat
    chat.apply_settings({"drafter": "none", "max_tokens": 4000})
    chat.prompt.setPlainText("the value of")
    chat.send()
    chat.worker.tokens.connect(lambda toks: chat.stop())
    qtbot.waitUntil(lambda: chat.worker is None, timeout=30000)
    answer = window.history.messages(chat.conversation_id)[-1]
    assert answer.status == "stopped"
    assert 0 < answer.stats["generated_tokens"] < 4000 and answer.content


def test_history_survives_a_restart(qtbot, window, tmp_path):
    _send(qtbot, window, "the value of")
    cid = window.chat.conversation_id
    window.history.rename(cid, "Renamed")
    window.close()
    again = History(tmp_path / "h.db")
    convs = again.conversations()
    assert [c.title for c in convs] == ["Renamed"]
    assert len(again.messages(cid)) == 2
    assert again.conversations("value")[0].id == cid  # search by message text
    md = again.to_markdown(cid)
    assert md.startswith("# Renamed") and "## Assistant" in md and "tok/s" in md


def test_attach_and_export(qtbot, window, tmp_path):
    f = tmp_path / "notes.md"
    f.write_text("the data of the class")
    window.chat.attach_files([str(f)])
    qtbot.waitUntil(lambda: not window.chat.reading, timeout=20000)
    _send(qtbot, window, "summarise")
    user = window.history.messages(window.chat.conversation_id)[0]
    assert "notes.md" in user.content and "the data of the class" in user.content
    out = tmp_path / "conv.md"
    window.chat.export_conversation(str(out))
    conv = out.read_text()
    assert "*Attached: notes.md*" in conv and "the data of the class" not in conv, "a report names its sources"
    answer = tmp_path / "answer.md"
    window.chat.export_answer(str(answer))
    last = window.history.messages(window.chat.conversation_id)[-1]
    text = answer.read_text()
    assert text == last.content.strip() + "\n" and "the data of the class" not in text, "the answer alone, no chrome"
    binary = tmp_path / "x.bin"
    binary.write_bytes(b"\x81\xfe\x00\xff")  # no byte-order mark: FF FE would make it UTF-16 text
    errors = []
    window.chat.error.connect(errors.append)
    window.chat.attach_files([str(binary)])
    qtbot.waitUntil(lambda: bool(errors), timeout=20000)
    assert errors and "not a UTF-8 text file" in errors[0]


def test_a_bad_model_shows_an_error_and_the_window_lives(qtbot, window, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model at all")
    window.session.load(bad, None, label="bad")
    qtbot.waitUntil(lambda: bool(window.errors), timeout=60000)
    assert "not a GGUF file" in window.errors[0] and "bad.gguf" in window.errors[0]
    assert window.session.engine is not None  # the previous pair is still loaded
    _send(qtbot, window, "the value of")  # and still works
    assert window.history.messages(window.chat.conversation_id)[-1].status == "complete"


def test_a_failed_load_is_said_once_the_session_is_free(qtbot, window, tmp_path):
    """The error arrives when Send works again: said while the session still counted as
    loading, a Send right after it was refused ('Busy: loading'), flaky on a loaded machine."""
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model at all")
    busy_when_said: list[str] = []
    window.session.loadFailed.connect(lambda message: busy_when_said.append(window.session.busy))
    window.session.load(bad, None, label="bad")
    qtbot.waitUntil(lambda: bool(busy_when_said), timeout=30000)  # 10 s ran out once beside two busy loops
    assert busy_when_said == [""]


def test_auto_switch_and_settings_persist(qtbot, window, tmp_path):
    window.chat.lookahead.auto.setChecked(True)
    window.chat.temperature.setValue(0.7)
    window.save_settings()
    from app.main_window import MainWindow

    w2 = MainWindow(history=window.history, settings=window.settings, autoload=False)
    qtbot.addWidget(w2)
    assert w2.chat.lookahead.value() == "auto" and w2.chat.temperature.value() == pytest.approx(0.7)


def test_bench_view_fills_its_table(qtbot, window):
    bench = window.views["Bench"]
    for i in range(bench.suites.count()):
        it = bench.suites.item(i)
        from PySide6.QtCore import Qt

        it.setCheckState(Qt.CheckState.Checked if it.data(Qt.ItemDataRole.UserRole) == "chat" else Qt.CheckState.Unchecked)
    bench.sweep.setText("2")
    bench.repeat.setValue(1)
    bench.limit.setValue(1)
    bench.max_tokens.setValue(16)
    bench.start()
    qtbot.waitUntil(lambda: bench.result is not None, timeout=60000)
    assert bench.model.rowCount() == 4  # target, k=2, auto, lookup
    from app.views.bench_view import COLUMNS

    for key in ("wall_speedup_median", "speedup_median"):  # the wall-clock headline and the decode ratio
        col = [k for k, _ in COLUMNS].index(key)
        assert bench.model.data(bench.model.index(1, col)).endswith("x")
    assert bench.progress.value() == bench.progress.maximum()


def test_closing_mid_generation_stops_cleanly_and_keeps_the_partial(qtbot, window):
    chat = window.chat
    chat.apply_settings({"drafter": "none", "max_tokens": 20000})
    chat.prompt.setPlainText("the value of")
    chat.send()
    qtbot.waitUntil(lambda: chat.stream.tokens != [], timeout=60000)
    cid = chat.conversation_id
    thread = window.session._threads[0][0]
    window.close()  # cancels, waits for the worker, saves what was written
    assert thread.isFinished()
    answer = window.history.messages(cid)[-1]
    assert answer.status == "stopped" and answer.content


def test_a_failed_save_on_send_is_shown_in_the_window_and_the_text_kept(qtbot, window):
    """Issue 27: disk full on Send was a traceback on stderr only."""
    _send(qtbot, window, "the value of")  # a conversation exists
    window.history._db.execute("PRAGMA query_only = ON")  # every write fails, as on a read-only disk
    window.errors.clear()
    chat = window.chat
    chat.prompt.setPlainText("the count of the items")
    chat.send()
    assert window.errors and "Could not save" in window.errors[0] and "read-only" in window.errors[0]
    assert chat.prompt.toPlainText().startswith("the count of")  # nothing typed is lost
    assert chat.worker is None  # no answer started for a question that was not saved


def test_a_load_that_fails_before_its_thread_is_watched_is_still_said(qtbot, tmp_path, monkeypatch):
    """A worker that ends at once (a file that is not a model) may emit `finished` before
    `Session.run` has connected to it; on a loaded machine the load's error was then never
    said and the session stayed busy for good. Here the worker runs to its end inside
    `workers.start`, the earliest it can end."""
    from PySide6.QtCore import QThread

    from app import workers
    from app.session import Session

    session = Session()
    errors: list[str] = []
    session.loadFailed.connect(errors.append)
    monkeypatch.setattr(workers, "start", lambda worker: (worker.run(), QThread())[1])
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model at all")
    session.load(bad, None, label="bad")
    assert len(errors) == 1 and "not a GGUF file" in errors[0], errors
    assert session.busy == "", "the session is free again"
