"""The chat runs MCP tools: the tiny model (its call forced by the loop's tool choice), a real
MCP server over stdio (mcp_chat_server.py), the approval dialog answered as a user would;
the call cards, the saved calls, the export, the answer in a slot of the local server's, and
the server's child process stopped with the chat's tools (pytest-qt, offscreen)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("mcp")

from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtWidgets import QLabel, QMessageBox  # noqa: E402

from app.history import History  # noqa: E402
from app.history.settings import chat_settings  # noqa: E402

SERVER = Path(__file__).with_name("mcp_chat_server.py")


@pytest.fixture
def touched(tmp_path) -> Path:
    return tmp_path / "touched.txt"


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch, tiny_target, touched):
    from app.main_window import MainWindow
    from app.tool_servers import CONFIG_KEY

    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        "ships": {"command": sys.executable, "args": [str(SERVER)], "env": {"TOUCH_FILE": str(touched)}},
        "faulty": {"command": sys.executable, "args": [str(SERVER), "--tools", "broken"]},
        "sleepy": {"command": sys.executable, "args": [str(SERVER), "--tools", "server_pid", "--slow-start", "60"],
                   "env": {"PID_FILE": str(tmp_path / "sleepy.pid")}}}}), encoding="utf-8")
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    settings.setValue(CONFIG_KEY, str(config))
    errors: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning", lambda *a, **k: errors.append(a[2]) or QMessageBox.StandardButton.Ok)
    w = MainWindow(history=History(tmp_path / "h.db"), settings=settings, autoload=False)
    w.errors = errors  # type: ignore[attr-defined]
    qtbot.addWidget(w)
    w.session.load(tiny_target, tiny_target, label="tiny", n_ctx=4096)
    qtbot.waitUntil(lambda: w.session.engine is not None, timeout=60000)
    yield w
    w.close()


def _ask(qtbot, w, tool: str, *, server: str = "ships") -> None:
    """Send a question with the chat's `server` on and the first step forced to call `tool`."""
    chat = w.chat
    chat.apply_settings({**chat.settings(), "drafter": "none", "temperature": 0.0, "max_tokens": 80,
                         "tools": chat.settings_panel.tools.values()})
    chat.settings_panel.tools.boxes[server].setChecked(True)
    chat.tools.choice = tool
    chat.prompt.setPlainText("Use the tool, please.")
    chat.send()
    assert chat.worker is not None, w.errors


def _dialog(qtbot, w):
    qtbot.waitUntil(lambda: (w.chat.tools.dialog is not None and w.chat.tools.dialog.isVisible()) or w.chat.worker is None,
                    timeout=30000)
    assert w.chat.worker is not None, (w.errors, w.history.messages(w.chat.conversation_id)[-1].tool_calls)
    return w.chat.tools.dialog


def _answered(qtbot, w):
    qtbot.waitUntil(lambda: w.chat.worker is None, timeout=60000)
    return w.history.messages(w.chat.conversation_id)[-1]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped) is gone for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0] != "Z"
    except OSError:
        return False


def test_allow_once_runs_the_tool_and_its_card_shows_the_result(qtbot, window):
    _ask(qtbot, window, "server_pid")
    dialog = _dialog(qtbot, window)
    text = " ".join(lbl.text() for lbl in dialog.findChildren(QLabel))
    assert "server_pid" in text and "ships" in text and dialog.arguments.toPlainText() == "{}"
    dialog.allow_once.click()
    answer = _answered(qtbot, window)
    (call,) = answer.tool_calls
    assert call["server"] == "ships" and call["tool"] == "server_pid" and call["allowed"] and not call["error"]
    assert call["result"].isdigit() and call["seconds"] >= 0
    shown = window.chat.transcript.toPlainText()
    assert "Tool call" in shown and "ships › server_pid" in shown and call["result"] in shown
    assert answer.status == "complete" and answer.stats["generated_tokens"] > 0
    assert not window.errors


def test_deny_tells_the_model_and_no_call_reaches_the_server(qtbot, window, touched):
    _ask(qtbot, window, "touch")
    _dialog(qtbot, window).deny.click()
    answer = _answered(qtbot, window)
    (call,) = answer.tool_calls
    assert not call["allowed"] and call["error"] and call["result"] == "error: the user denied this call"
    assert not touched.exists()  # the server never ran it
    assert answer.status == "complete"  # the loop went on: the model answered after the denial
    assert "denied, not run" in window.chat.transcript.toPlainText()


