"""What belongs to one chat stays with it when another is opened (issue 45, item 11): the files
attached and not yet sent, a lookahead changed and not yet used, the Lookahead readout of the
last answer, the stats line of the answer version shown; and a relaunch opens the last chat on
the model it was written with."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from app.history.settings import chat_settings, save_chat_settings  # noqa: E402
from engine.decoding.events import RunStats, StepEvent  # noqa: E402
from test_gui_chat_input import _file, _load, _make_window, attach, read  # noqa: E402

SETTINGS = {"drafter": "lookup", "lookahead": 3, "temperature": 0.0, "top_p": 1.0, "seed": -1, "max_tokens": 8}


def _chats(w, *titles: str) -> list[int]:
    """Stored conversations with their own settings, listed in the window."""
    ids = []
    for t in titles:
        cid = w.history.create(title=t).id
        save_chat_settings(w.history, cid, SETTINGS)
        ids.append(cid)
    w.chat.refresh_conversations()
    return ids


def _chip_names(chat) -> list[str]:
    return [a.name for a in chat.attachments.items()]


def _steps(ks: list[int]) -> list[StepEvent]:
    return [StepEvent(i, k, min(k, 2), min(k, 1), min(k, 1) + 1, 1.0, 5.0, 0.01 * (i + 1)) for i, k in enumerate(ks)]


def test_the_lookahead_readout_and_chart_show_autos_k_on_the_sliders_scale_and_start_over(qtbot, tmp_path, monkeypatch):
    """The readout showed 498/490/119 on the 0-16 slider and the chart rose above 16 while Auto
    used k <= 2, and kept showing it in a new chat."""
    w = _make_window(qtbot, tmp_path, monkeypatch)
    chat = w.chat
    la, charts = chat.lookahead, chat.charts
    la.set_value(5)
    la.set_value("auto")
    shown = []
    for step in _steps([0, 2, 1, 2, 24, 2]):  # 24: a long free proposal Auto verified past the slider's end
        chat.stream._on_steps([step])
        shown.append((la.value_label.text(), la.slider.value()))
    assert shown == [("0", 0), ("2", 2), ("1", 1), ("2", 2), ("16+", 16), ("2", 2)]
    assert la.value() == "auto"
    charts.redraw()
    ys = charts.k_curve.getData()[1]
    assert list(ys) == [0, 2, 1, 2, 16, 2] and max(ys) <= 16

    chat.new_conversation()
    assert la.value_label.text() == "auto" and la.slider.value() == 5, "the last answer's k is not this chat's"
    charts.redraw()
    ys = charts.k_curve.getData()[1]
    assert len(charts.series) == 0 and (ys is None or len(ys) == 0)
    w.close()


def test_attached_files_stay_with_the_chat_they_were_added_in(qtbot, tmp_path, monkeypatch):
    """Files attached in one chat followed you into every other chat and would have been sent there."""
    w = _make_window(qtbot, tmp_path, monkeypatch)
    chat = w.chat
    a, b = _chats(w, "report", "review")
    chat.open_conversation(a)
    attach(qtbot, chat, _file(tmp_path, "notes.txt", "the value of"))
    chat.prompt.setPlainText("summarise these")
    chat.open_conversation(b)
    assert _chip_names(chat) == [] and chat.attachments.isHidden() and chat.prompt.toPlainText() == ""
    assert "notes.txt" not in chat.composer.compose("hello"), "never sent in another chat"
    attach(qtbot, chat, _file(tmp_path, "diff.txt", "the data of"))
    chat.new_conversation()
    assert _chip_names(chat) == []
    chat.open_conversation(a)
    assert _chip_names(chat) == ["notes.txt"] and chat.prompt.toPlainText() == "summarise these"
    assert "notes.txt" in chat.composer.compose("summarise these")
    chat.open_conversation(b)
    assert _chip_names(chat) == ["diff.txt"]

    chat.attach_files([str(_file(tmp_path, "late.txt", "the class of"))])  # still being read when the chat changes
    chat.open_conversation(a)
    read(qtbot, chat)
    assert _chip_names(chat) == ["notes.txt"], "a file read after the switch goes to the chat it was added in"
    chat.open_conversation(b)
    assert _chip_names(chat) == ["diff.txt", "late.txt"]
    w.close()


def test_a_lookahead_set_in_a_chat_is_its_own_at_once_not_only_when_sent(qtbot, tmp_path, monkeypatch):
    w = _make_window(qtbot, tmp_path, monkeypatch)
    chat = w.chat
    a, b = _chats(w, "report", "review")
    chat.open_conversation(a)
    assert chat.lookahead.value() == 3
    chat.lookahead.slider.setValue(7)  # the user moves the slider; nothing is sent
    chat.temperature.setValue(0.6)
    chat.open_conversation(b)
    assert chat.lookahead.value() == 3 and chat.temperature.value() == 0.0, "the other chat keeps its own"
    chat.lookahead.auto.setChecked(True)
    chat.open_conversation(a)
    assert chat.lookahead.value() == 7 and chat.temperature.value() == 0.6
    chat.open_conversation(b)
    assert chat.lookahead.value() == "auto"
    assert chat_settings(w.history, a)["lookahead"] == 7, "kept in the history database for the next session"
    w.close()


def _stats(tokens: int) -> dict:
    return RunStats(generated_tokens=tokens, steps=tokens, decode_s=1.0, wall_s=1.2, mode="lookup").finalize().to_dict()


def test_the_stats_line_shows_the_figures_of_the_answer_version_shown(qtbot, tmp_path, monkeypatch):
    """After browsing versions the stats line showed another answer's figures."""
    from app.history.branches import edit_question

    w = _make_window(qtbot, tmp_path, monkeypatch)
    chat, h = w.chat, w.history
    cid = h.create(title="versions").id
    q = h.add_message(cid, "user", "the value of")
    answer = h.add_message(cid, "assistant", "", status="generating")
    h.update_message(answer.id, "it failed half way", status="failed")  # version 1: no figures
    h.new_version(answer.id)
    h.update_message(answer.id, "the second answer", stats=_stats(22), status="complete")
    chat.refresh_conversations()
    chat.open_conversation(cid)
    assert "22 tokens" in chat.stats_label.text()
    chat.asking.act("older", answer.id)
    assert chat.stats_label.text() == "", "version 1 has no figures: not version 2's"
    chat.asking.act("newer", answer.id)
    assert "22 tokens" in chat.stats_label.text()

    edit_question(h, q.id, "the data of", [])  # an edited question: a branch of its own
    h.add_message(cid, "assistant", "the edited branch's answer", stats=_stats(7))
    chat.open_conversation(cid)
    assert "7 tokens" in chat.stats_label.text()
    chat.asking.act("older", q.id)  # back to the first question, with the answer that followed it
    assert "22 tokens" in chat.stats_label.text() and "the second answer" in chat.transcript.toPlainText()
    chat.asking.act("newer", q.id)
    assert "7 tokens" in chat.stats_label.text()
    w.close()


