"""Chats out to one JSON file and back in: a backup of every chat, a chat to take to another
computer, a profile moved.

The file holds each chat whole: title, system prompt, times, pin and folder, its own settings
as stored (whatever keys they hold: a setting added later travels without a change here), and
every message with its answer versions and its edited question's other branches (each with the
conversation that followed it). Stats and spans are written as JSON, not as the database's text.
`model` (the name of the model the chat last used) and a question's `attachments` (each attached
file's name and size) are there for a reader of the file; importing reads them from the settings
and the message itself. The pictures a chat's questions name travel in its `images`, each once:
digest, type, size and the bytes as base64; on import each is held to the bounds a picture sent
from the chat is (bytes, format, pixels) and to its digest, or the file is refused in one line.

Importing adds chats, never replaces one: every chat gets a new id in this profile (the file's
`id` is only its id where it was exported). A chat already here (same start time, same
messages) is skipped, so importing one backup twice adds nothing the second time; one that has
changed since (a question asked after the export) comes in as a second chat beside it. The file
is read and checked whole before anything is written, then written in one transaction: a bad
file (not JSON, another program's, a newer Tandem's, one field wrong) is one line
(`ArchiveError`) and the history is as it was.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from engine.documents.images import FORMATS, image_format

from .archive_check import MAX_BYTES, ArchiveError, checked_conversations
from .branches import _ANSWER_VERSION, _QUESTION_VERSION

FORMAT, VERSION = "tandem-chats", 1
FILE_PART = "file:"  # the label of an attached file's part in a question's spans (attachments.compose)
_PICTURE = re.compile(r"image:([0-9a-f]{64})/")  # a picture's part in a question's spans (pictures.py)


@dataclass(frozen=True)
class ChatsImported:
    """What an import did: chats added, chats skipped as already here."""

    added: int
    skipped: int

    def line(self) -> str:
        added = f"{self.added} chat{'' if self.added == 1 else 's'} imported"
        return added + (f"; {self.skipped} already here, skipped" if self.skipped else "")


def _json(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def _text(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def _message(db: sqlite3.Connection, r: sqlite3.Row) -> dict[str, Any]:
    spans = _json(r["spans"]) or []
    out = {"id": r["id"], "role": r["role"], "content": r["content"], "stats": _json(r["stats"]), "spans": spans,
           "status": r["status"], "created": r["created"], "version": int(r["version"] or 1)}
    if r["role"] == "user":
        out["attachments"] = [{"name": str(label)[len(FILE_PART):], "characters": n} for n, label in spans
                              if isinstance(label, str) and label.startswith(FILE_PART)]
    out["answer_versions"] = [
        {**dict(zip(_ANSWER_VERSION, tuple(v))), "stats": _json(v["stats"]), "spans": _json(v["spans"]) or []}
        for v in db.execute(f"SELECT {', '.join(_ANSWER_VERSION)} FROM answer_versions WHERE message_id=? ORDER BY n",
                            (r["id"],))]
    out["question_versions"] = [
        {**dict(zip(_QUESTION_VERSION, tuple(v))), "spans": _json(v["spans"]) or [], "tail": _json(v["tail"]) or []}
        for v in db.execute(f"SELECT {', '.join(_QUESTION_VERSION)} FROM question_versions WHERE message_id=? "
                            "ORDER BY n", (r["id"],))]
    return out


def _conversation(db: sqlite3.Connection, c: sqlite3.Row) -> dict[str, Any]:
    row = db.execute("SELECT settings FROM chat_settings WHERE conversation_id=?", (c["id"],)).fetchone()
    settings = _json(row[0]) if row else None
    model = settings.get("model") if isinstance(settings, dict) else None
    chat = {"id": c["id"], "title": c["title"], "system_prompt": c["system_prompt"], "created": c["created"],
            "updated": c["updated"], "pinned": bool(c["pinned"]), "folder": c["folder"] or "",
            "model": model.get("label") if isinstance(model, dict) else None,
            "settings": settings if isinstance(settings, dict) else None,
            "messages": [_message(db, m) for m in db.execute(
                "SELECT * FROM messages WHERE conversation_id=? ORDER BY id", (c["id"],))]}
    chat["images"] = _images(db, chat["messages"])
    return chat


def _images(db: sqlite3.Connection, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pictures the chat's questions name (in any version or branch), each once: its
    digest, type and size for a reader, and its bytes as base64 (checked again on import)."""
    out = []
    for sha in dict.fromkeys(_PICTURE.findall(json.dumps(messages))):
        row = db.execute("SELECT data FROM images WHERE sha256=?", (sha,)).fetchone()
        if row is not None:
            data = bytes(row[0])
            out.append({"sha256": sha, "type": FORMATS.get(image_format(data), ""), "bytes": len(data),
                        "data": base64.b64encode(data).decode("ascii")})
    return out


