"""Documents in and reports out, in the window: every kind attaches as a chip that says its
share of the context, a document larger than the context offers its pages, and the exports
open in their own readers (python-docx, pypdf) with the answer's headings and tables and
none of the app's chrome."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")
pytest.importorskip("pypdf")
pytest.importorskip("docx")

from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtGui import QGuiApplication  # noqa: E402

from document_files import FACT, WRITERS, scanned_pdf, text_pdf  # noqa: E402
from engine.documents import attachment_block, read_document  # noqa: E402
from test_gui_chat_input import WORDS, _files_mime, _load, _make_window, attach, read, window  # noqa: E402,F401

ANSWER = """# Findings

The data shows **three** regions.

## Sales by region

| Region | Sales |
|---|---|
| North | 42 |
| South | 17 |

```python
total = 42 + 17
```

- first point
- second point
"""
STATS = {"generated_tokens": 57, "decode_tokens_per_s": 12.5, "time_to_first_token_s": 0.4, "drafted": 10,
         "acceptance_rate": 0.5, "mean_tokens_per_step": 2.0}


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_each_kind_attaches_as_a_chip_with_its_share_of_the_context(qtbot, window, tmp_path, kind):  # noqa: F811
    chat = window.chat
    f = WRITERS[kind](tmp_path / f"file.{kind}")
    attach(qtbot, chat, f)
    [a] = chat.attachments.items()
    assert not window.errors
    doc = read_document(f)
    assert a.name == f"file.{kind}" and a.text == doc.text and a.n_ctx == chat.composer.context_size()
    label = chat.attachments.chips[0].text()
    assert label.startswith(f"file.{kind} · {a.tokens:,} tokens · ") and label.endswith("%")
    assert chat.composer.compose("q") == attachment_block(f"file.{kind}", doc.text) + "\n\nq", "the CLI's block"


def test_a_pasted_pdf_and_docx_attach_and_a_scan_is_one_message(qtbot, window, tmp_path):  # noqa: F811
    chat = window.chat
    pdf, docx = WRITERS["pdf"](tmp_path / "notes.pdf"), WRITERS["docx"](tmp_path / "memo.docx")
    chat.prompt.insertFromMimeData(_files_mime(pdf, docx))
    read(qtbot, chat)
    assert [a.name for a in chat.attachments.items()] == ["notes.pdf", "memo.docx"] and not window.errors
    assert FACT in chat.attachments.items()[0].text
    scan = scanned_pdf(tmp_path / "scan.pdf")
    (tmp_path / "p.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 16)
    attach(qtbot, chat, scan, tmp_path / "p.png")
    assert len(window.errors) == 2 and window.errors[1].startswith("scan.pdf: no text layer")
    assert window.errors[0].startswith("tiny reads text only: pictures need a model that sees"), \
        "a PNG is a picture now, refused at once for a model that reads text only (test_gui_pictures.py)"
    assert len(chat.attachments.items()) == 2


def test_a_document_is_read_off_the_window_thread(qtbot, window, tmp_path, monkeypatch):  # noqa: F811
    """A large PDF takes seconds to parse: the window keeps answering meanwhile (typing, a
    notice that it is being read), Send waits for it, and its chip comes when it is read."""
    import app.widgets.attachments.attachments as attachments

    chat, release, seen = window.chat, threading.Event(), {}
    real = attachments.read_document

    def slow_read(path):
        seen["thread"] = threading.current_thread()
        release.wait(timeout=5)  # the parse of a large file; read on the window's thread, this froze it
        return real(path)

    monkeypatch.setattr(attachments, "read_document", slow_read)
    notices: list[str] = []
    chat.message.connect(notices.append)
    chat.attach_files([str(WRITERS["pdf"](tmp_path / "big.pdf"))])
    qtbot.waitUntil(lambda: "thread" in seen, timeout=60000)
    assert seen["thread"] is not threading.main_thread(), "read on a worker thread"
    assert not release.is_set() and chat.reading
    assert not chat.reading_label.isHidden() and chat.reading_label.text() == "Reading big.pdf…"
    qtbot.keyClicks(chat.prompt, "what")
    assert chat.prompt.toPlainText() == "what", "the window takes keys while the file is read"
    chat.send()
    assert chat.conversation_id is None and chat.worker is None, "Send waits for the file"
    assert notices[-1].startswith("Reading big.pdf…")
    release.set()
    read(qtbot, chat)
    assert [a.name for a in chat.attachments.items()] == ["big.pdf"] and FACT in chat.attachments.items()[0].text
    assert chat.reading_label.isHidden() and not window.errors


def test_a_model_closed_while_a_document_is_counted_waits_for_the_count(qtbot, window, tmp_path):  # noqa: F811
    """The worker counts with the loaded model's tokenizer: closing that model (another pair
    loaded, Unload) mid-count would free it under the worker. The close waits for the count,
    and a count after it is an estimate that the next model recounts."""
    chat, started, release, done = window.chat, threading.Event(), threading.Event(), []
    real = chat.counter.count

    def slow_count(text):
        started.set()
        release.wait(timeout=5)  # a large document being tokenized
        n = real(text)
        done.append(n)
        return n

    chat.counter.count = slow_count
    chat.attach_files([str(WRITERS["pdf"](tmp_path / "notes.pdf"))])
    qtbot.waitUntil(started.is_set, timeout=60000)
    threading.Timer(0.3, release.set).start()
    window.session.engineClosing.emit(window.session.engine)  # what the session says just before close()
    assert done, "the close waited for the count in flight"
    chat.counter.count = real
    read(qtbot, chat)
    assert [a.name for a in chat.attachments.items()] == ["notes.pdf"]


def when_picker_opens(chat, act) -> None:
    """Run `act` once the section picker is open (its exec() runs its own event loop, where
    timers still fire)."""
    timer = QTimer(chat)

    def poll() -> None:
        picker = getattr(chat, "section_picker", None)
        if picker is not None and picker.isVisible():
            timer.stop()
            timer.deleteLater()
            act()

    timer.timeout.connect(poll)
    timer.start(20)


def _big_pdf(tmp_path: Path) -> Path:
    return text_pdf(tmp_path / "big.pdf", [f"page {i} " + WORDS * 4 for i in range(1, 7)])


def test_a_document_larger_than_the_context_offers_its_pages(qtbot, tmp_path, monkeypatch, tiny_target):
    w = _make_window(qtbot, tmp_path, monkeypatch)
    _load(qtbot, w, tiny_target, "lookup", n_ctx=256)
    chat = w.chat
    f = _big_pdf(tmp_path)
    seen = {}

    def choose() -> None:
        picker = chat.section_picker
        seen["rows"] = [picker.list.item(r).text() for r in range(picker.list.count())]
        seen["ok_at_first"] = picker.attach_btn.isEnabled()
        picker.set_checked(list(range(6)))
        seen["ok_all"] = picker.attach_btn.isEnabled()
        picker.set_checked([0, 2])
        picker.accept()

    when_picker_opens(chat, choose)
    attach(qtbot, chat, f)
    assert not w.errors
    assert len(seen["rows"]) == 6 and seen["rows"][0].startswith("Page 1 · ") and seen["rows"][0].endswith(" tokens")
    assert seen["ok_at_first"] and not seen["ok_all"], "Attach only while the choice fits"
    [a] = chat.attachments.items()
    pages = read_document(f).sections
    assert a.name == "big.pdf (pages 1, 3)" and a.text == pages[0].text + "\n\n" + pages[2].text
    chat.attachments.clear()
    when_picker_opens(chat, lambda: chat.section_picker.reject())
    attach(qtbot, chat, f)
    assert not chat.attachments.items() and not w.errors, "cancelled: nothing attached, no error"
    w.close()


def _conversation(window, status: str = "stopped"):  # noqa: F811
    h = window.history
    c = h.create(title="Quarterly sales: what changed, and why does the North lead?")
    h.add_message(c.id, "user", "Summarise the sales")
    h.add_message(c.id, "assistant", ANSWER, stats=STATS, status=status)
    window.chat.open_conversation(c.id)
    return c


CHROME = ("Assistant", "stopped by you", "tok/s", "acceptance", "Copy")


def test_the_answer_exports_to_docx_with_its_headings_and_table(qtbot, window, tmp_path):  # noqa: F811
    import docx

    _conversation(window)
    path = tmp_path / "answer.docx"
    window.chat.export_answer(str(path))
    d = docx.Document(str(path))
    heads = [(p.style.name, p.text) for p in d.paragraphs if p.style.name.startswith("Heading")]
    assert heads == [("Heading 1", "Findings"), ("Heading 2", "Sales by region")], "levels kept, not demoted"
    [table] = d.tables
    assert [[c.text for c in r.cells] for r in table.rows] == [["Region", "Sales"], ["North", "42"], ["South", "17"]]
    body = "\n".join(p.text for p in d.paragraphs)
    assert "total = 42 + 17" in body and "The data shows three regions." in body
    code = next(p for p in d.paragraphs if p.text == "total = 42 + 17")
    assert code.runs[0].font.name == "Courier New"
    assert [p.style.name for p in d.paragraphs if "point" in p.text] == ["List Bullet", "List Bullet"]
    assert not any(word in body for word in CHROME)


def test_the_answer_exports_to_pdf_html_and_markdown_without_chrome(qtbot, window, tmp_path):  # noqa: F811
    from pypdf import PdfReader

    _conversation(window)
    window.chat.export_answer(str(tmp_path / "a.pdf"))
    text = " ".join(" ".join(p.extract_text() for p in PdfReader(str(tmp_path / "a.pdf")).pages).split())
    for needed in ("Findings", "Sales by region", "Region", "North", "42", "total = 42 + 17"):
        assert needed in text, needed
    assert not any(word in text for word in CHROME)
    window.chat.export_answer(str(tmp_path / "a.html"))
    html = (tmp_path / "a.html").read_text(encoding="utf-8")
    assert "<h1" in html and "<h2" in html and "<table" in html and "Quarterly sales" in html
    assert not any(word in html for word in ("Assistant", "stopped by you", "tok/s"))
    window.chat.export_answer(str(tmp_path / "a.md"))
    assert (tmp_path / "a.md").read_text(encoding="utf-8") == ANSWER


def test_the_conversation_exports_as_a_report(qtbot, window, tmp_path):  # noqa: F811
    import docx

    _conversation(window)
    window.chat.export_conversation(str(tmp_path / "c.docx"))
    d = docx.Document(str(tmp_path / "c.docx"))
    heads = [p.text for p in d.paragraphs if p.style.name.startswith("Heading")]
    assert heads[0].startswith("Quarterly sales") and "Findings" in heads
    assert any(p.text == "Summarise the sales" and p.style.name == "Quote" for p in d.paragraphs)
    assert not any(word in p.text for p in d.paragraphs for word in CHROME) and len(d.tables) == 1


def test_export_offers_formats_and_a_name_of_whole_words(qtbot, window, tmp_path, monkeypatch):  # noqa: F811
    from PySide6.QtWidgets import QFileDialog

    from app.widgets.transcript.export import file_name

    _conversation(window)
    offered = []
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        lambda *a, **k: offered.append(a) or (str(tmp_path / "out"), "Word document (*.docx)"))
    window.chat.export_btn.menu().actions()[1].trigger()
    assert offered[0][2] == "Quarterly sales- what changed, and why does the North lead- - answer.md"
    assert "*.docx" in offered[0][3] and "*.pdf" in offered[0][3] and "*.html" in offered[0][3]
    assert (tmp_path / "out.docx").is_file(), "the chosen format's suffix is added"
    long = "word " * 100
    assert file_name(long, ".pdf") == ("word " * 40).strip() + ".pdf"
    assert file_name("a/b: c?", ".md") == "a-b- c-.md"


def test_copy_answer_puts_rich_text_and_plain_text(qtbot, window):  # noqa: F811
    _conversation(window)
    window.chat.copy_last_answer()
    mime = QGuiApplication.clipboard().mimeData()
    assert mime.hasHtml() and "<table" in mime.html() and "<h1" in mime.html()
    assert "Findings" in mime.text() and "# Findings" not in mime.text() and "Assistant" not in mime.text()


def test_screenshot_of_the_chips_and_the_export_menu(qtbot, window, tmp_path):  # noqa: F811
    out = Path(os.environ.get("TANDEM_SHOTS") or tmp_path)
    chat = window.chat
    window.resize(1024, 700)
    window.show()
    _conversation(window, "complete")
    attach(qtbot, chat, *(WRITERS[kind](tmp_path / f"report.{kind}") for kind in ("pdf", "docx", "xlsx")))
    qtbot.waitUntil(lambda: all(c.isVisible() for c in chat.attachments.chips), timeout=60000)
    chat.meter.update_now()
    qtbot.wait(50)  # the posted layout requests run: the picture shows the settled row
    row = chat.attachments.chips
    assert all(chat.attachments.rect().contains(c.geometry()) for c in row), "every chip whole, wrapped"
    assert chat.answer_column.grab().save(str(out / "attach_chips.png"))
    menu = chat.export_btn.menu()
    menu.popup(chat.export_btn.mapToGlobal(chat.export_btn.rect().bottomLeft()))
    qtbot.waitUntil(menu.isVisible, timeout=60000)
    assert menu.grab().save(str(out / "export_menu.png"))
    assert [a.text() for a in menu.actions() if a.text()][:2] == [
        "Whole conversation (Markdown, Word, PDF, HTML, JSON)…", "Last answer (Markdown, Word, PDF, HTML)…"]
    menu.hide()


def test_a_long_first_line_titles_the_chat_in_whole_words(qtbot, window):  # noqa: F811
    from test_gui_chat import _send

    from app.widgets.transcript.export import whole_words

    assert whole_words("alpha beta gamma", 12) == "alpha beta" and whole_words("x" * 20, 5) == "xxxxx"
    line = "Please compare the quarterly figures " * 4  # 148 characters: the title holds 120
    _send(qtbot, window, line.strip(), max_tokens=2)
    title = window.history.get(window.chat.conversation_id).title
    assert len(title) <= 120 and line.startswith(title) and line[len(title)] == " ", title
