"""The app's "Local server" switch: serves the loaded pair, draws server requests in the
charts, queues with the chat on one engine, and stops before its engine is closed."""

from __future__ import annotations

import socket
import threading

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from app import workers  # noqa: E402
from app.session import Session  # noqa: E402
from app.widgets.charts.charts import LiveCharts  # noqa: E402
from app.widgets.panels.server_switch import ServerSwitch  # noqa: E402
from engine.decoding.request import GenerationRequest  # noqa: E402

pytestmark = pytest.mark.gui
MSGS = [{"role": "user", "content": "the value of"}]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def loaded(qtbot, tiny_target, tiny_draft):
    session = Session()
    session.n_ctx = 512
    with qtbot.waitSignal(session.pairChanged, timeout=30000):
        session.load(tiny_target, tiny_draft, label="tiny pair", pair_id="tiny-pair")
    qtbot.waitUntil(lambda: not session.busy)
    charts = LiveCharts()
    qtbot.addWidget(charts)
    switch = ServerSwitch(session, charts=charts, port=free_port())
    qtbot.addWidget(switch)
    yield session, switch, charts
    switch.shutdown()
    session.shutdown()


@pytest.mark.parametrize("slots", [1, 2])
def test_switch_serves_the_loaded_pair_and_draws_requests_in_the_charts(qtbot, loaded, slots):
    session, switch, charts = loaded
    switch.slots.setValue(slots)  # 1: one request at a time; 2: in parallel slots
    switch.set_on(True)
    qtbot.waitUntil(lambda: switch.running, timeout=15000)
    url = switch.server.url
    assert switch.url.text() == f"{url}/v1"
    r = httpx.post(url + "/v1/chat/completions",
                   json={"model": "tiny-pair", "messages": MSGS, "max_tokens": 12, "temperature": 0,
                         "draft": "model", "lookahead": 3}, timeout=30)
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 12
    qtbot.waitUntil(lambda: sum(charts.series.emitted) == 12, timeout=60000)  # every step reached the charts
    assert max(charts.series.k) == 3
    assert (session.slots is not None) == (slots > 1)
    switch.set_on(False)
    assert not switch.running and switch.url.text() == "" and session.slots is None
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/health", timeout=2)


def test_chat_and_server_requests_queue_behind_each_other(qtbot, loaded):
    session, switch, _ = loaded
    switch.set_on(True)
    qtbot.waitUntil(lambda: switch.running, timeout=15000)
    q = session.engine.queue
    order: list[str] = []
    q.add_listener(lambda job, ev: order.append(job.source) if ev.kind == "prefill" and ev.done == 0 else None)
    blocker = q.submit("test", bounded=False)
    q.wait_turn(blocker)
    w = workers.GenerationWorker(session.engine, GenerationRequest.from_options(MSGS, lookahead=0, max_tokens=6, chat=True))
    answers: list = []
    w.done.connect(answers.append)
    session.run(w, "chat")
    qtbot.waitUntil(lambda: q.waiting == 1)  # the chat waits
    result: dict = {}

    def request() -> None:
        result["r"] = httpx.post(switch.server.url + "/v1/chat/completions",
                                 json={"messages": MSGS, "max_tokens": 6, "temperature": 0}, timeout=30)

    t = threading.Thread(target=request)
    t.start()
    qtbot.waitUntil(lambda: q.waiting == 2)  # and the server request behind it
    q.finish(blocker)
    qtbot.waitUntil(lambda: bool(answers) and not t.is_alive(), timeout=15000)
    t.join()
    assert order == ["chat", "server"]
    assert answers[0].stats.generated_tokens == 6 and result["r"].status_code == 200