def test_always_for_this_tool_skips_the_dialog_the_second_time(qtbot, window, touched):
    _ask(qtbot, window, "touch")
    _dialog(qtbot, window).allow_always.click()
    _answered(qtbot, window)
    assert touched.read_text().count("touched") == 1
    cid = window.chat.conversation_id
    assert chat_settings(window.history, cid)["tools"] == {"servers": ["ships"], "always": ["ships/touch"]}
    window.chat.tools.dialog = None
    _ask(qtbot, window, "touch")
    answer = _answered(qtbot, window)
    assert window.chat.tools.dialog is None  # not asked again
    assert touched.read_text().count("touched") == 2 and answer.tool_calls[0]["allowed"]


def test_a_hanging_tool_times_out_and_the_loop_goes_on(qtbot, window):
    window.chat.tools.timeout = 1.0
    _ask(qtbot, window, "hang")
    _dialog(qtbot, window).allow_once.click()
    answer = _answered(qtbot, window)
    (call,) = answer.tool_calls
    assert call["error"] and "did not answer within 1 s" in call["result"]
    assert answer.status == "complete" and answer.stats["generated_tokens"] > 0  # answered after the error


def test_stop_while_a_tool_runs_ends_the_answer_without_waiting_for_it(qtbot, window):
    _ask(qtbot, window, "hang")  # the app's time limit: 60 s
    _dialog(qtbot, window).allow_once.click()
    qtbot.wait(1000)  # the call is running
    began = time.monotonic()
    window.chat.stop_btn.click()
    answer = _answered(qtbot, window)
    assert time.monotonic() - began < 10
    assert answer.status == "stopped" and "stopped by the user" in answer.tool_calls[0]["result"]


def test_a_failing_tools_error_is_shown_and_sent_back(qtbot, window):
    _ask(qtbot, window, "broken", server="faulty")
    _dialog(qtbot, window).allow_once.click()
    answer = _answered(qtbot, window)
    (call,) = answer.tool_calls
    assert call["error"] and call["allowed"] and "the warehouse database is down" in call["result"]
    assert call["result"].startswith("error: ")  # what the model read
    shown = window.chat.transcript.toPlainText()
    assert "faulty › broken" in shown and "error" in shown and "the warehouse database is down" in shown


@pytest.mark.parametrize("how", ["stop", "escape"])
def test_stop_or_esc_during_the_approval_ends_the_answer(qtbot, window, touched, how):
    _ask(qtbot, window, "touch")
    dialog = _dialog(qtbot, window)
    assert not dialog.isModal()  # the Stop button stays within reach
    window.chat.stop_btn.click() if how == "stop" else window.chat.escape()
    answer = _answered(qtbot, window)
    assert answer.status == "stopped" and not touched.exists()
    assert not dialog.isVisible()
    assert [c["allowed"] for c in answer.tool_calls] == [False]
    assert answer.stats["generated_tokens"] > 0  # the step that wrote the call, not a second one


def test_calls_survive_reopening_the_chat_and_are_exported(qtbot, window, tmp_path):
    _ask(qtbot, window, "server_pid")
    _dialog(qtbot, window).allow_once.click()
    pid = _answered(qtbot, window).tool_calls[0]["result"]
    cid = window.chat.conversation_id
    window.chat.new_conversation()
    assert "server_pid" not in window.chat.transcript.toPlainText()
    window.chat.open_conversation(cid)
    assert "ships › server_pid" in window.chat.transcript.toPlainText() and pid in window.chat.transcript.toPlainText()
    md, js = tmp_path / "chat.md", tmp_path / "chat.json"
    window.chat.export_conversation(str(md))
    window.chat.export_conversation(str(js))
    assert "**Tool call:** ships › `server_pid`" in md.read_text() and pid in md.read_text()
    archived = json.loads(js.read_text())
    (conv,) = archived["conversations"]
    assert conv["messages"][-1]["stats"]["tool_calls"][0]["result"] == pid
    assert "**Tool call:**" in window.history.to_markdown(cid)


