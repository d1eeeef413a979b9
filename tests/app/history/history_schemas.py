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


# answer versions, question versions and chat settings (user_version 2: the release before pins,
# folders and the search index), exactly as that release created them
V2_SCHEMA = """
CREATE TABLE conversations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    system_prompt TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    stats TEXT,
    spans TEXT,
    status TEXT NOT NULL DEFAULT 'complete',
    created REAL NOT NULL,
    version INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
CREATE TABLE answer_versions (
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    n INTEGER NOT NULL,
    content TEXT NOT NULL,
    stats TEXT,
    spans TEXT,
    status TEXT NOT NULL DEFAULT 'complete',
    created REAL NOT NULL,
    PRIMARY KEY (message_id, n)
);

CREATE TABLE question_versions (
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    n INTEGER NOT NULL,
    content TEXT NOT NULL,
    spans TEXT,
    tail TEXT NOT NULL DEFAULT '[]',
    created REAL NOT NULL,
    PRIMARY KEY (message_id, n)
);

CREATE TABLE chat_settings (
    conversation_id INTEGER PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
    settings TEXT NOT NULL
);
PRAGMA user_version=2;
"""
