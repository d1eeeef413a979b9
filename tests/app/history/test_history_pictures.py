"""Pictures in the history (#49): a question names its pictures in its spans and their bytes
are kept once by sha256; a database of the release before gains the table; the last message
naming a picture takes it with it; archives carry pictures as base64 with their digest,
checked on import within the bounds a picture sent from the chat has; Markdown names them."""

from __future__ import annotations

import base64
import json
import sqlite3

import pytest

pytest.importorskip("PIL")

from app.history import History  # noqa: E402
from app.history.archive import export_chats, import_chats, read_archive, write_archive  # noqa: E402
from app.history.archive_check import ArchiveError  # noqa: E402
from app.history.branches import edit_question  # noqa: E402
from app.history.pictures import image_bytes, image_refs, image_span, keep_images  # noqa: E402
from app.history.repair import copy_conversations  # noqa: E402
from engine.documents.images import ImageInput  # noqa: E402
from history_schemas import V2_SCHEMA  # noqa: E402
from image_files import png_bytes  # noqa: E402

PICTURE = png_bytes(16, 12, seed=1)
SHA = ImageInput(PICTURE).sha256


def _chat_with_picture(h: History, title: str = "Chart", text: str = "what does it show?") -> int:
    c = h.create(title)
    keep_images(h, [(SHA, PICTURE)])
    h.add_message(c.id, "user", text, spans=[image_span(SHA, "chart.png"), (len(text), "text")])
    h.add_message(c.id, "assistant", "a chart")
    return c.id


def _count(h: History) -> int:
    with h._lock:
        return int(h._db.execute("SELECT COUNT(*) FROM images").fetchone()[0])


def test_a_picture_is_named_in_the_spans_and_kept_once_until_no_message_names_it(tmp_path):
    h = History(tmp_path / "h.db")
    first, second = _chat_with_picture(h), _chat_with_picture(h, "Again")
    q = h.messages(first)[0]
    assert image_refs(q.spans) == [(SHA, "chart.png")] and image_bytes(h, SHA) == PICTURE
    assert _count(h) == 1, "the same picture in two chats is stored once"
    h.delete(first)
    assert image_bytes(h, SHA) == PICTURE, "the other chat still names it"
    edit_question(h, h.messages(second)[0].id, "plain words", [(11, "text")])
    assert image_bytes(h, SHA) == PICTURE, "the question's earlier version keeps it"
    h.delete(second)
    assert _count(h) == 0, "a deleted chat's picture does not stay behind in the file"


def test_a_database_of_the_release_before_gains_the_pictures_table(tmp_path):
    path = tmp_path / "history.db"
    with sqlite3.connect(path) as db:
        db.executescript(V2_SCHEMA)
        db.execute("INSERT INTO conversations VALUES (1, 'Old chat', '', 10.0, 20.0)")
        db.execute("INSERT INTO messages VALUES (1, 1, 'user', 'hello', NULL, '[]', 'complete', 11.0, 1)")
    db.close()
    h = History(path)
    assert h.notice is None and [m.content for m in h.messages(1)] == ["hello"]
    keep_images(h, [(SHA, PICTURE)])
    assert image_bytes(h, SHA) == PICTURE
    h.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 4
    db.close()


def test_a_salvaged_database_keeps_its_pictures(tmp_path):
    old = History(tmp_path / "old.db")
    _chat_with_picture(old)
    fresh = History(tmp_path / "new.db")
    assert copy_conversations(old._db, fresh._db) == (1, 1)
    assert image_bytes(fresh, SHA) == PICTURE


def test_an_archive_carries_the_picture_as_base64_with_its_digest_and_brings_it_back(tmp_path):
    h = History(tmp_path / "h.db")
    _chat_with_picture(h)
    write_archive(h, tmp_path / "chats.json")
    [chat] = json.loads((tmp_path / "chats.json").read_text())["conversations"]
    assert chat["images"] == [{"sha256": SHA, "type": "image/png", "bytes": len(PICTURE),
                               "data": base64.b64encode(PICTURE).decode()}]
    fresh = History(tmp_path / "fresh.db")
    assert import_chats(fresh, read_archive(tmp_path / "chats.json")).added == 1
    [c] = fresh.conversations()
    assert image_refs(fresh.messages(c.id)[0].spans) == [(SHA, "chart.png")] and image_bytes(fresh, SHA) == PICTURE
    assert export_chats(fresh)["conversations"][0]["images"] == chat["images"]


def _hostile(tmp_path, image: dict) -> str:
    text = "what is it?"
    chat = {"title": "Hostile", "created": 1.0, "images": [image], "messages": [
        {"role": "user", "content": text, "created": 1.0, "spans": [list(image_span(SHA, "x.png")), [len(text), "text"]]}]}
    (tmp_path / "bad.json").write_text(json.dumps({"format": "tandem-chats", "version": 1, "conversations": [chat]}))
    h = History(tmp_path / "h.db")
    with pytest.raises(ArchiveError) as e:
        import_chats(h, read_archive(tmp_path / "bad.json"))
    assert h.conversations() == [] and _count(h) == 0, "nothing imported"
    assert "\n" not in str(e.value)
    return str(e.value)


def test_a_hostile_archive_picture_is_refused_in_one_line(tmp_path, monkeypatch):
    import engine.documents.images as images

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    gif = png_bytes(4, 4, fmt="GIF")
    assert _hostile(tmp_path, {"sha256": ImageInput(gif).sha256, "data": b64(gif)}) == (
        'bad.json: chat 1 (“Hostile”), image 1: "data" is refused: the picture is a GIF file; send PNG, JPEG or WebP')
    script = b"<script>alert(1)</script>"
    assert _hostile(tmp_path, {"sha256": ImageInput(script).sha256, "data": b64(script)}).endswith(
        '"data" is refused: the picture is not an image Tandem reads; send PNG, JPEG or WebP')
    assert _hostile(tmp_path, {"sha256": SHA, "data": b64(PICTURE[:-8] + b"tampered")}).endswith(
        '"data" does not have the digest its "sha256" names')
    assert _hostile(tmp_path, {"sha256": SHA, "data": "not base64!"}).endswith('"data" is not base64')
    assert _hostile(tmp_path, {"sha256": "../../etc/passwd", "data": b64(PICTURE)}).endswith(
        '"sha256" is not a sha256 digest (64 lowercase hex digits)')
    monkeypatch.setattr(images, "MAX_IMAGE_BYTES", 1_000_000)
    big = png_bytes(700, 700, seed=2)  # random pixels: about 1.5 MB
    assert _hostile(tmp_path, {"sha256": ImageInput(big).sha256, "data": b64(big)}).endswith(
        '"data" is over 1 MB; pictures are limited to that')


def test_markdown_names_each_picture_with_its_digest(tmp_path):
    from app.widgets.transcript.export import conversation_markdown

    h = History(tmp_path / "h.db")
    cid = _chat_with_picture(h)
    assert f"*Picture: chart.png (sha256 {SHA})*" in h.to_markdown(cid)
    report = conversation_markdown("Chart", h.messages(cid))
    assert f"> *Picture: chart.png (sha256 {SHA})*" in report and "base64" not in report
