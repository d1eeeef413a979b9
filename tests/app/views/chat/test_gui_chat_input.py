"""The chat's input side, used the way a person does: the Attach button, drops and pastes
of files, chips, the token meter, the context policy, the model bar and the Auto note."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QMimeData, QPointF, QSettings, Qt, QUrl  # noqa: E402
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QGuiApplication  # noqa: E402
from PySide6.QtWidgets import QApplication, QFileDialog, QMessageBox  # noqa: E402

from app.history import History  # noqa: E402

WORDS = "the value of the data in the class "


def _make_window(qtbot, tmp_path, monkeypatch, settings: dict | None = None):
    from app.main_window import MainWindow

    errors: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning", lambda *a, **k: errors.append(a[2]) or QMessageBox.StandardButton.Ok)
    qs = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    for k, v in (settings or {}).items():
        qs.setValue(k, v)
    w = MainWindow(history=History(tmp_path / "h.db"), settings=qs, autoload=False)
    w.errors = errors  # type: ignore[attr-defined]
    qtbot.addWidget(w)
    return w


def _load(qtbot, w, target: Path, draft=None, n_ctx=None) -> None:
    w.session.load(target, draft, label="tiny", n_ctx=n_ctx)
    # a tiny model loads in well under a second, but beside the full suite and two busy loops
    # one load took more than 20 s: the wait is for a result, not a speed
    qtbot.waitUntil(lambda: w.session.engine is not None and not w.session.busy, timeout=60000)


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch, tiny_target):
    w = _make_window(qtbot, tmp_path, monkeypatch)
    _load(qtbot, w, tiny_target, tiny_target)
    yield w
    w.close()


def _file(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def attach(qtbot, chat, *paths) -> None:
    """Attach files as the Attach button does and wait until they are read (on a worker thread)."""
    chat.attach_files([str(p) for p in paths])
    read(qtbot, chat)


def read(qtbot, chat) -> None:
    """Wait until the files a drop, a paste or Attach brought are read."""
    qtbot.waitUntil(lambda: not chat.reading, timeout=20000)


def _tokens(w, text: str) -> int:
    return len(w.session.engine.target.tokenize(text, add_special=False))


def _files_mime(*paths: Path) -> QMimeData:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    return mime


def _drop(widget, mime: QMimeData) -> None:
    """What a drag from a file manager delivers: enter (must be accepted), then the drop."""
    pos = QPointF(widget.width() / 2, widget.height() / 2)
    enter = QDragEnterEvent(pos.toPoint(), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, enter)
    assert enter.isAccepted(), "the drag was refused"
    QApplication.sendEvent(widget, QDropEvent(pos, Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                                              Qt.KeyboardModifier.NoModifier))


def _send(qtbot, w, text: str, **settings) -> None:
    chat = w.chat
    chat.apply_settings({"drafter": "model", "lookahead": 3, "temperature": 0.0, "max_tokens": 20, **settings})
    chat.prompt.setPlainText(text)
    qtbot.mouseClick(chat.send_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat.worker is None, timeout=30000)


# -- item 1: attachments --------------------------------------------------------------------
def test_attach_button_opens_the_dialog_and_adds_removable_chips(qtbot, window, tmp_path, monkeypatch):
    chat = window.chat
    a = _file(tmp_path, "notes.md", "the data of the class " * 10)
    b = _file(tmp_path, "log.txt", "value " * 30)
    asked = []
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", lambda *args, **kw: asked.append(args) or ([str(a), str(b)], ""))
    qtbot.mouseClick(chat.attach_btn, Qt.MouseButton.LeftButton)  # the real button: clicked(bool) must not break it
    assert asked, "the file dialog was not opened"
    read(qtbot, chat)
    assert [x.name for x in chat.attachments.items()] == ["notes.md", "log.txt"]
    assert not chat.attachments.isHidden() and len(chat.attachments.chips) == 2
    n = _tokens(window, a.read_text())
    share = round(100 * n / chat.composer.context_size())
    assert chat.attachments.chips[0].text() == f"notes.md · {n:,} tokens · {share}%"  # no ≈
    assert not window.errors
    old = chat.attachments.chips[1]
    qtbot.mouseClick(old.remove_btn, Qt.MouseButton.LeftButton)
    assert [x.name for x in chat.attachments.items()] == ["notes.md"] and old.isHidden()
    _send(qtbot, window, "summarise")
    user = window.history.messages(chat.conversation_id)[0]
    assert user.content.startswith("Attached file `notes.md`") and user.content.endswith("\n\nsummarise")  # files first
    assert "log.txt" not in user.content
    assert chat.attachments.items() == [] and chat.attachments.isHidden()


def test_cancelled_dialog_attaches_nothing(qtbot, window, monkeypatch):
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", lambda *a, **k: ([], ""))
    qtbot.mouseClick(window.chat.attach_btn, Qt.MouseButton.LeftButton)
    assert window.chat.attachments.items() == [] and not window.errors


def test_files_dropped_on_the_transcript_or_the_prompt_become_chips(qtbot, window, tmp_path):
    chat = window.chat
    a = _file(tmp_path, "a.txt", "alpha text")
    b = _file(tmp_path, "b.py", "print('b')\n")
    _drop(chat.transcript.viewport(), _files_mime(a))
    _drop(chat.prompt.viewport(), _files_mime(b))
    read(qtbot, chat)
    assert [x.name for x in chat.attachments.items()] == ["a.txt", "b.py"]
    assert chat.prompt.toPlainText() == ""  # the path did not land in the prompt as text


def test_pasted_files_become_chips_and_pasted_text_stays_text(qtbot, window, tmp_path):
    chat = window.chat
    a = _file(tmp_path, "pasted.md", "# title\nbody")
    QGuiApplication.clipboard().setMimeData(_files_mime(a))
    chat.prompt.setFocus()
    qtbot.keyClick(chat.prompt, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    read(qtbot, chat)
    assert [x.name for x in chat.attachments.items()] == ["pasted.md"] and chat.prompt.toPlainText() == ""
    QGuiApplication.clipboard().setText("plain words")
    qtbot.keyClick(chat.prompt, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    assert chat.prompt.toPlainText() == "plain words" and len(chat.attachments.items()) == 1


def test_bad_files_are_refused_with_one_line(qtbot, window, tmp_path):
    chat = window.chat
    binary = tmp_path / "x.bin"
    binary.write_bytes(b"\x81\xfe\x00\xff")  # no byte-order mark: FF FE would make it UTF-16 text
    attach(qtbot, chat, binary, tmp_path / "missing.txt", tmp_path)
    assert chat.attachments.items() == []
    assert len(window.errors) == 1, "several refusals are one message, a line per file"
    lines = window.errors[0].split("\n")
    assert "not a UTF-8 text file" in lines[0] and "missing.txt: cannot read" in lines[1] and "is a folder" in lines[2]


def test_attachment_larger_than_the_context_is_refused_with_its_size(qtbot, tmp_path, monkeypatch, tiny_target):
    w = _make_window(qtbot, tmp_path, monkeypatch)
    _load(qtbot, w, tiny_target, "lookup", n_ctx=256)
    big = _file(tmp_path, "big.log", WORDS * 60)
    n = _tokens(w, big.read_text())
    attach(qtbot, w.chat, big)
    assert w.chat.attachments.items() == []
    assert w.errors == [f"big.log is {n:,} tokens but the context holds 256: not attached "
                        "(load the model with a longer context in the bar above the chat)"]
    w.close()


def test_without_a_model_sizes_are_estimates(qtbot, tmp_path, monkeypatch):
    w = _make_window(qtbot, tmp_path, monkeypatch)
    a = _file(tmp_path, "a.txt", "x" * 400)
    attach(qtbot, w.chat, a)
    share = round(100 * 100 / w.chat.composer.context_size())
    assert w.chat.attachments.chips[0].text() == f"a.txt · ≈100 tokens · {share}%"
    w.chat.meter.update_now()
    assert w.chat.meter.text().startswith("≈")
    w.close()


# -- item 2: the token meter and the context policy ---------------------------------------------
def test_meter_counts_system_history_prompt_and_attachments_debounced(qtbot, window, tmp_path):
    chat = window.chat
    chat.meter.update_now()
    empty = chat.meter.used
    assert chat.meter.text() == f"{empty:,} / 2,048 tokens"  # the tiny model's trained length caps 4096
    recounts = []
    orig = chat.composer.measure_prompt
    chat.meter._measure = lambda: recounts.append(1) or orig()
    qtbot.keyClicks(chat.prompt, "the value of the data")
    qtbot.waitUntil(lambda: bool(recounts), timeout=60000)
    qtbot.wait(400)
    assert len(recounts) <= 3  # a few recounts, not one per key (20 keys were typed)
    typed = _tokens(window, "the value of the data")
    assert chat.meter.used == empty + typed
    attach(qtbot, chat, _file(tmp_path, "n.txt", "class data " * 20))
    qtbot.waitUntil(lambda: chat.meter.used > empty + typed, timeout=60000)
    assert not chat.meter.over


def test_meter_turns_red_when_over(qtbot, tmp_path, monkeypatch, tiny_target):
    w = _make_window(qtbot, tmp_path, monkeypatch)
    _load(qtbot, w, tiny_target, None, n_ctx=128)
    w.chat.prompt.setPlainText(WORDS * 30)
    w.chat.meter.update_now()
    assert w.chat.meter.over and "#d32f2f" in w.chat.meter.styleSheet() and w.chat.meter.text().endswith("/ 128 tokens")
    w.close()


def test_a_message_larger_than_the_context_is_refused_and_nothing_is_stored(qtbot, tmp_path, monkeypatch, tiny_target):
    w = _make_window(qtbot, tmp_path, monkeypatch)
    _load(qtbot, w, tiny_target, None, n_ctx=128)
    text = WORDS * 30
    w.chat.prompt.setPlainText(text)
    qtbot.mouseClick(w.chat.send_btn, Qt.MouseButton.LeftButton)
    assert w.chat.worker is None and w.chat.conversation_id is None and w.history.conversations() == []
    assert w.chat.prompt.toPlainText() == text  # the typed text is kept
    assert len(w.errors) == 1 and "tokens but the context holds 128" in w.errors[0]
    w.close()


def test_long_chat_drops_the_oldest_turns_and_says_so(qtbot, tmp_path, monkeypatch, tiny_target):
    w = _make_window(qtbot, tmp_path, monkeypatch)
    _load(qtbot, w, tiny_target, None, n_ctx=512)
    conv = w.history.create(title="long", system_prompt="be brief")
    for i in range(6):
        w.history.add_message(conv.id, "user", f"question {i} " + WORDS * 8)
        w.history.add_message(conv.id, "assistant", f"answer {i} " + WORDS * 8)
    w.chat.open_conversation(conv.id)
    sent = []
    from app import workers

    orig = workers.GenerationWorker.__init__

    def spy(self, engine, request, **kw):
        sent.append((request.prompt, request.system))
        orig(self, engine, request, **kw)

    monkeypatch.setattr(workers.GenerationWorker, "__init__", spy)
    notices = []
    w.chat.message.connect(notices.append)
    _send(qtbot, w, "and now?", drafter="none", max_tokens=60, system="be brief")
    chat, system = sent[0]
    assert system == "be brief" and chat[-1]["content"] == "and now?" and chat[0]["role"] == "user"
    dropped = 13 - len(chat)
    assert dropped > 0 and dropped % 2 == 0  # whole turns
    assert chat[0]["content"].startswith(f"question {dropped // 2} ")
    note = f"{dropped} earlier messages are not sent: the context holds 512 tokens"
    assert w.chat.context_note.text() == note and not w.chat.context_note.isHidden() and note in notices
    prompt = len(w.session.engine.tokens_for(chat, chat=True, system="be brief"))
    assert prompt + 60 <= 512
    msgs = w.history.messages(conv.id)
    assert len(msgs) == 14 and msgs[-1].status == "complete"  # history keeps everything
    w.close()


# -- item 2/3: the model bar ----------------------------------------------------------------------
def test_model_bar_lists_imports_offers_lookup_and_loads_with_the_chosen_context(qtbot, tmp_path, monkeypatch, tiny_target):
    from engine.models import store

    store.register_import(tiny_target)
    w = _make_window(qtbot, tmp_path, monkeypatch, {"performance/n_ctx": 1024})
    bar = w.chat.model_bar
    labels = [bar.model.itemText(i) for i in range(bar.model.count())]
    assert "tiny-target (imported)" in labels
    bar.model.setCurrentIndex(labels.index("tiny-target (imported)"))
    assert not bar.draft.model().item(0).isEnabled()  # an imported GGUF has no draft model
    assert [bar.context.itemData(i) for i in range(bar.context.count())] == [1024, 2048]  # up to the trained length
    assert bar.need.text().endswith(" MB") and bar.need.toolTip().startswith(f"Needs {bar.need.text()} of memory at 1,024 tokens")
    assert "KV cache" in bar.need.toolTip()
    assert bar.n_ctx() == 1024  # the Settings default is preselected
    bar.draft.setCurrentIndex(bar.draft.findData("lookup"))
    bar.context.setCurrentIndex(bar.context.findData(2048))
    qtbot.mouseClick(bar.load_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: w.session.engine is not None and not w.session.busy, timeout=20000)
    assert w.session.pair.draft == "lookup" and w.session.engine.n_ctx == 2048
    assert not bar.load_btn.isEnabled() and bar.load_btn.toolTip().startswith("Loaded")  # nothing new to load
    bar.context.setCurrentIndex(bar.context.findData(1024))
    assert bar.load_btn.isEnabled()  # another context is a reload
    bar.context.setCurrentIndex(bar.context.findData(2048))
    assert w.chat.drafter is bar.draft  # one drafter control, in the bar
    _send(qtbot, w, "the value of the value of", drafter="lookup")
    assert w.history.messages(w.chat.conversation_id)[-1].stats["mode"] == "lookup"
    w.close()


def test_models_view_loads_use_the_settings_context(qtbot, tmp_path, monkeypatch, tiny_target):
    w = _make_window(qtbot, tmp_path, monkeypatch, {"performance/n_ctx": 1024})
    _load(qtbot, w, tiny_target, None)  # no n_ctx: as Models' Load calls it
    assert w.session.engine.n_ctx == 1024
    assert w.chat.model_bar.n_ctx() == 1024  # the bar shows the loaded length
    w.close()


# -- item 5: Auto that drafts nothing says so ---------------------------------------------------
def test_auto_drafting_nothing_is_said_under_the_answer(qtbot, window):
    chat = window.chat
    chat.stream.show_auto_note({"mode": "model", "lookahead": "auto (k=0 x20)", "drafted": 0, "generated_tokens": 20})
    assert chat.auto_note.isVisibleTo(chat)
    assert chat.auto_note.text() == ("Auto is not drafting: on this machine the draft costs more than it saves — "
                                     "try Prompt lookup for edits")
    tip = chat.auto_note.toolTip()
    assert "cost ratio" in tip and "verifying at once" in tip and "best predicted" in tip
    chat.stream.show_auto_note({"mode": "model", "lookahead": "auto (k=0 x3, 4 x5)", "drafted": 20})
    assert not chat.auto_note.isVisibleTo(chat)
    chat.stream.show_auto_note({"mode": "model", "lookahead": "3", "drafted": 0})
    assert not chat.auto_note.isVisibleTo(chat)  # a fixed lookahead of the user's choosing: not Auto's decision


def test_a_real_answer_under_auto_shows_the_note_exactly_when_nothing_was_drafted(qtbot, window):
    _send(qtbot, window, "the value of", lookahead="auto", max_tokens=30)
    stats = window.history.messages(window.chat.conversation_id)[-1].stats
    assert "acceptance" not in window.chat.stats_label.text() or stats["drafted"] > 0
    assert window.chat.auto_note.isVisibleTo(window.chat) == (stats["drafted"] == 0)


def test_a_pair_loaded_with_a_str_draft_path_keeps_its_draft_model(qtbot, tmp_path, monkeypatch, tiny_target, tiny_draft):
    """Views and the GUI benchmark pass paths as str: the Draft box must still offer the model."""
    w = _make_window(qtbot, tmp_path, monkeypatch)
    _load(qtbot, w, str(tiny_target), str(tiny_draft))
    bar = w.chat.model_bar
    assert bar.draft.model().item(0).isEnabled() and bar.draft.itemText(0) == "Draft: draft"
    w.chat.apply_settings({"drafter": "model"})
    assert w.chat.drafter.currentData() == "model" and w.chat.draft_spec() == str(tiny_draft)
    w.chat.apply_settings({"drafter": "suffix"})  # the model-free suffix draft is offered too
    assert w.chat.drafter.currentData() == "suffix" and w.chat.draft_spec() == "suffix"
    w.close()


def test_model_bar_lists_downloaded_catalog_pairs_with_their_draft(qtbot, tmp_path, monkeypatch, tiny_target, tiny_draft):
    from engine.models import catalog, store
    from engine.models.context_window import memory_need

    cat = catalog.load()
    pair = cat.pairs[cat.default_pair]
    on_disk = {pair.target.id: tiny_target, pair.draft.id: tiny_draft}
    monkeypatch.setattr(store, "locate_model", lambda spec, verify=False: on_disk.get(spec.id))
    w = _make_window(qtbot, tmp_path, monkeypatch)
    bar = w.chat.model_bar
    assert [c.label for c in bar.choices] == [pair.title]  # only the pair whose files are here
    assert bar.draft.model().item(0).isEnabled() and bar.draft.itemText(0) == "Draft: draft"
    trained = pair.target.context_length
    assert bar.context.itemData(bar.context.count() - 1) == trained and bar.n_ctx() == min(4096, trained)
    bar.context.setCurrentIndex(bar.context.count() - 1)
    assert bar.need.toolTip().startswith(f"Needs {bar.need.text()}")
    from engine.units import human_bytes

    assert bar.need.text() == human_bytes(memory_need((pair.target, pair.draft), trained))  # the catalog's sizes
    bar.draft.setCurrentIndex(bar.draft.findData("none"))
    assert bar.need.text() == human_bytes(memory_need((pair.target,), trained))  # no draft, less memory
    store.register_import(tiny_target)
    bar.relist()  # e.g. the chat came back into view after an import: the pick stays
    assert bar.current().pair_id == pair.id and bar.draft.currentData() == "none" and len(bar.choices) == 2
    w.close()


def test_attachment_reading_refuses_what_is_not_a_small_text_file_before_reading_it(tmp_path):
    """Checked before reading: a folder, a pipe (which would block), a file over the limit
    (a sparse 10 GB file is refused without being read), bytes that are not UTF-8."""
    import os

    from app.widgets.attachments.attachments import MAX_ATTACHMENT, AttachmentError, read_text_file

    ok = tmp_path / "notes.md"
    ok.write_text("the data of the class")
    assert read_text_file(ok) == ("notes.md", "the data of the class")
    big = tmp_path / "disk.img"
    with big.open("wb") as f:
        f.truncate(10 * 10**9)
    with pytest.raises(AttachmentError, match=r"disk.img: 9,765,625 KB is too large to attach"):
        read_text_file(big)
    edge = tmp_path / "edge.txt"
    edge.write_bytes(b"a" * MAX_ATTACHMENT)
    assert len(read_text_file(edge)[1]) == MAX_ATTACHMENT
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(AttachmentError, match="pipe: not a regular file"):
        read_text_file(fifo)
    with pytest.raises(AttachmentError, match="is a folder"):
        read_text_file(tmp_path)
    binary = tmp_path / "x.bin"
    binary.write_bytes(b"\x81\xfe\x00\xff")  # no byte-order mark: FF FE would make it UTF-16 text
    with pytest.raises(AttachmentError, match="not a UTF-8 text file"):
        read_text_file(binary)
