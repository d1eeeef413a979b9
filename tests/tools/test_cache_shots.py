"""tools/cache_shots.py's pieces that need no window: the suite's documents written as the files a
user attaches, and the first-token time read from an answer's stats line."""

from __future__ import annotations

import pytest

from tools import cache_shots
from tools.attach_wall import questions


def test_the_suites_documents_become_files_once_each(tmp_path):
    files = cache_shots._documents(tmp_path)
    asked = questions("long_documents")
    assert [f.name for f in files] == list(dict.fromkeys(a.name for a in asked))
    assert files[0].read_text(encoding="utf-8") == asked[0].text


class _Label:
    def __init__(self, text: str):
        self._text = text

    def text(self) -> str:
        return self._text


class _Chat:
    def __init__(self, text: str):
        self.stats_label = _Label(text)


def test_the_first_token_time_is_the_stats_lines():
    line = "60 tokens in 2.61 s · 31.2 tok/s decode · first token 0.48 s (1,481 of 1,525 prompt tokens from cache)"
    assert cache_shots._first_token_s(_Chat(line)) == 0.48
    with pytest.raises(SystemExit, match="no first token"):
        cache_shots._first_token_s(_Chat(""))
