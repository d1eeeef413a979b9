"""The Library page and asking a folder from the chat (issue #50), through the real engine on
the tiny models (pytest-qt, offscreen): a folder added is indexed with progress off the GUI
thread, its unreadable files listed one line each, Stop keeps what was done, the watch
re-indexes a file saved or deleted while the app runs; a chat asking the folder streams an
answer whose numbered sources are listed under it, a source clicked opens its file and shows
the passage, and the sources stay with the chat when it is reopened and in its exports."""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("docx")
pytest.importorskip("openpyxl")
pytest.importorskip("pypdf")
pytest.importorskip("watchdog")

from PySide6.QtCore import QSettings, QUrl  # noqa: E402
from PySide6.QtGui import QDesktopServices  # noqa: E402

from app.history import History  # noqa: E402
from brief_files import brief, brief_folder  # noqa: E402
from test_gui_chat import window  # noqa: E402,F401  (the chat tests' window: tiny self-draft pair loaded)


@pytest.fixture
def folder(tmp_path):
    f = tmp_path / "briefs"
    brief_folder(f, 10)
    (f / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    (f / "program.txt").write_bytes(bytes(range(256)) * 8)
    return f


@pytest.fixture
def library(qtbot, tmp_path):
    from app.library_shelf import LibraryShelf
    from app.views.library import LibraryView

    shelf = LibraryShelf(QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    view = LibraryView(shelf)
    qtbot.addWidget(view)
    errors: list[str] = []
    view.error.connect(errors.append)
    view.errors = errors  # type: ignore[attr-defined]
    yield view
    view.shutdown()


def _ready(shelf, folder) -> bool:
    st = shelf.states.get(str(folder))
    return st is not None and st.state == "ready"


def test_a_folder_added_is_indexed_with_progress_and_its_unreadable_files_listed(qtbot, library, folder):
    shelf = library.shelf
    seen: list[tuple[str, int, int]] = []
    shelf.changed.connect(lambda f: seen.append((shelf.states[f].state, shelf.states[f].done, shelf.states[f].total)))
    library.add_folder(str(folder))
    qtbot.waitUntil(lambda: _ready(shelf, folder), timeout=60000)
    assert ("indexing", 0, 0) in seen and any(s == "indexing" and total == 12 for s, _, total in seen)
    line = library.folder_list.item(0).text()
    assert line.startswith("briefs: 10 files,") and "2 unreadable" in line and "kept current" in line
    rows = [library.unreadable.item(i).text() for i in range(library.unreadable.count())]
    assert len(rows) == 2 and rows[0].startswith("broken.docx: ") and rows[1].startswith("program.txt: not a UTF-8")
    assert all("\n" not in r for r in rows) and library.errors == []
    qtbot.waitUntil(lambda: not library.stop_btn.isEnabled(), timeout=60000)  # nothing left to stop
    # kept: a new shelf on the same settings lists the folder again
    from app.library_shelf import LibraryShelf

    again = LibraryShelf(shelf._settings)
    try:
        assert again.folders() == [str(folder)]
        qtbot.waitUntil(lambda: _ready(again, folder), timeout=60000)
        assert again.states[str(folder)].files == 10
    finally:
        again.shutdown()


def test_a_folder_that_is_not_there_is_one_line(qtbot, library, tmp_path):
    library.add_folder(str(tmp_path / "nowhere"))
    assert library.errors == [f"{tmp_path / 'nowhere'}: no such folder"]
    assert library.shelf.folders() == [] and library.empty.isVisible() is not None


def test_stop_keeps_what_was_indexed_and_reindex_finishes(qtbot, library, folder, monkeypatch):
    from engine.library import indexer

    real = indexer.read_document

    def slow(p, name=None):
        time.sleep(0.3)
        return real(p, name)

    monkeypatch.setattr(indexer, "read_document", slow)
    shelf = library.shelf
    library.add_folder(str(folder))
    qtbot.waitUntil(lambda: shelf.states[str(folder)].done >= 2, timeout=30000)
    started = time.monotonic()
    library.stop_btn.click()
    qtbot.waitUntil(lambda: shelf.states[str(folder)].state == "stopped", timeout=60000)
    assert time.monotonic() - started < 5
    st = shelf.states[str(folder)]
    assert 0 < st.files < 10 and "stopped" in library.folder_list.item(0).text()
    monkeypatch.setattr(indexer, "read_document", real)
    library.reindex_btn.click()
    qtbot.waitUntil(lambda: _ready(shelf, folder), timeout=60000)
    assert shelf.states[str(folder)].files == 10


def test_the_watch_reindexes_a_file_saved_or_deleted_while_the_app_runs(qtbot, library, folder):
    shelf = library.shelf
    library.add_folder(str(folder))
    qtbot.waitUntil(lambda: _ready(shelf, folder), timeout=60000)
    (folder / "kestrel.md").write_text("# Project Kestrel\n\nProject Kestrel is led by Zora Quill; its budget is "
                                       "9,999 EUR.\n", encoding="utf-8")
    qtbot.waitUntil(lambda: _ready(shelf, folder) and shelf.states[str(folder)].files == 11, timeout=30000)
    assert shelf.search(str(folder), "Who leads project Kestrel?")[0].path == "kestrel.md"
    (folder / "kestrel.md").unlink()
    qtbot.waitUntil(lambda: _ready(shelf, folder) and shelf.states[str(folder)].files == 10, timeout=30000)
    assert all(h.path != "kestrel.md" for h in shelf.search(str(folder), "Who leads project Kestrel?"))


def test_remove_forgets_the_folder_and_deletes_its_index(qtbot, library, folder):
    from engine.library import index_path

    library.add_folder(str(folder))
    qtbot.waitUntil(lambda: _ready(library.shelf, folder), timeout=60000)
    assert index_path(folder).exists()
    library.remove_btn.click()
    assert library.shelf.folders() == [] and library.folder_list.count() == 0
    qtbot.waitUntil(lambda: not index_path(folder).exists(), timeout=60000)  # once its update has ended
    assert folder.is_dir() and len(list(folder.iterdir())) == 12


# -- asking the folder from the chat ------------------------------------------------------------


def test_an_answer_from_the_library_lists_its_sources_and_a_click_opens_the_file(qtbot, window, folder, tmp_path,
                                                                                  monkeypatch):
    chat, aurora = window.chat, brief(0)
    window.views["Library"].add_folder(str(folder))
    qtbot.waitUntil(lambda: _ready(window.shelf, folder), timeout=60000)
    assert chat.library_box.isVisible() or not chat.isVisible()
    chat.library_box.setCurrentIndex(chat.library_box.findData(str(folder)))
    chat.apply_settings({"drafter": "lookup", "lookahead": 4, "temperature": 0.0, "max_tokens": 24})
    chat.prompt.setPlainText(f"Who leads project {aurora.project} and what is its budget?")
    chat.send()
    qtbot.waitUntil(lambda: chat.worker is None, timeout=60000)
    assert window.errors == []
    cid = chat.conversation_id
    answer = window.history.messages(cid)[-1]
    sources = answer.stats["sources"]
    assert sources[0]["n"] == 1 and sources[0]["file"] == aurora.file and sources[0]["folder"] == str(folder)
    assert aurora.lead in sources[0]["text"]
    shown = chat.transcript.toPlainText()
    assert f"Sources\n[1] {aurora.file}, " in shown

    # a "[1]" in the answer's own text is a link to its source too
    from app.widgets.transcript.sources import link_citations
    from PySide6.QtGui import QTextDocument

    doc = QTextDocument()
    doc.setPlainText("Mara leads it [1]; the budget is in [1] and [7].")
    link_citations(doc, answer, "msg", chat.transcript.palette().link().color())
    hrefs = {doc.find(f"[{n}]").charFormat().anchorHref() for n in (1, 7)}
    assert hrefs == {f"msg:source:{answer.id}:1", ""}

    opened: list[QUrl] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url) or True)
    chat.transcript._on_anchor(QUrl(f"msg:source:{answer.id}:1"))  # what a click on "[1] …" sends
    assert [u.toLocalFile() for u in opened] == [str(folder / aurora.file)]
    assert chat.source_pane.isVisibleTo(chat) and aurora.lead in chat.source_pane.passage.toPlainText()

    # reopened: the sources under the answer and the chat's folder come back with it
    chat.new_conversation()
    chat.library_box.setCurrentIndex(0)
    chat.open_conversation(cid)
    assert f"[1] {aurora.file}, " in chat.transcript.toPlainText()
    assert chat.library.folder() == str(folder) and not chat.source_pane.isVisibleTo(chat)

    # exports: the report lists them as references; the JSON keeps them whole
    chat.export_conversation(str(tmp_path / "chat.md"))
    report = (tmp_path / "chat.md").read_text(encoding="utf-8")
    assert "**Sources**" in report and f"- [1] {aurora.file}, " in report
    chat.export_all(str(tmp_path / "all.json"))
    qtbot.waitUntil(lambda: (tmp_path / "all.json").exists() and chat.keeping.job is None, timeout=20000)
    kept = json.loads((tmp_path / "all.json").read_text(encoding="utf-8"))
    text = json.dumps(kept)
    assert f'"file": "{aurora.file}"' in text and '"sources"' in text
    from app.history.archive import import_chats, read_archive

    fresh = History(tmp_path / "fresh.db")  # a fresh profile: imported, the answer lists its sources again
    import_chats(fresh, read_archive(tmp_path / "all.json"))
    back = fresh.messages(fresh.conversations()[0].id)[-1]
    assert back.stats["sources"] == sources and "**Sources**" in fresh.to_markdown(fresh.conversations()[0].id)

    # Regenerate asks the folder again: the new version has its own sources
    chat.asking.regenerate(answer.id)
    qtbot.waitUntil(lambda: chat.worker is None, timeout=60000)
    again = window.history.messages(cid)[-1]
    assert again.version == 2 and again.stats["sources"][0]["file"] == aurora.file

    # Continue goes on from the passages the answer was given, and keeps them
    from app.views.chat.library_ask import LibraryAsk

    asked = LibraryAsk.prompt_again("Who leads it?", again.stats["sources"])
    assert f"[1] {aurora.file}, " in asked and aurora.lead in asked and asked.endswith("Question: Who leads it?")
    assert again.status == "complete" and again.stats["finish_reason"] == "length"
    chat.asking.continue_answer(again.id)
    qtbot.waitUntil(lambda: chat.worker is None, timeout=60000)
    went_on = window.history.messages(cid)[-1]
    assert len(went_on.content) > len(again.content) and went_on.stats["sources"] == again.stats["sources"]


