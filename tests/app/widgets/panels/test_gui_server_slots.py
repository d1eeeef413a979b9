"""The app beside its local server's parallel slots: a chat answer is one more client in a slot,
streaming at the same time as a client's answer, each the answer it gives alone; the status bar
says how many slots are busy; Stop frees the chat's slot while the client's answer goes on; with
one slot the chat takes its turn as before.

Which request runs when is made certain, not timed: the chat's cancel token holds the slots'
thread where it reads the token while the test wants a moment kept (a `Gate`)."""

from __future__ import annotations

import socket
import threading
from typing import Callable

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from app import workers  # noqa: E402
from app.session import Session  # noqa: E402
from app.widgets.panels.server_switch import ServerSwitch  # noqa: E402
from engine.decoding.cancel import CancelToken  # noqa: E402
from engine.decoding.decoder import EngineClosedError  # noqa: E402
from engine.decoding.events import DoneEvent  # noqa: E402
from engine.decoding.request import GenerationRequest  # noqa: E402
from engine.models.hardware import default_parallel  # noqa: E402

pytestmark = pytest.mark.gui
CHAT = [{"role": "user", "content": "the value of"}]
CLIENT = [{"role": "user", "content": "tell me about the weather"}]
WAIT = 60000  # ms: the machine is shared and slow


class Gate(CancelToken):
    """A chat's cancel token that holds the slots' thread, where it reads the token, while
    `hold()` is true (a moment the test looks at), then answers as any token."""

    def __init__(self, hold: Callable[[], bool]):
        super().__init__()
        self.hold, self._tick = hold, threading.Event()

    @property
    def cancelled(self) -> bool:
        while threading.current_thread().name == "tandem-slots" and self.hold():
            self._tick.wait(0.005)
        return self._event.is_set()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def serving(qtbot, tiny_target, tiny_draft):
    """The tiny pair loaded and the local server on it with two slots."""
    session = Session()
    session.n_ctx = 512
    with qtbot.waitSignal(session.pairChanged, timeout=WAIT):
        session.load(tiny_target, tiny_draft, label="tiny pair", pair_id="tiny-pair")
    qtbot.waitUntil(lambda: not session.busy, timeout=WAIT)
    switch = ServerSwitch(session, port=free_port())
    qtbot.addWidget(switch)
    yield session, switch
    switch.shutdown()
    session.shutdown()


def start(qtbot, switch: ServerSwitch, n: int) -> None:
    switch.slots.setValue(n)
    switch.set_on(True)
    qtbot.waitUntil(lambda: switch.running, timeout=WAIT)


def chat_request(session: Session, max_tokens: int) -> GenerationRequest:
    return GenerationRequest.from_options(CHAT, draft_model=session.pair.draft, lookahead=3, max_tokens=max_tokens,
                                          chat=True)


def alone(session: Session, request: GenerationRequest) -> list[int]:
    """The answer's tokens on the engine's single sequence, nothing beside it."""
    done = [ev for ev in session.engine.stream(request) if isinstance(ev, DoneEvent)][0]
    return list(done.tokens)


def client_body(max_tokens: int) -> dict:
    return {"model": "tiny-pair", "messages": CLIENT, "max_tokens": max_tokens, "temperature": 0, "draft": "model",
            "lookahead": 3}


def post(switch: ServerSwitch, body: dict, into: dict) -> threading.Thread:
    t = threading.Thread(target=lambda: into.update(r=httpx.post(switch.server.url + "/v1/chat/completions",
                                                                  json=body, timeout=WAIT / 1000)))
    t.start()
    return t


def chat_worker(qtbot, session: Session, request: GenerationRequest, gate: Gate) -> tuple[workers.GenerationWorker, list]:
    w = workers.GenerationWorker(session.engine, request, slots=session.slots, model_draft=session.slots_draft)
    w.token = gate
    answers: list = []
    w.done.connect(answers.append)
    session.run(w, "chat")
    return w, answers


def test_the_slot_count_box_offers_the_machines_default(qtbot, serving, monkeypatch):
    from engine.models import hardware

    assert 1 <= default_parallel() <= 4
    monkeypatch.setattr(hardware, "default_parallel", lambda hw=None: 3)  # a machine that suits three
    switch = ServerSwitch(serving[0], port=free_port())
    qtbot.addWidget(switch)
    assert switch.slots.value() == 3


def client_answer_alone(switch, max_tokens: int) -> str:
    """A client's answer with nothing beside it (the reference its answer beside a chat must equal)."""
    first: dict = {}
    post(switch, client_body(max_tokens), first).join()
    return first["r"].json()["choices"][0]["message"]["content"]


def starts_and_ends(session) -> list:
    """(source, "prefill" or "done") for each job the engine's queue runs from now, in order:
    a prompt's reading beginning and an answer's end."""
    order: list = []
    lock = threading.Lock()

    def seen(job, ev) -> None:
        if ev.kind == "done" or (ev.kind == "prefill" and ev.done == 0):
            with lock:
                order.append((job.source, ev.kind))

    session.engine.queue.add_listener(seen)
    return order


