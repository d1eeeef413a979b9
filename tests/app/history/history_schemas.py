"""Layouts of the history database from earlier releases, for the tests that open one."""

# before answer versions (the previous release)
OLD_SCHEMA = """
CREATE TABLE conversations (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL,
    system_prompt TEXT NOT NULL DEFAULT '', created REAL NOT NULL, updated REAL NOT NULL);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL, content TEXT NOT NULL, stats TEXT, spans TEXT,
    status TEXT NOT NULL DEFAULT 'complete', created REAL NOT NULL);
CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
"""