def test_a_chat_stopped_while_waiting_ends_as_a_stopped_answer(qtbot, loaded):
    session, _, _ = loaded
    q = session.engine.queue
    with q.turn(q.submit("test", bounded=False)):  # holds the engine, as a running answer would
        w = workers.GenerationWorker(session.engine, GenerationRequest.from_options(MSGS, lookahead=0, max_tokens=6, chat=True))
        answers: list = []
        w.done.connect(answers.append)
        session.run(w, "chat")
        qtbot.waitUntil(lambda: q.waiting == 1)
        w.cancel()
        qtbot.waitUntil(lambda: bool(answers), timeout=60000)
        assert answers[0].stats.finish_reason == "cancelled" and q.waiting == 0


def test_the_server_stops_before_its_engine_is_closed(qtbot, loaded):
    session, switch, _ = loaded
    switch.set_on(True)
    qtbot.waitUntil(lambda: switch.running, timeout=15000)
    session.unload()
    assert not switch.running
    assert switch.button.isChecked() and "when a pair is loaded" in switch.url.text()


def test_a_busy_port_is_a_message_not_a_crash(qtbot, loaded):
    session, switch, _ = loaded
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        switch.port.setValue(s.getsockname()[1])
        with qtbot.waitSignal(switch.error, timeout=15000) as sig:
            switch.set_on(True)
    assert "cannot listen on 127.0.0.1" in sig.args[0]
    assert not switch.running and not switch.button.isChecked()


@pytest.mark.parametrize("kind", ["race", "bench"])
def test_a_race_or_benchmark_holds_the_queue_and_a_server_request_waits_for_it(qtbot, loaded, kind):
    """A race or a benchmark is many generations whose timings are compared: a server
    request must not run between them; it waits in line, then is answered."""
    session, switch, _ = loaded
    switch.set_on(True)
    qtbot.waitUntil(lambda: switch.running, timeout=15000)
    q = session.engine.queue
    blocker = q.submit("test", bounded=False)
    q.wait_turn(blocker)
    if kind == "race":
        w = workers.RaceWorker(session.engine, GenerationRequest.from_options("the value of", draft_model="lookup", lookahead=2, max_tokens=8))
        w.result.connect(lambda r: ended.append(r))
    else:
        from engine.measure import bench
        from engine.measure import suites as bench_suites

        suite = bench_suites.Suite("one", [bench_suites.BenchPrompt("p1", "the value of", chat=False)])
        w = workers.BenchWorker(session.engine, [suite], bench.plan_configs("lookup", ["target", "fixed"], [2]),
                                max_tokens=8, repeat=1)
        w.result.connect(lambda r: ended.append(r))
    ended: list = []
    session.run(w, kind)
    qtbot.waitUntil(lambda: q.waiting == 1)  # it waits for the blocker like anything else
    result: dict = {}
    order: list[str] = []

    def request() -> None:
        result["r"] = httpx.post(switch.server.url + "/v1/completions",
                                 json={"prompt": "the value", "max_tokens": 4, "temperature": 0}, timeout=60)
        order.append("server")

    q.finish(blocker)
    qtbot.waitUntil(lambda: q.running is not None and q.running.source == kind, timeout=60000)
    t = threading.Thread(target=request)
    t.start()
    qtbot.waitUntil(lambda: bool(ended), timeout=60000)
    order.append(kind)
    t.join(60)
    assert order == [kind, "server"] and result["r"].status_code == 200  # answered after, not between


def test_a_race_cancelled_while_it_waits_for_the_queue_ends_quietly(qtbot, loaded):
    session, _, _ = loaded
    q = session.engine.queue
    with q.turn(q.submit("test", bounded=False)):  # holds the engine, as a running answer would
        w = workers.RaceWorker(session.engine, GenerationRequest.from_options("the value of", draft_model="lookup", lookahead=2, max_tokens=8))
        failed: list = []
        w.failed.connect(failed.append)
        session.run(w, "race")
        qtbot.waitUntil(lambda: q.waiting == 1)
        w.cancel()
        qtbot.waitUntil(lambda: not session.busy, timeout=60000)
        assert not failed and q.waiting == 0