def test_a_chat_answer_and_a_client_answer_stream_side_by_side_each_as_alone(qtbot, serving):
    session, switch = serving
    chat_req, max_client = chat_request(session, 40), 24
    chat_alone = alone(session, chat_req)
    start(qtbot, switch, 2)
    client_alone = client_answer_alone(switch, max_client)
    slots, order = session.slots, starts_and_ends(session)
    phase = {"alone": True, "both": True}
    # held while the chat runs alone (the client's request waits for a slot), then while both run
    gate = Gate(lambda: (phase["alone"] and sum(slots.busy()) == 1) or (phase["both"] and all(slots.busy())))
    w, answers = chat_worker(qtbot, session, chat_req, gate)
    assert w.slot_draft == "model"
    qtbot.waitUntil(lambda: slots.busy() == [True, False] or slots.busy() == [False, True], timeout=WAIT)
    result: dict = {}
    t = post(switch, client_body(max_client), result)
    qtbot.waitUntil(lambda: switch.in_use.text() == "slots 1/2 busy, 1 waiting", timeout=WAIT)
    phase["alone"] = False
    qtbot.waitUntil(lambda: switch.in_use.text() == "slots 2/2 busy", timeout=WAIT)
    qtbot.waitUntil(lambda: ("server", "prefill") in order and ("chat", "prefill") in order, timeout=WAIT)
    assert not any(kind == "done" for _, kind in order)  # both began, neither has ended
    phase["both"] = False
    qtbot.waitUntil(lambda: bool(answers) and not t.is_alive(), timeout=WAIT)
    t.join()
    assert list(answers[0].tokens) == chat_alone
    assert result["r"].status_code == 200
    assert result["r"].json()["choices"][0]["message"]["content"] == client_alone
    qtbot.waitUntil(lambda: switch.in_use.text() == "slots 0/2 busy", timeout=WAIT)


def test_stop_frees_the_chats_slot_while_the_client_answer_goes_on(qtbot, serving, monkeypatch):
    session, switch = serving
    start(qtbot, switch, 2)
    client_alone = client_answer_alone(switch, 24)
    slots, q, stopped, held = session.slots, session.engine.queue, [], {"client": True}
    # the client's request is held running once the chat has left its slot, until the test has looked
    client_gate = Gate(lambda: bool(stopped) and held["client"] and sum(slots.busy()) == 1)
    submit = q.submit
    monkeypatch.setattr(q, "submit", lambda source, **kw: submit(source, **(
        {**kw, "cancel": client_gate} if source == "server" else kw)))
    # the chat is held alone until the client's request waits for a slot, then while both run, until Stop
    gate = Gate(lambda: not stopped and (all(slots.busy()) or (sum(slots.busy()) == 1 and slots.waiting == 0)))
    w, answers = chat_worker(qtbot, session, chat_request(session, 200), gate)
    qtbot.waitUntil(lambda: any(slots.busy()), timeout=WAIT)
    result: dict = {}
    t = post(switch, client_body(24), result)
    qtbot.waitUntil(lambda: switch.in_use.text() == "slots 2/2 busy", timeout=WAIT)
    w.cancel()  # Stop
    stopped.append(True)
    qtbot.waitUntil(lambda: bool(answers), timeout=WAIT)
    assert answers[0].stats.finish_reason == "cancelled"
    qtbot.waitUntil(lambda: switch.in_use.text() == "slots 1/2 busy", timeout=WAIT)  # the chat's slot is free
    assert t.is_alive()  # the client's answer goes on
    held["client"] = False
    t.join()
    assert result["r"].status_code == 200
    assert result["r"].json()["choices"][0]["message"]["content"] == client_alone


def test_one_slot_keeps_the_chat_in_the_engines_queue(qtbot, serving):
    session, switch = serving
    start(qtbot, switch, 1)
    assert session.slots is None and switch.in_use.text() == ""
    w = workers.GenerationWorker(session.engine, chat_request(session, 6), slots=session.slots)
    assert w.slot_draft is None
    q = session.engine.queue
    order: list[str] = []
    q.add_listener(lambda job, ev: order.append(job.source) if ev.kind == "prefill" and ev.done == 0 else None)
    with q.turn(q.submit("test", bounded=False)):  # holds the engine: the chat waits for its turn
        answers: list = []
        w.done.connect(answers.append)
        session.run(w, "chat")
        qtbot.waitUntil(lambda: q.waiting == 1, timeout=WAIT)
    qtbot.waitUntil(lambda: bool(answers), timeout=WAIT)
    assert order == ["chat"] and answers[0].stats.generated_tokens > 0


def test_switched_off_the_slots_are_freed_and_the_chat_takes_its_turn(qtbot, serving):
    session, switch = serving
    start(qtbot, switch, 2)
    slots = session.slots
    switch.set_on(False)
    assert session.slots is None and session.engine.queue.slots == 1 and switch.in_use.text() == ""
    assert not session.engine.detach(slots)  # given back and closed
    with pytest.raises(EngineClosedError):
        next(slots.stream([1, 2, 3]))
    start(qtbot, switch, 2)  # on again: new slots
    assert session.slots is not None and session.slots is not slots


