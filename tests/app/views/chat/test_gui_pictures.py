"""Pictures in the chat (#49 item 2, the app): a model that sees is loaded with the projector
beside it and says so; attach, paste and drop make picture chips with thumbnails, checked at
attach time (a text-only model, the bounds: one line each); a sent picture reaches the engine
and the answer is the engine's own; history keeps it (reopen, Regenerate, Edit), and it does
not follow the user into another chat."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")
pytest.importorskip("PIL")

from PySide6.QtCore import QMimeData, QUrl, Qt  # noqa: E402
from PySide6.QtGui import QGuiApplication, QImage, QTextDocument  # noqa: E402
from PySide6.QtWidgets import QFileDialog  # noqa: E402

from engine.documents.images import MEDIA_MARKER, ImageInput  # noqa: E402
from image_files import png_bytes  # noqa: E402
from test_gui_chat_input import _drop, _files_mime, _load, _make_window  # noqa: E402

PICTURE = png_bytes(32, 32, seed=3)
SETTINGS = {"drafter": "mtp", "lookahead": 3, "temperature": 0.0, "max_tokens": 16, "system": ""}


@pytest.fixture
def seeing(qtbot, tmp_path, monkeypatch, tiny_vision):
    w = _make_window(qtbot, tmp_path, monkeypatch)
    _load(qtbot, w, tiny_vision[0], "mtp", n_ctx=512)
    yield w
    w.close()


def _picture(tmp_path: Path, name: str = "chart.png", data: bytes = PICTURE) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def _send(qtbot, w, text: str) -> None:
    chat = w.chat
    chat.apply_settings(SETTINGS)
    chat.prompt.setPlainText(text)
    chat.send()
    qtbot.waitUntil(lambda: chat.worker is None, timeout=60000)


def _thumbnail(chat, sha: str) -> object:
    return chat.transcript.document().resource(QTextDocument.ResourceType.ImageResource, QUrl(f"tandem:picture/{sha}"))


def test_a_model_that_sees_is_loaded_with_its_projector_and_marked(seeing, tiny_vision):
    assert seeing.session.sees_images and seeing.session.projector_name == tiny_vision[1].name
    mark = seeing.chat.model_bar.vision
    assert not mark.isHidden() and mark.text() == "sees images" and tiny_vision[1].name in mark.toolTip()


def test_attach_paste_and_drop_make_picture_chips_and_remove_takes_one_away(qtbot, seeing, tmp_path, monkeypatch):
    chat = seeing.chat
    attached = _picture(tmp_path)
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", lambda *a, **k: ([str(attached)], ""))
    qtbot.mouseClick(chat.attach_btn, Qt.MouseButton.LeftButton)
    image = QImage(40, 30, QImage.Format.Format_RGB32)
    image.fill(Qt.GlobalColor.darkCyan)
    QGuiApplication.clipboard().setImage(image)  # a screenshot on the clipboard: pixels, no file
    chat.prompt.setFocus()
    qtbot.keyClick(chat.prompt, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    dragged = QMimeData()  # a picture dragged out of a browser: its bytes, no local file
    dragged.setData("image/jpeg", png_bytes(24, 16, seed=5, fmt="JPEG"))
    _drop(chat.transcript.viewport(), dragged)
    _drop(chat.prompt.viewport(), _files_mime(_picture(tmp_path, "photo.webp", png_bytes(20, 20, seed=7, fmt="WEBP"))))
    assert not seeing.errors and chat.prompt.toPlainText() == ""
    images = chat.attachments.images()
    assert [(im.name, im.format, im.width, im.height) for im in images] == [
        ("chart.png", "PNG", 32, 32), ("pasted image.png", "PNG", 40, 30), ("pasted image.jpg", "JPEG", 24, 16),
        ("photo.webp", "WEBP", 20, 20)]
    chips = chat.attachments.image_chips
    assert chips[0].text() == "chart.png · 32 × 32" and "PNG picture, 32 × 32 pixels, " in chips[0].toolTip()
    assert all(not c.thumb.pixmap().isNull() for c in chips), "each chip shows its thumbnail"
    qtbot.mouseClick(chips[1].remove_btn, Qt.MouseButton.LeftButton)
    assert [im.name for im in chat.attachments.images()] == ["chart.png", "pasted image.jpg", "photo.webp"]


def test_pictures_out_of_bounds_are_refused_at_attach_time_in_one_line_each(qtbot, seeing, tmp_path):
    import struct
    import zlib

    chat = seeing.chat
    gif = _picture(tmp_path, "anim.gif", png_bytes(8, 8, fmt="GIF"))
    big = tmp_path / "huge.png"
    with open(big, "wb") as f:  # over 20 MB: refused by its size, before it is read
        f.write(PICTURE)
        f.truncate(22 * 1000 * 1000)
    ihdr = struct.pack(">IIBBBBB", 8000, 8000, 8, 2, 0, 0, 0)  # 64 megapixels claimed by a small file

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    bomb = _picture(tmp_path, "bomb.png", b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
                    + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))
    chat.attach_files([str(gif), str(big), str(bomb)])
    assert chat.attachments.images() == []
    assert len(seeing.errors) == 1
    assert seeing.errors[0].split("\n") == [
        "anim.gif is a GIF file; send PNG, JPEG or WebP", "huge.png is 22.0 MB; images are limited to 21 MB",
        "bomb.png is 8000 x 8000 pixels; images are limited to 50 megapixels"]


def test_a_text_only_model_refuses_a_picture_when_it_is_attached(qtbot, tmp_path, monkeypatch, tiny_target):
    w = _make_window(qtbot, tmp_path, monkeypatch)
    _load(qtbot, w, tiny_target, "lookup", n_ctx=512)
    assert not w.session.sees_images and w.chat.model_bar.vision.isHidden()
    w.chat.attach_files([str(_picture(tmp_path))])
    QGuiApplication.clipboard().setImage(QImage(8, 8, QImage.Format.Format_RGB32))
    w.chat.prompt.insertFromMimeData(QGuiApplication.clipboard().mimeData())
    assert w.chat.attachments.images() == []
    line = "tiny reads text only: pictures need a model that sees (one with its mmproj-*.gguf projector beside it); " \
           "load one to send pictures"
    assert w.errors == [line, line] and w.chat.prompt.toPlainText() == ""
    w.close()


def _spy(monkeypatch) -> list:
    """The requests the chat hands its generation workers."""
    from app import workers

    sent: list = []
    real = workers.GenerationWorker.__init__
    monkeypatch.setattr(workers.GenerationWorker, "__init__",
                        lambda self, engine, request, **kw: (sent.append(request), real(self, engine, request, **kw))[1])
    return sent


def test_a_sent_picture_reaches_the_engine_and_the_answer_is_the_engines_own(qtbot, seeing, tmp_path, monkeypatch):
    chat, sent = seeing.chat, _spy(monkeypatch)
    chat.attach_files([str(_picture(tmp_path))])
    _send(qtbot, seeing, "the value of the data is")
    [request] = sent
    assert [im.data for im in request.images] == [PICTURE]
    assert request.prompt == [{"role": "user", "content": MEDIA_MARKER + "\nthe value of the data is"}]
    q, a = seeing.history.messages(chat.conversation_id)
    assert a.status == "complete" and a.content
    engine = seeing.session.engine
    own = engine.generate([{"role": "user", "content": "the value of the data is"}], chat=True,
                          images=[ImageInput(PICTURE)], max_tokens=16, draft_model="none")
    assert a.content == own.text, "the chat's answer is the engine's greedy answer with the picture"
    assert chat.attachments.images() == [] and chat.attachments.isHidden()
    sha = ImageInput(PICTURE).sha256
    assert q.content == "the value of the data is" and q.spans[0] == (0, f"image:{sha}/chart.png")
    assert isinstance(_thumbnail(chat, sha), QImage), "the question shows the picture as a thumbnail"
    chat.transcript._on_anchor(QUrl(f"msg:picture:{sha}"))  # the thumbnail clicked: the picture whole
    viewer = chat.transcript.file_view
    assert viewer.windowTitle() == "chart.png" and viewer.label.pixmap().size().toTuple() == (32, 32)
    viewer.close()


def test_history_keeps_the_picture_for_reopen_regenerate_and_edit(qtbot, seeing, tmp_path, monkeypatch):
    chat = seeing.chat
    chat.attach_files([str(_picture(tmp_path))])
    _send(qtbot, seeing, "the value of")
    cid, first = chat.conversation_id, seeing.history.messages(chat.conversation_id)[1].content
    sha = ImageInput(PICTURE).sha256
    chat.new_conversation()
    chat.open_conversation(cid)  # reopened: the thumbnail comes from the history
    assert isinstance(_thumbnail(chat, sha), QImage)
    sent = _spy(monkeypatch)
    answer = seeing.history.messages(cid)[1]
    chat.asking.regenerate(answer.id)
    qtbot.waitUntil(lambda: chat.worker is None, timeout=60000)
    assert [im.data for im in sent[-1].images] == [PICTURE], "Regenerate sends the same picture again"
    assert seeing.history.messages(cid)[1].content == first, "greedy: the same answer"
    question = seeing.history.messages(cid)[0]
    chat.asking.edit_message(question.id)
    assert [im.sha256 for im in chat.attachments.images()] == [sha], "Edit puts the picture back as a chip"
    chat.prompt.setPlainText("the data of")
    chat.send()
    qtbot.waitUntil(lambda: chat.worker is None, timeout=60000)
    assert [im.data for im in sent[-1].images] == [PICTURE]
    assert sent[-1].prompt[-1]["content"] == MEDIA_MARKER + "\nthe data of"


def test_an_attached_picture_stays_with_its_chat(qtbot, seeing, tmp_path):
    chat = seeing.chat
    _send(qtbot, seeing, "the value of")
    first = chat.conversation_id
    chat.attach_files([str(_picture(tmp_path))])
    chat.new_conversation()
    assert chat.attachments.images() == [], "the picture does not follow the user into another chat"
    chat.open_conversation(first)
    assert [im.name for im in chat.attachments.images()] == ["chart.png"], "it waits in the chat it was added in"


def test_continue_after_a_picture_reads_it_again(qtbot, seeing, tmp_path, monkeypatch):
    from engine.documents.images import IMAGE_SLOT

    chat, sent = seeing.chat, _spy(monkeypatch)
    chat.attach_files([str(_picture(tmp_path))])
    chat.apply_settings({**SETTINGS, "max_tokens": 4})
    chat.prompt.setPlainText("the value of")
    chat.send()
    qtbot.waitUntil(lambda: chat.worker is None, timeout=60000)
    answer = seeing.history.messages(chat.conversation_id)[1]
    assert answer.stats["finish_reason"] == "length", "stopped by Max tokens: Continue writes more"
    chat.asking.continue_answer(answer.id)
    qtbot.waitUntil(lambda: chat.worker is None, timeout=60000)
    assert sent[-1].prompt.count(IMAGE_SLOT) == 1 and [im.data for im in sent[-1].images] == [PICTURE]
    longer = seeing.history.messages(chat.conversation_id)[1]
    assert longer.content.startswith(answer.content) and len(longer.content) > len(answer.content)
    assert not seeing.errors


def test_a_projector_llama_cpp_refuses_leaves_the_model_text_only_and_says_why(qtbot, tmp_path, monkeypatch,
                                                                             tiny_target):
    import shutil

    folder = tmp_path / "models"
    folder.mkdir()
    target = Path(shutil.copy(tiny_target, folder / "tiny.gguf"))
    (folder / "mmproj-tiny.gguf").write_bytes(b"GGUF" + b"\0" * 60)  # a projector file, damaged
    w = _make_window(qtbot, tmp_path, monkeypatch)
    _load(qtbot, w, target, "lookup", n_ctx=512)
    assert not w.session.sees_images and not w.errors, "the model loads, text only"
    mark = w.chat.model_bar.vision
    assert mark.text() == "text only" and mark.toolTip().startswith("mmproj-tiny.gguf was not loaded (")
    assert mark.toolTip().endswith("): this model reads text only")
    w.close()


def test_pictures_count_in_the_meter_and_one_too_large_for_the_context_is_refused_before_it_is_stored(qtbot, seeing,
                                                                                                     tmp_path):
    chat = seeing.chat
    engine = seeing.session.engine
    chat.apply_settings(SETTINGS)
    chat.prompt.setPlainText("the value of")
    chat.meter.update_now()
    without = chat.composer.measure_prompt()[0]
    chat.attach_files([str(_picture(tmp_path))])
    [n] = engine.image_tokens([ImageInput(PICTURE)])
    assert chat.composer.measure_prompt()[0] == without + n, "the meter counts the picture's tokens with this model"
    large = png_bytes(200, 200, seed=4)  # more image tokens than the 512-token context holds
    chat.attachments.clear()
    chat.attach_files([str(_picture(tmp_path, "large.png", large))])
    assert engine.image_tokens([ImageInput(large)])[0] > 512
    chat.send()
    assert chat.conversation_id is None and seeing.history.conversations() == [], "nothing stored"
    assert len(seeing.errors) == 1 and "context holds 512" in seeing.errors[0] and "\n" not in seeing.errors[0]
    assert [im.name for im in chat.attachments.images()] == ["large.png"], "the chip stays"


def test_text_copied_with_a_picture_of_itself_pastes_as_text(qtbot, seeing):
    chat = seeing.chat
    cells = QMimeData()  # what a spreadsheet puts on the clipboard for copied cells
    cells.setText("North\t42\nSouth\t17")
    cells.setImageData(QImage(30, 20, QImage.Format.Format_RGB32))
    chat.prompt.insertFromMimeData(cells)
    assert chat.prompt.toPlainText() == "North\t42\nSouth\t17" and chat.attachments.images() == []


def test_a_picture_attached_before_a_text_only_model_is_loaded_is_refused_at_send(qtbot, tmp_path, monkeypatch,
                                                                                tiny_target):
    w = _make_window(qtbot, tmp_path, monkeypatch)
    w.chat.attach_files([str(_picture(tmp_path))])
    assert [im.name for im in w.chat.attachments.images()] == ["chart.png"], "no model yet: it attaches"
    _load(qtbot, w, tiny_target, "lookup", n_ctx=512)
    w.chat.prompt.setPlainText("the value of")
    w.chat.send()
    assert w.errors == ["tiny reads text only: pictures need a model that sees (one with its mmproj-*.gguf "
                        "projector beside it); load one to send pictures"]
    assert w.history.conversations() == [] and len(w.chat.attachments.images()) == 1, "nothing stored; the chip stays"
    w.close()


def test_a_scanned_pdf_attaches_as_its_pages_pictures_for_a_model_that_sees(qtbot, seeing, tmp_path, monkeypatch,
                                                                            tiny_target):
    """Its pages rendered on the reading worker, each a picture chip named after its page; the
    same file given to a text-only model is refused as a document without text."""
    from image_files import scanned_pdf_with_pictures

    scan = scanned_pdf_with_pictures(tmp_path / "scan.pdf", pages=2, width=40, height=60)
    seeing.chat.attach_files([str(scan)])
    qtbot.waitUntil(lambda: len(seeing.chat.attachments.images()) == 2, timeout=30000)
    assert [im.name for im in seeing.chat.attachments.images()] == ["scan.pdf, page 1", "scan.pdf, page 2"]
    assert not seeing.errors and seeing.chat.attachments.items() == []

    w = _make_window(qtbot, tmp_path / "other", monkeypatch)
    _load(qtbot, w, tiny_target, "lookup", n_ctx=512)
    w.chat.attach_files([str(scan)])
    qtbot.waitUntil(lambda: bool(w.errors), timeout=30000)
    assert w.errors[0].startswith("scan.pdf: no text layer") and w.chat.attachments.images() == []
    w.close()