def test_a_source_whose_file_is_gone_shows_the_kept_passage_and_opens_nothing(qtbot, window, folder, monkeypatch):
    chat, aurora = window.chat, brief(0)
    window.views["Library"].add_folder(str(folder))
    qtbot.waitUntil(lambda: _ready(window.shelf, folder), timeout=60000)
    chat.library_box.setCurrentIndex(chat.library_box.findData(str(folder)))
    chat.apply_settings({"drafter": "lookup", "lookahead": 4, "temperature": 0.0, "max_tokens": 8})
    chat.prompt.setPlainText(f"Who leads project {aurora.project}?")
    chat.send()
    qtbot.waitUntil(lambda: chat.worker is None, timeout=60000)
    answer = window.history.messages(chat.conversation_id)[-1]
    (folder / aurora.file).unlink()
    opened: list[QUrl] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url) or True)
    chat.transcript._on_anchor(QUrl(f"msg:source:{answer.id}:1"))
    assert opened == [] and "no longer in the folder" in chat.source_pane.note.text()
    assert aurora.lead in chat.source_pane.passage.toPlainText()


def test_a_sources_pane_never_makes_the_chat_scroll_sideways(qtbot, window):
    """Beside the transcript where it fits (the chat list floats first), over its right edge
    where it does not; closed, the page is as it was."""
    chat = window.chat
    window.show()
    for size, floats in (((800, 600), True), ((1024, 700), False), ((1360, 860), False)):
        window.resize(*size)
        qtbot.wait(50)
        chat.source_pane.show_source({"n": 1, "file": "a.md", "section": "Budget", "text": "The budget is 5 EUR."})
        qtbot.wait(50)
        area = window.stack.currentWidget()
        assert area.widget().width() <= area.viewport().width(), f"the chat scrolls sideways at {size}"
        assert chat.source_pane.isVisibleTo(window) and chat.sides._source_overlay.floating is floats
        chat.source_pane.close_btn.click()
        qtbot.wait(50)
        assert not chat.source_pane.isVisibleTo(window) and not chat.sides._source_overlay.sheet.isVisible()


