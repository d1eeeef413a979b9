"""The chat's advanced sampling (top-k, top-p, min-p, repeat penalty, seed, stop strings): what
Send hands the engine, what greedy greys out, Reset, and input that cannot be used: one line,
nothing sent, nothing typed lost (not even across a chat switch and a relaunch)."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from app.sampling_fields import DEFAULTS, FieldError, parse_seed, parse_stop, stop_text  # noqa: E402
from test_gui_chat_input import _load, _make_window  # noqa: E402


def test_the_seed_and_stop_strings_parse_or_say_why_in_one_line():
    assert parse_seed("") is None and parse_seed(" 42 ") == 42 and parse_seed(str(2**64 - 1)) == 2**64 - 1
    for bad, fragment in (("abc", "not a whole number"), ("-1", "leave the seed empty"), ("4.5", "whole number"),
                          (str(2**64), "too large"), ("٣", "whole number")):
        with pytest.raises(FieldError, match=fragment):
            parse_seed(bad)
    assert parse_stop("") == [] and parse_stop("User:\n\n\\n\\n\nA\\tB\\\\") == ["User:", "\n\n", "A\tB\\"]
    for bad, fragment in (("ok\n   ", "line 2: only spaces"), ("a\\q", r"line 1: \\q is not an escape"),
                          ("end\\", "at the end"), ("x" * 201, "201 characters"),
                          ("\n".join(map(str, range(17))), "17 given; at most 16")):
        with pytest.raises(FieldError, match=fragment):
            parse_stop(bad)
    for stops in (["\n\n", "a\\n literal", "tab\there", "\\"], ["User:", "</s>"]):
        assert parse_stop(stop_text(stops)) == stops


@pytest.fixture
def loaded(qtbot, tmp_path, monkeypatch, tiny_target):
    w = _make_window(qtbot, tmp_path, monkeypatch)
    _load(qtbot, w, tiny_target, None)
    yield w
    w.close()


def _requests(monkeypatch) -> list:
    """Every GenerationRequest the chat hands a worker."""
    from app import workers

    seen: list = []
    real = workers.GenerationWorker.__init__

    def record(self, engine, request, *a, **k):
        seen.append(request)
        real(self, engine, request, *a, **k)

    monkeypatch.setattr(workers.GenerationWorker, "__init__", record)
    return seen


def _send(qtbot, chat, text: str) -> None:
    chat.prompt.setPlainText(text)
    qtbot.mouseClick(chat.send_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat.worker is None, timeout=30000)


def test_send_hands_the_engine_every_sampling_setting(qtbot, loaded, monkeypatch):
    chat = loaded.chat
    seen = _requests(monkeypatch)
    chat.apply_settings({"drafter": "lookup", "lookahead": 2, "temperature": 0.8, "top_k": 30, "top_p": 0.9,
                         "min_p": 0.05, "repeat_penalty": 1.3, "stop": ["\n\n", "Q:"], "seed": 1234,
                         "max_tokens": 6})
    _send(qtbot, chat, "the value of")
    (req,) = seen
    s = req.sampling
    assert (s.temperature, s.top_k, s.top_p, s.min_p, s.seed) == (0.8, 30, 0.9, 0.05, 1234)
    assert (req.stop, req.penalties.repeat, req.max_tokens) == (("\n\n", "Q:"), 1.3, 6)
    chat.temperature.setValue(0.0)  # greedy: the seed is not read, even one typed wrong
    chat.seed.setText("not a number")
    assert chat.settings_panel.problem() is None
    chat.act_on_last_answer("regenerate")
    qtbot.waitUntil(lambda: chat.worker is None, timeout=30000)
    assert len(seen) == 2 and seen[1].sampling.greedy and seen[1].sampling.seed is None
    assert seen[1].stop == ("\n\n", "Q:") and seen[1].penalties.repeat == 1.3, "greedy still stops and penalises"


def test_greedy_greys_out_what_it_ignores_and_reset_restores_every_default(qtbot, loaded):
    chat, panel = loaded.chat, loaded.chat.settings_panel
    adv = panel.advanced
    assert adv.body.isHidden(), "folded: the drawer stays short"
    adv.toggle.click()
    assert not adv.body.isHidden()
    chat.apply_settings({**chat.settings(), "temperature": 0.0})
    assert not any(w.isEnabled() for w in (chat.top_k, chat.top_p, chat.min_p, chat.seed))
    assert chat.repeat_penalty.isEnabled() and chat.stop_strings.isEnabled() and not adv.greedy_note.isHidden()
    chat.temperature.setValue(0.7)
    assert all(w.isEnabled() for w in (chat.top_k, chat.top_p, chat.min_p, chat.seed)) and adv.greedy_note.isHidden()
    chat.apply_settings({**chat.settings(), "top_k": 5, "min_p": 0.2, "seed": 9, "stop": ["x"], "max_tokens": 99,
                         "system": "Keep me", "lookahead": 4})
    assert "4 set" in adv.toggle.text(), adv.toggle.text()
    qtbot.mouseClick(adv.reset_btn, Qt.MouseButton.LeftButton)
    v = chat.settings()
    assert {k: v[k] for k in DEFAULTS} == DEFAULTS
    assert (v["system"], v["lookahead"]) == ("Keep me", 4), "Reset leaves drafting and the system prompt"
    assert adv.toggle.text() == "Advanced sampling"


def test_a_bad_seed_or_stop_string_stops_send_with_one_line_and_loses_nothing(qtbot, loaded, monkeypatch, tmp_path):
    w = loaded
    chat = w.chat
    seen = _requests(monkeypatch)
    notices: list[str] = []
    chat.message.connect(notices.append)
    chat.apply_settings({"drafter": "lookup", "lookahead": 2, "temperature": 0.7, "max_tokens": 4})
    _send(qtbot, chat, "the value of")
    cid = chat.conversation_id
    n_messages = len(w.history.messages(cid))
    chat.seed.setText("12ab")
    adv = chat.settings_panel.advanced
    assert not adv.problem_label.isHidden() and "Seed “12ab” is not a whole number" in adv.problem_label.text()
    assert "⚠" in adv.toggle.text()
    chat.prompt.setPlainText("a second question")
    qtbot.mouseClick(chat.send_btn, Qt.MouseButton.LeftButton)
    assert len(seen) == 1 and chat.worker is None, "nothing sent"
    assert notices[-1].startswith("Seed “12ab” is not a whole number") and "\n" not in notices[-1]
    assert chat.prompt.toPlainText() == "a second question" and len(w.history.messages(cid)) == n_messages
    assert not adv.body.isHidden() and chat.drawer_open, "unfolded, where the line is seen"
    chat.stop_strings.setPlainText("fine\nbad \\x escape")
    assert "line 2: \\x is not an escape" in adv.problem_label.text()
    chat.act_on_last_answer("regenerate")
    assert len(seen) == 1 and "line 2" in notices[-1]
    monkeypatch.setattr("PySide6.QtWidgets.QInputDialog.getText", lambda *a, **k: ("Broken", True))
    chat.settings_panel.save_as_preset()
    assert notices[-1].startswith("Preset not saved: Stop strings, line 2")
    chat.new_conversation()
    chat.apply_settings({**chat.settings(), "seed": None, "stop": []})
    chat.open_conversation(cid)
    assert (chat.seed.text(), chat.stop_strings.toPlainText()) == ("12ab", "fine\nbad \\x escape"), "kept as typed"
    w.history.close()
    w.close()
    again = _make_window(qtbot, tmp_path, monkeypatch)
    again.chat.open_conversation(cid)
    assert (again.chat.seed.text(), again.chat.stop_strings.toPlainText()) == ("12ab", "fine\nbad \\x escape")
    again.chat.seed.setText("")
    again.chat.stop_strings.setPlainText("fine")
    assert again.chat.settings_panel.problem() is None and again.chat.settings_panel.advanced.problem_label.isHidden()
    again.close()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_unfolded_section_fits_the_drawer_at_800_and_1024_px(qtbot, loaded, theme):
    """Unfolded, greedy (its note), then sampling with a problem line: nothing cut off, no sideways scrolling."""
    from layout_checks import settled_problems

    w = loaded
    w.show()
    qtbot.waitExposed(w)
    w.set_theme(theme)
    chat = w.chat
    found: list[str] = []
    for size in ((800, 600), (1024, 700)):
        w.resize(*size)
        if not chat.drawer_open:
            qtbot.keyClick(chat, Qt.Key.Key_F9)
        chat.settings_panel.advanced.set_open(True)
        for temperature, seed in ((0.0, "7"), (0.8, "seven")):
            chat.temperature.setValue(temperature)
            chat.seed.setText(seed)
            chat.sides.drawer_scroll.ensureWidgetVisible(chat.settings_panel.advanced.problem_label)
            found += [f"{size} t={temperature}: {p}" for p in settled_problems(qtbot, w)]
    assert found == []