def export_chats(history: Any, ids: Iterable[int] | None = None) -> dict[str, Any]:
    """Every chat (or those of `ids`, in that order) as the archive's JSON object."""
    with history._lock:
        db = history._db
        if ids is None:
            rows = db.execute("SELECT * FROM conversations ORDER BY created, id").fetchall()
        else:
            found = [db.execute("SELECT * FROM conversations WHERE id=?", (i,)).fetchone() for i in ids]
            rows = [r for r in found if r is not None]
        chats = [_conversation(db, c) for c in rows]
    return {"format": FORMAT, "version": VERSION, "exported": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "conversations": chats}


def write_archive(history: Any, path: str | Path, ids: Iterable[int] | None = None) -> int:
    """Write the chats to `path` (through a temporary file beside it, so a failed write leaves
    an earlier file of that name whole); returns how many. OSError says what failed."""
    data = export_chats(history, ids)
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return len(data["conversations"])


def read_archive(path: str | Path) -> list[dict[str, Any]]:
    """The checked chats of the archive at `path`; `ArchiveError` (one line) when it is not one."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise ArchiveError(f"{path.name} is {size / 2**30:.1f} GiB, larger than a chat export can be "
                               f"({MAX_BYTES // 2**30} GiB)")
        raw = path.read_bytes()
    except OSError as e:
        raise ArchiveError(f"{path.name}: cannot read it ({e.strerror or e})") from None
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise ArchiveError(f"{path.name} is not a Tandem chat export: it is not text (UTF-8)") from None
    except ValueError as e:
        where = f" (line {e.lineno}, column {e.colno})" if isinstance(e, json.JSONDecodeError) else ""
        raise ArchiveError(f"{path.name} is not a Tandem chat export: it is not JSON{where}") from None
    except RecursionError:
        raise ArchiveError(f"{path.name} is not a Tandem chat export: its JSON is nested too deeply") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ArchiveError(f"{path.name} is not a Tandem chat export (it has no \"format\": \"{FORMAT}\")")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ArchiveError(f"{path.name}: its \"version\" is not a format version")
    if version > VERSION:
        raise ArchiveError(f"{path.name} was exported by a newer Tandem (format {version}; this one reads up to "
                           f"{VERSION}): update Tandem to import it")
    return checked_conversations(data.get("conversations"), path.name)


def _identity(created: float, messages: Iterable[tuple[str, str]]) -> str:
    """What makes a chat the same chat: when it started and what it says."""
    h = hashlib.sha256(repr(float(created)).encode())
    for role, content in messages:
        h.update(b"\0" + role.encode() + b"\0" + content.encode())
    return h.hexdigest()


def _present(db: sqlite3.Connection) -> set[str]:
    chats: dict[int, list[tuple[str, str]]] = {}
    created = {int(r[0]): float(r[1]) for r in db.execute("SELECT id, created FROM conversations")}
    for cid, role, content in db.execute("SELECT conversation_id, role, content FROM messages ORDER BY id"):
        chats.setdefault(int(cid), []).append((role, content))
    return {_identity(t, chats.get(cid, [])) for cid, t in created.items()}


def import_chats(history: Any, chats: list[dict[str, Any]]) -> ChatsImported:
    """Add checked chats (`read_archive`) to the history in one transaction; HistoryError when
    the write fails (then nothing was added)."""
    added = skipped = 0
    with history._write("the imported chats") as db:
        present = _present(db)
        for c in chats:
            key = _identity(c["created"], ((m["role"], m["content"]) for m in c["messages"]))
            if key in present:
                skipped += 1
                continue
            present.add(key)
            _insert(db, c)
            added += 1
    return ChatsImported(added, skipped)


def _insert(db: sqlite3.Connection, c: dict[str, Any]) -> None:
    cid = db.execute("INSERT INTO conversations(title, system_prompt, created, updated, pinned, folder) "
                     "VALUES (?,?,?,?,?,?)", (c["title"], c["system_prompt"], c["created"], c["updated"],
                                              int(c["pinned"]), c["folder"])).lastrowid
    db.executemany("INSERT OR IGNORE INTO images(sha256, data, created) VALUES (?,?,?)",
                   [(sha, sqlite3.Binary(data), time.time()) for sha, data in c["images"]])
    if c["settings"] is not None:
        db.execute("INSERT INTO chat_settings(conversation_id, settings) VALUES (?,?)", (cid, json.dumps(c["settings"])))
    for m in c["messages"]:
        mid = db.execute("INSERT INTO messages(conversation_id, role, content, stats, spans, status, created, version) "
                         "VALUES (?,?,?,?,?,?,?,?)", (cid, m["role"], m["content"], _text(m["stats"]),
                                                      json.dumps(m["spans"]), m["status"], m["created"],
                                                      m["version"])).lastrowid
        db.executemany("INSERT INTO answer_versions(message_id, n, content, stats, spans, status, created) "
                       "VALUES (?,?,?,?,?,?,?)", [(mid, v["n"], v["content"], _text(v["stats"]), json.dumps(v["spans"]),
                                                   v["status"], v["created"]) for v in m["answer_versions"]])
        db.executemany("INSERT INTO question_versions(message_id, n, content, spans, tail, created) VALUES (?,?,?,?,?,?)",
                       [(mid, v["n"], v["content"], json.dumps(v["spans"]), json.dumps(v["tail"]), v["created"])
                        for v in m["question_versions"]])
