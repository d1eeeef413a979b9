"""A chat export checked field by field before any of it is written (archive.py): every value
that goes into the database has the type the history reads back, so an imported chat opens,
switches versions and exports again like one written here. The first field that is wrong is
one line naming the chat, the message and the field; optional fields an earlier or hand-made
file lacks get the values a new chat has."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from typing import Any, Callable

MAX_BYTES = 2 * 2**30  # a chat export larger than this is refused before it is read
ROLES = ("user", "assistant", "system")


class ArchiveError(ValueError):
    """A file that cannot be imported; one line for the user."""


class _Where:
    """Where in the file a check is: "chat 3 (“Budget”), message 2"."""

    def __init__(self, name: str, *parts: str) -> None:
        self.name, self.parts = name, parts

    def at(self, part: str) -> "_Where":
        return _Where(self.name, *self.parts, part)

    def fail(self, field: str, what: str) -> ArchiveError:
        return ArchiveError(f"{self.name}: {', '.join(self.parts)}: \"{field}\" {what}")


def _text(obj: dict, key: str, where: _Where, default: str | None = None) -> str:
    value = obj.get(key, default)
    if not isinstance(value, str):
        raise where.fail(key, "is missing" if key not in obj else "is not text")
    return value


def _number(obj: dict, key: str, where: _Where, default: float | None = None) -> float:
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise where.fail(key, "is missing" if key not in obj else "is not a number")
    return float(value)


def _count(obj: dict, key: str, where: _Where, default: int | None = None) -> int:
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise where.fail(key, "is missing" if key not in obj else "is not a whole number from 1")
    return value


def _spans(obj: dict, key: str, where: _Where) -> list[list]:
    value = obj.get(key) or []
    if not isinstance(value, list) or not all(
            isinstance(s, list) and len(s) == 2 and isinstance(s[0], int) and not isinstance(s[0], bool)
            and isinstance(s[1], str) for s in value):
        raise where.fail(key, "is not a list of [characters, label] pairs")
    return value


def _object(obj: dict, key: str, where: _Where) -> dict | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, dict):
        raise where.fail(key, "is not an object")
    return value


def _list(obj: dict, key: str, where: _Where) -> list:
    value = obj.get(key, [])
    if not isinstance(value, list):
        raise where.fail(key, "is not a list")
    return value


def _each(items: list, where: _Where, label: str, check: Callable[[Any, _Where], dict]) -> list[dict]:
    out = []
    for i, item in enumerate(items, 1):
        here = where.at(f"{label} {i}")
        if not isinstance(item, dict):
            raise ArchiveError(f"{here.name}: {', '.join(here.parts)} is not an object")
        out.append(check(item, here))
    numbers = [o["n"] for o in out if "n" in o]
    if len(set(numbers)) != len(numbers):
        raise where.fail(label + "s", "number the same version twice")
    return out


def _status(obj: dict, where: _Where) -> str:
    return _text(obj, "status", where, "complete")


def _answer_version(v: dict, where: _Where) -> dict:
    return {"n": _count(v, "n", where), "content": _text(v, "content", where), "stats": _object(v, "stats", where),
            "spans": _spans(v, "spans", where), "status": _status(v, where), "created": _number(v, "created", where)}


def _stored_json(value: Any, where: _Where, key: str) -> str | None:
    """A tail keeps stats and spans as the database holds them: JSON text, or null."""
    if value is not None and not isinstance(value, str):
        raise where.fail(key, "is not JSON text or null")
    return value


def _stored_answer(v: dict, where: _Where) -> dict:
    return {"n": _count(v, "n", where), "content": _text(v, "content", where),
            "stats": _stored_json(v.get("stats"), where, "stats"), "spans": _stored_json(v.get("spans"), where, "spans"),
            "status": _status(v, where), "created": _number(v, "created", where)}


def _stored_question(v: dict, where: _Where) -> dict:
    try:
        nested = _tail(json.loads(_text(v, "tail", where)), where.at("an earlier branch"))
    except ValueError as e:
        if isinstance(e, ArchiveError):
            raise
        raise where.fail("tail", "is not JSON text") from None
    return {"n": _count(v, "n", where), "content": _text(v, "content", where),
            "spans": _stored_json(v.get("spans"), where, "spans"), "tail": json.dumps(nested),
            "created": _number(v, "created", where)}


def _snapshot(s: dict, where: _Where) -> dict:
    """A message of a branch's tail as branches.py keeps it (its stats, spans and nested
    tails as JSON text): checked, and returned as it is."""
    m = s.get("message")
    if not isinstance(m, dict):
        raise where.fail("message", "is not an object")
    here = where.at("its message")
    if _text(m, "role", here) not in ROLES:
        raise here.fail("role", f"is not one of {', '.join(ROLES)}")
    message = {"role": m["role"], "content": _text(m, "content", here),
               "stats": _stored_json(m.get("stats"), here, "stats"), "spans": _stored_json(m.get("spans"), here, "spans"),
               "status": _status(m, here), "created": _number(m, "created", here), "version": _count(m, "version", here, 1)}
    return {"message": message, "answers": _each(_list(s, "answers", where), where, "answer", _stored_answer),
            "questions": _each(_list(s, "questions", where), where, "question", _stored_question)}


def _tail(value: Any, where: _Where) -> list:
    if not isinstance(value, list):
        raise where.fail("tail", "is not a list")
    return _each(value, where, "message", _snapshot)


def _question_version(v: dict, where: _Where) -> dict:
    return {"n": _count(v, "n", where), "content": _text(v, "content", where), "spans": _spans(v, "spans", where),
            "tail": _tail(v.get("tail", []), where), "created": _number(v, "created", where)}


def _message(m: dict, where: _Where) -> dict:
    role = _text(m, "role", where)
    if role not in ROLES:
        raise where.fail("role", f"is not one of {', '.join(ROLES)}")
    return {"role": role, "content": _text(m, "content", where), "stats": _object(m, "stats", where),
            "spans": _spans(m, "spans", where), "status": _status(m, where), "created": _number(m, "created", where),
            "version": _count(m, "version", where, 1),
            "answer_versions": _each(_list(m, "answer_versions", where), where, "answer version", _answer_version),
            "question_versions": _each(_list(m, "question_versions", where), where, "question version",
                                       _question_version)}


def _conversation(c: dict, where: _Where) -> dict:
    title = c.get("title")
    where = _Where(where.name, f"{where.parts[0]} (“{title[:40]}”)" if isinstance(title, str) else where.parts[0])
    created = _number(c, "created", where)
    pinned = c.get("pinned", False)
    if not isinstance(pinned, bool):
        raise where.fail("pinned", "is not true or false")
    return {"title": _text(c, "title", where).strip() or "Untitled", "system_prompt": _text(c, "system_prompt", where, ""),
            "created": created, "updated": _number(c, "updated", where, created), "pinned": pinned,
            "folder": " ".join(_text(c, "folder", where, "").split()), "settings": _object(c, "settings", where),
            "messages": _each(_list(c, "messages", where), where, "message", _message),
            "images": [_image(i, where.at(f"image {n}")) for n, i in enumerate(_list(c, "images", where), 1)]}


def _image(i: Any, where: _Where) -> tuple[str, bytes]:
    """(sha256, bytes) of a chat's picture, once its base64, digest, size, format and pixels
    are what a picture sent from the chat may be (engine/documents/images.py's bounds)."""
    from engine.documents.images import MAX_IMAGE_BYTES, ImageError, ImageInput, image_size

    if not isinstance(i, dict):
        raise ArchiveError(f"{where.name}: {', '.join(where.parts)} is not an object")
    sha, data = _text(i, "sha256", where), _text(i, "data", where)
    if not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise where.fail("sha256", "is not a sha256 digest (64 lowercase hex digits)")
    if len(data) // 4 * 3 > MAX_IMAGE_BYTES:
        raise where.fail("data", f"is over {MAX_IMAGE_BYTES / 1e6:.0f} MB; pictures are limited to that")
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        raise where.fail("data", "is not base64") from None
    if hashlib.sha256(raw).hexdigest() != sha:
        raise where.fail("data", "does not have the digest its \"sha256\" names")
    try:
        image_size(ImageInput(raw, sha, "the picture"))
    except ImageError as e:
        raise where.fail("data", f"is refused: {e}") from None
    return sha, raw


def checked_conversations(value: Any, name: str) -> list[dict]:
    """The archive's "conversations", each checked and with its defaults filled in."""
    if not isinstance(value, list):
        raise ArchiveError(f"{name}: its \"conversations\" is not a list")
    try:
        return _each(value, _Where(name), "chat", _conversation)
    except RecursionError:
        raise ArchiveError(f"{name}: a chat's branches are nested too deeply to import") from None