def test_without_a_watch_the_folder_is_indexed_and_reindex_finds_a_new_file(qtbot, tmp_path, folder):
    """watchdog missing (the `library` extra): the folder is still indexed and asked; its line
    does not claim it is kept current, and Re-index reads what was added."""
    from app.library_shelf import LibraryShelf
    from app.views.library import LibraryView

    view = LibraryView(LibraryShelf(QSettings(str(tmp_path / "w.ini"), QSettings.Format.IniFormat), watch=False))
    qtbot.addWidget(view)
    try:
        view.add_folder(str(folder))
        qtbot.waitUntil(lambda: _ready(view.shelf, folder), timeout=60000)
        assert "kept current" not in view.folder_list.item(0).text()
        (folder / "kestrel.md").write_text("# Project Kestrel\n\nLed by Zora Quill.\n", encoding="utf-8")
        view.reindex_btn.click()
        qtbot.waitUntil(lambda: _ready(view.shelf, folder) and view.shelf.states[str(folder)].files == 11,
                        timeout=30000)
    finally:
        view.shutdown()


def test_the_ranking_choice_changes_without_a_restart_and_a_broken_model_is_one_line(qtbot, tmp_path, folder,
                                                                                      tiny_bert):
    """The setting names an embedding GGUF (the tiny BERT): the first update loads it off the GUI
    thread, the folder's line says it is ranked by meaning, hits carry their cosine. The page's
    "Rank passages by" switches to words (BM25 at once) and back (the next update loads the model
    again) in the same run; a file that cannot embed is said once, and the words alone rank."""
    from app.library_shelf import EMBED_KEY, LibraryShelf
    from app.views.library import LibraryView
    bert = tiny_bert
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model")
    settings = QSettings(str(tmp_path / "e.ini"), QSettings.Format.IniFormat)
    settings.setValue(EMBED_KEY, str(bert))
    view = LibraryView(LibraryShelf(settings))
    qtbot.addWidget(view)
    shelf, ranking = view.shelf, view.ranking
    errors: list[str] = []
    view.error.connect(errors.append)

    def hits():
        return shelf.search(str(folder), "Who leads project Aurora?")

    def ranked_by_meaning() -> bool:
        return shelf.embedder is not None and _ready(shelf, folder) and not shelf.busy

    try:
        assert ranking.combo.currentText() == "Meaning and words: tiny-bert.gguf"
        view.add_folder(str(folder))
        qtbot.waitUntil(ranked_by_meaning, timeout=60000)
        assert "ranked by meaning too" in view.folder_list.item(0).text() and errors == []
        assert all(h.fused and h.cosine is not None for h in hits())
        assert ranking.state.text() == "Ranked by meaning and words (tiny-bert.gguf)."

        ranking.combo.setCurrentIndex(0)
        ranking.combo.activated.emit(0)  # "Words only", as a click chooses it
        assert settings.value(EMBED_KEY) == "none" and not hits()[0].fused, "BM25 at once"
        qtbot.waitUntil(lambda: _ready(shelf, folder) and not shelf.busy, timeout=60000)
        assert "ranked by meaning" not in view.folder_list.item(0).text()
        assert ranking.state.text().endswith("(BM25).") and not hits()[0].fused

        ranking.choose(str(bert))  # back, as "Another GGUF file…" gives it
        assert not hits()[0].fused, "words until the model is loaded again"
        qtbot.waitUntil(ranked_by_meaning, timeout=60000)
        assert all(h.fused and h.cosine is not None for h in hits()) and errors == []

        ranking.choose(str(broken))
        qtbot.waitUntil(lambda: bool(errors), timeout=60000)
        qtbot.waitUntil(lambda: _ready(shelf, folder) and not shelf.busy, timeout=60000)
        assert len(errors) == 1 and errors[0].startswith("The Library ranks by words alone: ")
        assert "broken.gguf" in errors[0] and "\n" not in errors[0]
        assert ranking.state.text().startswith("Ranked by words alone: ") and "broken.gguf" in ranking.state.text()
        assert ranking.combo.currentText() == "Meaning and words: broken.gguf"
        assert "ranked by meaning" not in view.folder_list.item(0).text() and not hits()[0].fused
    finally:
        view.shutdown()