def test_a_draft_the_slots_do_not_run_falls_back_to_the_queue(qtbot, serving, tiny_target):
    session, switch = serving
    start(qtbot, switch, 2)
    other = GenerationRequest.from_options(CHAT, draft_model=tiny_target, lookahead=3, max_tokens=4, chat=True)
    w = workers.GenerationWorker(session.engine, other, slots=session.slots, model_draft=session.slots_draft)
    assert w.slot_draft is None  # another draft file than the slots' own: the queue path
    lookup = chat_request(session, 4).with_(draft="lookup")
    assert workers.GenerationWorker(session.engine, lookup, slots=session.slots).slot_draft == "lookup"


def test_the_chat_page_answers_in_a_slot_while_the_server_runs(qtbot, tmp_path, monkeypatch, tiny_target):
    """Through the window: the same answer with the server off (the engine's queue) and on with
    two slots (a slot, its stats and charts as before); the status bar's label says the slots."""
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QMessageBox

    from app.history import History
    from app.main_window import MainWindow

    monkeypatch.setattr(QMessageBox, "warning", lambda *a, **k: QMessageBox.StandardButton.Ok)
    w = MainWindow(history=History(tmp_path / "h.db"), settings=QSettings(str(tmp_path / "s.ini"),
                                                                          QSettings.Format.IniFormat), autoload=False)
    qtbot.addWidget(w)
    w.session.load(tiny_target, tiny_target, label="tiny self-draft")
    qtbot.waitUntil(lambda: w.session.engine is not None, timeout=WAIT)
    chat, switch = w.chat, w.server_switch
    switch.port.setValue(free_port())

    def send() -> tuple[str, str | None]:
        chat.new_conversation()
        chat.apply_settings({"drafter": "model", "lookahead": 4, "temperature": 0.0, "max_tokens": 30})
        chat.prompt.setPlainText("the value of")
        chat.send()
        where = chat.worker.slot_draft
        qtbot.waitUntil(lambda: chat.worker is None, timeout=WAIT)
        return w.history.messages(chat.conversation_id)[-1].content, where

    off, where_off = send()
    start(qtbot, switch, 2)
    assert switch.in_use.text() == "slots 0/2 busy"
    on, where_on = send()
    assert (where_off, where_on) == (None, "model") and on == off
    assert "tok/s" in chat.stats_label.text() and len(chat.charts.series) > 0
    w.close()


def test_switched_off_mid_answer_the_chat_ends_in_its_slot_then_the_slots_are_freed(qtbot, serving):
    session, switch = serving
    request = chat_request(session, 30)
    expected = alone(session, request)
    start(qtbot, switch, 2)
    slots, held = session.slots, {"on": True}
    w, answers = chat_worker(qtbot, session, request, Gate(lambda: held["on"] and any(slots.busy())))
    qtbot.waitUntil(lambda: any(slots.busy()), timeout=WAIT)
    switch.set_on(False)
    assert session.slots is None and not switch.running  # the next chat answer takes its turn
    held["on"] = False
    qtbot.waitUntil(lambda: bool(answers) and not session.busy, timeout=WAIT)
    assert list(answers[0].tokens) == expected  # not cut by the server stopping
    with pytest.raises(EngineClosedError):  # freed once the answer ended
        next(slots.stream([1, 2, 3]))


def test_slots_the_target_cannot_run_leave_one_request_at_a_time_and_say_why(qtbot, serving, monkeypatch):
    from engine.errors import TandemError
    from engine.serving.server import app as server_app

    real = server_app.parallel_slots

    def refuse(served, config):
        if config.parallel > 1:
            raise TandemError("the slots cannot run this target (a stand-in refusal)")
        return real(served, config)

    monkeypatch.setattr(server_app, "parallel_slots", refuse)
    session, switch = serving
    with qtbot.waitSignal(switch.message, timeout=WAIT) as said:
        start(qtbot, switch, 2)
    assert "one request at a time (the slots cannot run this target (a stand-in refusal))" in said.args[0]
    assert switch.running and session.slots is None and switch.in_use.text() == ""


def test_a_busy_port_frees_the_slots_made_for_it(qtbot, serving, monkeypatch):
    from engine.decoding.slots import scheduler

    made: list = []
    real = scheduler.SlotScheduler.__init__
    monkeypatch.setattr(scheduler.SlotScheduler, "__init__", lambda self, *a, **k: (made.append(self), real(self, *a, **k))[1])
    session, switch = serving
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        switch.port.setValue(s.getsockname()[1])
        switch.slots.setValue(2)
        with qtbot.waitSignal(switch.error, timeout=WAIT):
            switch.set_on(True)
    assert len(made) == 1 and not session.engine.detach(made[0])  # closed, not kept by the engine
    assert session.engine.queue.slots == 1 and session.slots is None and not switch.running
