"""An answer's tool calls ride in its stats: read back as Message.tool_calls, kept by a new
version and a fork, carried through the JSON archive, and written by the Markdown export
(an error or a denial marked; a result holding a fence fenced longer)."""

from __future__ import annotations

from app.history import History, calls_markdown
from app.history.archive import import_chats, read_archive, write_archive
from app.history.editing import fork_at

CALL = {"server": "ships", "tool": "track", "arguments": {"id": "NX-4471"}, "result": "Rotterdam", "error": False,
        "allowed": True, "seconds": 0.25}


def _chat(h: History) -> tuple[int, int]:
    c = h.create("t")
    h.add_message(c.id, "user", "where?")
    m = h.add_message(c.id, "assistant", "In Rotterdam.", stats={"generated_tokens": 3, "tool_calls": [CALL]})
    return c.id, m.id


def test_calls_survive_versions_forks_and_the_archive(tmp_path):
    h = History(tmp_path / "a.db")
    cid, mid = _chat(h)
    assert h.message(mid).tool_calls == [CALL]
    h.new_version(mid)
    assert h.message(mid).tool_calls == []  # the new version made none
    assert h.choose_version(mid, 1).tool_calls == [CALL]
    fork = fork_at(h, mid)
    assert h.messages(fork.id)[-1].tool_calls == [CALL]
    write_archive(h, tmp_path / "x.json")
    other = History(tmp_path / "b.db")
    import_chats(other, read_archive(tmp_path / "x.json"))
    assert any(m.tool_calls == [CALL] for c in other.conversations() for m in other.messages(c.id))


def test_markdown_names_each_call_and_marks_failures(tmp_path):
    h = History(tmp_path / "a.db")
    cid, _ = _chat(h)
    md = h.to_markdown(cid)
    assert "**Tool call:** ships › `track` · 0.25 s" in md and 'Arguments: `{"id": "NX-4471"}`' in md
    assert md.index("Rotterdam\n```") < md.index("In Rotterdam.")  # the call comes before the answer it led to
    lines = calls_markdown([{**CALL, "allowed": False, "error": True, "result": "error: the user denied this call"},
                            {**CALL, "error": True, "result": "has ``` inside"}])
    assert "**denied, not run**" in lines[0] and "s ·" not in lines[0]
    assert "**error**" in "\n".join(lines) and "````text" in lines
