"""What an error body may say about the machine: models by id, never by path.

Engine errors name files by their full path, which is right on a terminal and wrong in an
HTTP answer: it tells every client the user's name and folder layout. `scrub` rewrites a
message for a client (the served model's path becomes its id, a draft's its file name,
any other absolute path its last part), and `server_side` tells the errors that are the
server's trouble (5xx: a model that cannot load or make a context, a failed decode) from
the request's own (400).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ...errors import (DecodeError, IncompatiblePairError, ModelFileError, ModelLoadError, TandemError,
                       UnsupportedModelError)

SERVER_SIDE: tuple[type[TandemError], ...] = (ModelFileError, ModelLoadError, DecodeError, UnsupportedModelError,
                                              IncompatiblePairError)
# an absolute path (POSIX, ~/..., or C:\...) of two parts or more, not inside a URL or a word
_PATH = re.compile(r"(?<![\w.:/\\~-])(?:~|[A-Za-z]:)?(?:[/\\][^\s/\\'\"`():,;]+){2,}[/\\]?")


def server_side(e: BaseException) -> bool:
    """Whether this engine error is the server's trouble (5xx), not the request's (400)."""
    return isinstance(e, SERVER_SIDE)


def _forms(path: Any) -> list[str]:
    p = Path(os.fspath(path))
    forms = {str(p), str(p.expanduser())}
    try:
        forms.add(str(p.expanduser().resolve()))
    except OSError:
        pass
    return sorted(forms, key=len, reverse=True)  # longest first: a path never leaves its own tail behind


def _named_paths(served: Any) -> list[tuple[str, str]]:
    """(path text, the name a client may see) for the served target and its draft model."""
    out: list[tuple[str, str]] = []
    if served is None:
        return out
    target = getattr(getattr(getattr(served, "engine", None), "target", None), "path", None)
    if target is not None:
        out += [(f, served.id) for f in _forms(target)]
    draft = getattr(served, "draft", None)
    draft_path = getattr(draft, "path", draft)  # a Model or a path
    if getattr(served, "has_draft_model", False) and isinstance(draft_path, (str, os.PathLike)):
        out += [(f, Path(os.fspath(draft_path)).name) for f in _forms(draft_path)]
    return out


def scrub(message: str, served: Any = None) -> str:
    """`message` with the served models' paths replaced by their ids (the draft by its file
    name) and any other absolute path by its last part."""
    for text, name in _named_paths(served):
        if text and text != os.sep:
            message = message.replace(text, name)
    return _PATH.sub(lambda m: Path(m.group(0).rstrip("/\\").replace("\\", "/")).name, message)
