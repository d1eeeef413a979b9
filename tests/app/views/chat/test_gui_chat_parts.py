"""The chat page's parts stand on their own constructors: the answer stream writes an answer into
a stored message with only the session, the history, the settings and the widgets it is given,
and the settings panel's request and stored dict follow its controls (no page around them)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

pytest.importorskip("PySide6")

from PySide6.QtWidgets import QComboBox, QLabel, QPushButton  # noqa: E402

from app.history import History  # noqa: E402
from app.session import Session  # noqa: E402
from app.views.chat.answering import AnswerStream, AnswerView  # noqa: E402
from app.views.chat.settings_panel import SettingsPanel  # noqa: E402
from app.widgets.controls.live_label import LiveLabel  # noqa: E402
from app.widgets.panels.model_bar import ModelBar  # noqa: E402
from app.widgets.controls.token_meter import TokenMeter  # noqa: E402
from app.widgets.transcript.transcript import Transcript  # noqa: E402


def test_an_answer_stream_fills_the_message_it_is_given(qtbot, tmp_path, tiny_target):
    session = Session()
    session.load(tiny_target, tiny_target, label="tiny self-draft")
    qtbot.waitUntil(lambda: session.engine is not None and not session.busy, timeout=30000)
    history = History(tmp_path / "h.db")
    bar = ModelBar(session)
    panel = SettingsPanel(bar.draft)
    panel.apply({"drafter": "model", "lookahead": 2, "temperature": 0.0, "max_tokens": 12})
    view = AnswerView(Transcript(), LiveLabel(""), QLabel(""), QLabel(""), TokenMeter(lambda: (0, True, 2048)),
                      QPushButton("Send"), QPushButton("Stop"))
    for w in (bar, panel, view.transcript, view.stats_label):
        qtbot.addWidget(w)
    notices: list[str] = []
    errors: list[str] = []
    stream = AnswerStream(session, history, panel, bar, view, notices.append, errors.append)
    saved: list[bool] = []
    stream.saved.connect(lambda: saved.append(True))

    conv = history.create(title="parts")
    history.add_message(conv.id, "user", "the value of")
    into = history.add_message(conv.id, "assistant", "", status="generating")
    stream.start([{"role": "user", "content": "the value of"}], into)
    assert stream.running and not view.send_btn.isEnabled() and view.stop_btn.isEnabled()
    qtbot.waitUntil(lambda: not stream.running, timeout=60000)

    stored = history.message(into.id)
    assert errors == [] and saved == [True] and stream.message is None
    assert stored.status == "complete" and stored.content and stored.content == "".join(t.text for t in stream.tokens)
    assert stored.stats and stored.stats["generated_tokens"] <= 12
    assert view.send_btn.isEnabled() and not view.stop_btn.isEnabled()
    session.shutdown()


def test_the_settings_panel_makes_the_request_and_the_stored_dict(qtbot):
    drafter = QComboBox()
    drafter.addItem("Lookup", "lookup")
    drafter.addItem("None", "none")
    panel = SettingsPanel(drafter)
    qtbot.addWidget(panel)
    stored = {"drafter": "none", "lookahead": 3, "temperature": 0.7, "top_k": 40, "top_p": 0.9, "min_p": 0.05,
              "repeat_penalty": 1.1, "stop": ["\n\n", "User:"], "seed": 7, "max_tokens": 64, "system": "Be brief."}
    panel.apply(stored)
    assert panel.values() == stored
    req = panel.request([{"role": "user", "content": "hi"}], chat=True, draft=None)
    assert (req.max_tokens, req.sampling.seed, req.sampling.temperature, req.system) == (64, 7, 0.7, "Be brief.")
    assert (req.sampling.top_k, req.sampling.top_p, req.sampling.min_p) == (40, 0.9, 0.05)
    assert req.stop == ("\n\n", "User:") and req.penalties.repeat == 1.1
    panel.apply({})  # what is missing takes its default
    assert panel.values()["seed"] is None and panel.values()["system"] == "" and panel.values()["lookahead"] == "auto"
    req = panel.request("x", chat=False, draft="lookup")
    assert req.sampling.seed is None and req.penalties is None and req.stop == ()  # each default is "off"
    panel.apply({"seed": -1})
    assert panel.seed.text() == "" and panel.values()["seed"] is None, "-1: how a random seed was stored before"
    panel.set_charts_visible(False)
    assert not panel.charts_toggle.isChecked() and panel.charts.isHidden()
