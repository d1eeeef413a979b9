"""Chats you can keep: every chat out to one JSON file and back into a fresh profile whole
(versions, branches, settings, pins, folders), into a profile with chats beside them, a bad
file refused in one line with nothing changed; a database from the release before opens
with everything in it; pins order the list; search finds words with a snippet."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from app.history import History
from app.history.archive import export_chats, import_chats, read_archive, write_archive
from app.history.archive_check import ArchiveError
from app.history.branches import choose_question, edit_question
from app.history.editing import delete_shown, fork_at
from app.history.settings import chat_settings, save_chat_settings
from history_schemas import V2_SCHEMA

SETTINGS = {"drafter": "lookup", "lookahead": 8, "temperature": 0.7, "top_k": 40, "min_p": 0.05,  # keys a later
            "stop": ["###"], "model": {"label": "Qwen2.5 7B", "target": "/m/q.gguf", "n_ctx": 4096}}  # release adds too


def _profile(path: Path) -> History:
    """Two chats: one with an answer's versions, an edited question's branch, attachments, a
    pin, a folder and settings; one plain."""
    h = History(path)
    c = h.create("Budget review", system_prompt="Be brief.")
    q = h.add_message(c.id, "user", "What is the budget?\n\nAttached file `plan.txt`:\n\n```\n10k\n```",
                      spans=[(19, "text"), (2, "text"), (36, "file:plan.txt")])
    a = h.add_message(c.id, "assistant", "10k", stats={"generated_tokens": 3, "decode_tokens_per_s": 41.5},
                      spans=[(3, "draft")])
    h.new_version(a.id)
    h.update_message(a.id, "Ten thousand.", stats={"generated_tokens": 4}, spans=[(13, "target")], status="complete")
    edit_question(h, q.id, "Who leads the project?", [(22, "text")])
    h.add_message(c.id, "assistant", "Ann leads it.", status="stopped")
    save_chat_settings(h, c.id, SETTINGS)
    h.set_pinned(c.id, True)
    h.set_folder(c.id, "Work")
    d = h.create("Plain chat")
    h.add_message(d.id, "user", "hello")
    h.add_message(d.id, "assistant", "hi")
    return h


def _without_ids(value):
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k not in ("id", "exported")}
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


def test_export_all_then_import_into_a_fresh_profile_restores_every_chat_version_and_setting(tmp_path):
    h = _profile(tmp_path / "old.db")
    assert write_archive(h, tmp_path / "chats.json") == 2
    fresh = History(tmp_path / "new.db")
    assert import_chats(fresh, read_archive(tmp_path / "chats.json")).line() == "2 chats imported"
    assert _without_ids(export_chats(fresh)) == _without_ids(export_chats(h)), "nothing lost or changed"
    budget = next(c for c in fresh.conversations() if c.title == "Budget review")
    assert (budget.pinned, budget.folder, budget.system_prompt) == (True, "Work", "Be brief.")
    assert chat_settings(fresh, budget.id) == SETTINGS, "every key of the settings, whatever they are"
    q, a = fresh.messages(budget.id)
    assert (q.content, q.versions, a.content, a.status) == ("Who leads the project?", 2, "Ann leads it.", "stopped")
    choose_question(fresh, q.id, 1)  # the earlier branch with its answer's two versions
    q, a = fresh.messages(budget.id)
    assert q.spans[-1] == (36, "file:plan.txt") and (a.content, a.version, a.versions) == ("Ten thousand.", 2, 2)
    assert fresh.choose_version(a.id, 1).stats == {"generated_tokens": 3, "decode_tokens_per_s": 41.5}
    data = json.loads((tmp_path / "chats.json").read_text(encoding="utf-8"))
    chat = next(c for c in data["conversations"] if c["title"] == "Budget review")
    assert chat["model"] == "Qwen2.5 7B", "the model's name is in the file for a reader"
    first = chat["messages"][0]["question_versions"][0]
    assert first["content"].startswith("What is the budget?") and first["tail"][0]["answers"][1]["content"] == \
        "Ten thousand."


def test_import_into_a_profile_with_chats_adds_beside_them_and_skips_what_is_already_there(tmp_path):
    h = _profile(tmp_path / "a.db")
    write_archive(h, tmp_path / "chats.json")
    other = History(tmp_path / "b.db")
    mine = other.create("Mine")
    other.add_message(mine.id, "user", "keep me")
    assert import_chats(other, read_archive(tmp_path / "chats.json")).added == 2
    titles = sorted(c.title for c in other.conversations())
    assert titles == ["Budget review", "Mine", "Plain chat"], "added beside, nothing replaced"
    assert [m.content for m in other.messages(mine.id)] == ["keep me"], "ids are new: the imported never clobber"
    again = import_chats(other, read_archive(tmp_path / "chats.json"))
    assert (again.added, again.skipped) == (0, 2) and len(other.conversations()) == 3, "a second import adds nothing"
    plain = next(c for c in h.conversations() if c.title == "Plain chat")
    h.add_message(plain.id, "user", "a question asked after the backup")
    write_archive(h, tmp_path / "later.json", ids=[plain.id])
    assert import_chats(other, read_archive(tmp_path / "later.json")).added == 1, "a chat that changed comes in beside"


BAD = {
    "empty.json": (b"", "is not a Tandem chat export: it is not JSON (line 1, column 1)"),
    "notes.json": (b'{"notes": [1, 2]}', 'is not a Tandem chat export (it has no "format": "tandem-chats")'),
    "photo.json": (b"\x89PNG\r\n\x1a\n\x00\x00", "is not a Tandem chat export: it is not text (UTF-8)"),
    "newer.json": (b'{"format": "tandem-chats", "version": 9, "conversations": []}',
                   "was exported by a newer Tandem (format 9; this one reads up to 1): update Tandem to import it"),
    "field.json": (json.dumps({"format": "tandem-chats", "version": 1, "conversations": [
        {"title": "ok", "created": 1.0, "messages": []},
        {"title": "Broken", "created": 2.0, "messages": [{"role": "user", "content": 5, "created": 1.0}]}]}).encode(),
        ': chat 2 (“Broken”), message 1: "content" is not text'),
    "deep.json": (b"[" * 100000 + b"]" * 100000, "is not a Tandem chat export"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_or_foreign_file_is_one_line_and_changes_nothing(tmp_path, name):
    h = _profile(tmp_path / "h.db")
    before = _without_ids(export_chats(h))
    content, line = BAD[name]
    (tmp_path / name).write_bytes(content)
    with pytest.raises(ArchiveError) as e:
        import_chats(h, read_archive(tmp_path / name))
    assert str(e.value).startswith(name) and line in str(e.value) and "\n" not in str(e.value)
    assert _without_ids(export_chats(h)) == before


def test_a_missing_file_says_it_cannot_be_read(tmp_path):
    with pytest.raises(ArchiveError, match=r"^gone\.json: cannot read it \(No such file or directory\)$"):
        read_archive(tmp_path / "gone.json")


def test_a_database_made_by_the_release_before_opens_with_everything_and_is_searchable(tmp_path):
    path = tmp_path / "history.db"
    with sqlite3.connect(path) as db:
        db.executescript(V2_SCHEMA)
        db.execute("INSERT INTO conversations VALUES (1, 'Old chat', 'sys', 10.0, 20.0)")
        db.execute("INSERT INTO messages VALUES (1, 1, 'user', 'the quarterly forecast', NULL, '[]', 'complete', 11.0, 1)")
        db.execute("INSERT INTO messages VALUES (2, 1, 'assistant', 'second', NULL, '[]', 'complete', 12.0, 2)")
        db.execute("INSERT INTO answer_versions VALUES (2, 1, 'first', NULL, '[]', 'complete', 11.5)")
        db.execute("INSERT INTO answer_versions VALUES (2, 2, 'second', NULL, '[]', 'complete', 12.0)")
        db.execute("INSERT INTO chat_settings VALUES (1, ?)", (json.dumps({"temperature": 0.2}),))
    db.close()
    h = History(path)
    assert h.notice is None and h.backup is None
    (c,) = h.conversations()
    assert (c.title, c.system_prompt, c.pinned, c.folder) == ("Old chat", "sys", False, "")
    q, a = h.messages(c.id)
    assert (q.content, a.content, a.version, a.versions) == ("the quarterly forecast", "second", 2, 2)
    assert chat_settings(h, c.id) == {"temperature": 0.2}
    assert h.find("quarter") == [(c, "the quarterly forecast")], "old messages are indexed on the first open"
    h.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 4  # migrated to this release (4: pictures)
    db.close()


def test_pinned_chats_come_first_and_folders_are_listed(tmp_path):
    h = History(tmp_path / "h.db")
    a, b, c = h.create("a"), h.create("b"), h.create("c")
    for x in (a, b, c):
        h.add_message(x.id, "user", x.title)  # c is the newest
    assert [x.title for x in h.conversations()] == ["c", "b", "a"]
    h.set_pinned(a.id, True)
    assert [x.title for x in h.conversations()] == ["a", "c", "b"]
    h.set_folder(b.id, "  Tax   2025 ")
    h.set_folder(c.id, "clients")
    assert h.folders() == ["clients", "Tax 2025"] and h.get(b.id).folder == "Tax 2025"
    h.set_folder(b.id, "")
    assert h.folders() == ["clients"]


def test_search_finds_every_word_with_a_snippet_and_follows_edits_and_deletes(tmp_path):
    h = History(tmp_path / "h.db")
    c = h.create("Trip")
    h.add_message(c.id, "user", "Plan a week in Lisbon. " + "Filler words here. " * 20 + "Budget is tight.")
    d = h.create("Budgets")
    m = h.add_message(d.id, "assistant", "nothing to see")
    ((found, snippet),) = h.find("lisbon budg")
    assert found.id == c.id and "Lisbon" in snippet and len(snippet) < 200, "every word, the start of one too"
    assert [x.title for x, _ in h.find("budget")] == ["Budgets", "Trip"], "a title match first"
    h.update_message(m.id, "Lisbon is lovely")
    assert {x.title for x, _ in h.find("lovely")} == {"Budgets"}
    h.delete(d.id)
    assert h.find("lovely") == [] and h.find('"*)(') == [], "a deleted chat is gone; odd characters find nothing"


def test_delete_removes_what_is_shown_and_renumbers_the_versions_left(tmp_path):
    h = History(tmp_path / "h.db")
    c = h.create("chat")
    q1 = h.add_message(c.id, "user", "q1")
    a1 = h.add_message(c.id, "assistant", "a1 v1")
    for text in ("a1 v2", "a1 v3"):
        h.new_version(a1.id)
        h.update_message(a1.id, text, status="complete")
    q2 = h.add_message(c.id, "user", "q2")
    h.add_message(c.id, "assistant", "a2")
    h.choose_version(a1.id, 2)
    assert delete_shown(h, a1.id) == "the answer's version 2"
    a = h.message(a1.id)
    assert (a.content, a.version, a.versions) == ("a1 v1", 1, 2)
    assert h.choose_version(a1.id, 2).content == "a1 v3", "the later version numbered down"
    assert delete_shown(h, q2.id) == "the message and its answer"
    assert [m.content for m in h.messages(c.id)] == ["q1", "a1 v3"]
    edit_question(h, q1.id, "q1 edited", [])
    h.add_message(c.id, "assistant", "edited answer")
    assert delete_shown(h, q1.id) == "version 2 of the message and what followed it"
    assert [(m.content, m.versions) for m in h.messages(c.id)] == [("q1", 1), ("a1 v3", 2)], "the branch before"
    assert delete_shown(h, q1.id) == "the message and its answer" and h.messages(c.id) == []


def test_fork_from_an_answer_holds_the_conversation_up_to_it_and_leaves_the_original(tmp_path):
    h = History(tmp_path / "h.db")
    c = h.create("Plan", system_prompt="sys")
    h.set_folder(c.id, "Work")
    save_chat_settings(h, c.id, SETTINGS)
    h.add_message(c.id, "user", "q1")
    a1 = h.add_message(c.id, "assistant", "a1 v1")
    h.new_version(a1.id)
    h.update_message(a1.id, "a1 v2", status="complete")
    h.add_message(c.id, "user", "q2")
    h.add_message(c.id, "assistant", "a2")
    fork = fork_at(h, a1.id)
    assert (fork.title, fork.system_prompt, fork.folder, fork.pinned) == ("Plan (fork)", "sys", "Work", False)
    q, a = h.messages(fork.id)
    assert (q.content, a.content, a.version, a.versions) == ("q1", "a1 v2", 2, 2)
    assert h.choose_version(a.id, 1).content == "a1 v1" and chat_settings(h, fork.id) == SETTINGS
    assert [m.content for m in h.messages(c.id)] == ["q1", "a1 v2", "q2", "a2"], "the original as it was"
    with pytest.raises(KeyError):
        fork_at(h, q.id)


def test_the_export_lists_a_questions_attached_files(tmp_path):
    h = History(tmp_path / "h.db")
    c = h.create("files")
    h.add_message(c.id, "user", "Sum it\n\nAttached file `plan.txt`:\n\n```\n10k\n```",
                  spans=[(6, "text"), (2, "text"), (36, "file:plan.txt")])
    (q,) = export_chats(h)["conversations"][0]["messages"]
    assert q["attachments"] == [{"name": "plan.txt", "characters": 36}] and q["content"].endswith("```")