def test_a_relaunch_opens_the_last_chat_on_its_own_model(qtbot, tmp_path, monkeypatch, tiny_target):
    """The last chat reopened on the default pair (here: none downloaded, so nothing loaded),
    not on the model its answers were written with."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))  # none downloaded, whatever this machine holds
    w = _make_window(qtbot, tmp_path, monkeypatch)
    _load(qtbot, w, tiny_target, "lookup", n_ctx=1024)
    chat = w.chat
    chat.apply_settings(SETTINGS)
    chat.prompt.setPlainText("the value of")
    qtbot.mouseClick(chat.send_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat.worker is None and chat.conversation_id is not None, timeout=30000)
    cid, n_ctx = chat.conversation_id, w.session.engine.n_ctx
    w.save_settings()
    w.history.close()
    w.close()

    again = _make_window(qtbot, tmp_path, monkeypatch)
    assert again.chat.conversation_id == cid and again.session.engine is None
    again.autoload()  # what a relaunch does once the window is up
    qtbot.waitUntil(lambda: again.session.engine is not None and not again.session.busy, timeout=20000)
    assert again.session.pair.target == tiny_target and again.session.pair.draft == "lookup"
    assert again.session.engine.n_ctx == n_ctx
    again.session.unload()

    gone = tmp_path / "gone.gguf"  # the chat's model is no longer on this computer: one line, and the fallback
    record = {**chat_settings(again.history, cid)["model"], "target": str(gone), "label": "gone"}
    save_chat_settings(again.history, cid, {**SETTINGS, "model": record})
    again.autoload()
    assert again.session.engine is None and not again.session.busy
    assert again.statusBar().currentMessage() == f"This chat was written with gone, whose file {gone} is gone: no model loaded"
    assert again.errors == []  # no dialog
    again.close()