def test_the_servers_child_stops_with_the_chats_tools_the_chat_and_the_app(qtbot, window):
    def run_pid() -> int:
        _ask(qtbot, window, "server_pid")
        _dialog(qtbot, window).allow_once.click()
        pid = int(_answered(qtbot, window).tool_calls[-1]["result"])
        assert _pid_alive(pid)
        return pid

    pid = run_pid()
    window.chat.settings_panel.tools.boxes["ships"].setChecked(False)  # tools off for this chat
    qtbot.waitUntil(lambda: not _pid_alive(pid), timeout=15000)
    pid = run_pid()
    window.chat.new_conversation()  # the chat closed
    qtbot.waitUntil(lambda: not _pid_alive(pid), timeout=15000)
    pid = run_pid()
    window.close()  # the app quits: the close waits for the child
    assert not _pid_alive(pid)


def test_stop_while_the_servers_start_ends_the_answer_at_once_and_stops_them(qtbot, window, tmp_path):
    """A server that takes a minute to answer its first message: Stop during "Starting the MCP
    servers…" ends the answer within seconds (not at the 30 s start limit) and its child ends."""
    pid_file = tmp_path / "sleepy.pid"
    _ask(qtbot, window, "server_pid", server="sleepy")
    qtbot.waitUntil(pid_file.exists, timeout=30000)
    pid = int(pid_file.read_text())
    assert _pid_alive(pid)
    began = time.monotonic()
    window.chat.stop_btn.click()
    answer = _answered(qtbot, window)
    assert time.monotonic() - began < 10
    assert answer.status == "stopped" and not answer.tool_calls and not window.errors
    qtbot.waitUntil(lambda: not _pid_alive(pid), timeout=15000)


def test_the_next_question_is_sent_with_the_earlier_calls_and_their_results(qtbot, window, monkeypatch):
    """After an answer that called a tool, the follow-up's prompt carries that call and the result
    the model read, before the answer (so "what was that number?" can be answered), with the
    chat's tools on or off."""
    from app import workers

    _ask(qtbot, window, "server_pid")
    _dialog(qtbot, window).allow_once.click()
    first = _answered(qtbot, window)
    pid = first.tool_calls[0]["result"]
    sent: list = []
    real = workers.GenerationWorker.__init__
    monkeypatch.setattr(workers.GenerationWorker, "__init__",
                        lambda self, engine, request, **kw: (sent.append(request), real(self, engine, request, **kw))[1])
    window.chat.settings_panel.tools.boxes["ships"].setChecked(False)  # a plain answer this time
    window.chat.prompt.setPlainText("What was that number?")
    window.chat.send()
    _answered(qtbot, window)
    messages = sent[-1].prompt
    roles = [m["role"] for m in messages]
    at = roles.index("tool")
    assert roles[at - 1] == "assistant" and messages[at - 1]["tool_calls"][0]["function"]["name"] == "server_pid"
    assert messages[at]["content"] == pid and messages[at]["tool_call_id"] == messages[at - 1]["tool_calls"][0]["id"]
    assert roles[at + 1:] == ["assistant", "user"] and messages[at + 1]["content"] == first.content
    assert not window.errors


def test_with_the_local_servers_slots_the_answer_runs_in_one_without_a_waiting_notice(qtbot, window):
    """Through the window: the same answer with the server off (the engine's queue) and on with
    two slots (each model turn in a slot); no "waits for the local server's requests" notice."""
    from test_gui_server_slots import free_port, start

    def answer() -> tuple[str, list, str | None]:
        window.chat.new_conversation()
        _ask(qtbot, window, "touch")  # its result the same from any server process (a new chat starts one)
        where = window.chat.worker.slot_draft
        _dialog(qtbot, window).allow_once.click()
        m = _answered(qtbot, window)
        return m.content, [c["result"] for c in m.tool_calls], where

    off = answer()
    said: list[str] = []
    window.chat.message.connect(said.append)
    window.server_switch.port.setValue(free_port())
    start(qtbot, window.server_switch, 2)
    on = answer()
    assert (off[2], on[2]) == (None, "none") and on[:2] == off[:2] and on[1] == ["touched"]
    assert not any("waits for the local server" in s for s in said), said
    assert not window.errors
