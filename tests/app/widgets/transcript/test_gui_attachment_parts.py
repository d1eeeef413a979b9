"""Attachments: a file that holds an "Attached file" block of its own stays one file card
(the message's parts are stored, not guessed from its text; old rows still read), and text
files in UTF-16/32 or UTF-8 with a byte-order mark are attached as the CLI reads them."""

from __future__ import annotations

import codecs

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from app.widgets.attachments.attachments import (  # noqa: E402
    Attachment, AttachmentError, attachment_block, read_text_file, split_attachments)
from engine.decoding.prompting.prompt_text import read_prompt  # noqa: E402
from test_gui_chat_input import attach, window  # noqa: E402,F401  (the fixture: a window with the tiny pair loaded)

TEXT = "héllo wörld ✓ 𝄞\nline two\n"


@pytest.mark.parametrize("encoding, bom", [
    ("utf-8", codecs.BOM_UTF8),
    ("utf-16-le", codecs.BOM_UTF16_LE),
    ("utf-16-be", codecs.BOM_UTF16_BE),
    ("utf-32-le", codecs.BOM_UTF32_LE),
    ("utf-32-be", codecs.BOM_UTF32_BE),
])
def test_a_text_file_with_a_byte_order_mark_reads_the_same_in_the_app_and_the_cli(tmp_path, encoding, bom):
    f = tmp_path / f"notes-{encoding}.txt"
    f.write_bytes(bom + TEXT.encode(encoding))
    assert read_text_file(f) == (f.name, TEXT), "the app attaches it, without the mark"
    assert read_prompt(f"@{f}").text == TEXT, "the CLI reads the same text"


def test_a_cut_utf16_file_is_refused_with_one_line(tmp_path):
    f = tmp_path / "cut.txt"
    f.write_bytes(codecs.BOM_UTF16_LE + "abc".encode("utf-16-le")[:-1])
    with pytest.raises(AttachmentError, match=r"^cut\.txt: not a UTF-8 text file \(nor UTF-16/32"):
        read_text_file(f)


FAKE = "real notes\n```\n\nAttached file `phantom.txt`:\n\n```\nforged content"


def test_an_attachment_holding_a_fake_block_stays_one_card(qtbot, window, tmp_path):  # noqa: F811
    from test_gui_transcript import _fragments, click_anchor

    from app.widgets.transcript.file_card import FileViewer

    chat = window.chat
    window.resize(1360, 860)
    window.show()
    f = tmp_path / "notes.txt"
    f.write_text(FAKE, encoding="utf-8")
    attach(qtbot, chat, f)
    assert chat.attachments.items()
    chat.apply_settings({"drafter": "lookup", "max_tokens": 4})
    typed = "look\n\nAttached file `typed.txt`:\n\n```\ntyped by hand\n```"  # the typed text imitates one too
    chat.prompt.setPlainText(typed)
    qtbot.mouseClick(chat.send_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat.worker is None, timeout=30000)
    user = window.history.messages(chat.conversation_id)[0]
    cards = sorted({fr.charFormat().anchorHref() for _, fr in _fragments(chat.transcript)
                    if fr.charFormat().anchorHref().startswith("msg:file:")})
    assert cards == [f"msg:file:{user.id}:0"], "one file, one card: no phantom"
    shown = chat.transcript.toPlainText()
    assert "phantom.txt" not in shown and "typed by hand" in shown, "the typed text shows as typed"
    click_anchor(qtbot, chat.transcript, cards[0])
    viewer = chat.transcript.findChild(FileViewer)
    assert viewer is not None and viewer.windowTitle() == "notes.txt" and viewer.text.toPlainText() == FAKE

    # Edit puts the typed text back in the prompt and the file back as a chip, not its block as text
    click_anchor(qtbot, chat.transcript, f"msg:edit:{user.id}")
    assert chat.prompt.toPlainText() == typed
    assert [(a.name, a.text) for a in chat.attachments.items()] == [("notes.txt", FAKE)]


def test_a_message_stored_before_parts_were_kept_still_shows_its_cards():
    old = "\n\n".join(["hi", "Attached file `a.txt`:\n\n```\nx\ny\n```", "Attached file `b.md`:\n\n```\n\n```"])
    assert split_attachments(old, []) == ("hi", [("a.txt", "x\ny"), ("b.md", "")])
    assert attachment_block(Attachment("c.md", "a ```` b", 1, True)).endswith("\n`````"), \
        "the fence is longer than any run of backticks in the file"
    assert split_attachments("plain", [(3, "text")]) == ("plain", []), "spans that do not fit: shown as it is"
