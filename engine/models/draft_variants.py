"""Which faster copy of a draft model to use: the registry `tandem optimize-draft` writes.

The optimiser keeps a requantised (or officially published) variant of a draft only when
its measured cost and acceptance predict a better speedup; this small JSON file in the
user data folder remembers that verdict per (backend, original draft file), so a pair
resolved later loads the variant without measuring again. Light on purpose: llama.cpp is
only asked for the backend when a verdict exists, so the CLI and the app can consult it
while resolving a pair.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

from .. import paths

_lock = threading.Lock()


def registry_path() -> Path:
    return paths.data_dir() / "draft_variants.json"


def variants_dir() -> Path:
    """Where requantised drafts are written (next to the rest of Tandem's own data)."""
    return paths.data_dir() / "drafts"


def _key(draft: Path, backend: str) -> str:
    return f"{backend.lower()}:{Path(draft).resolve()}"


def load() -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(registry_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save(data: dict[str, dict[str, Any]]) -> None:
    p = registry_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f"{p.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(tmp, p)


def record(draft: Path, backend: str, entry: dict[str, Any]) -> None:
    """Remember the optimiser's verdict for `draft` on `backend` (kept or not, with numbers)."""
    with _lock:
        data = load()
        data[_key(draft, backend)] = {**entry, "draft": str(Path(draft).resolve()), "backend": backend.lower(),
                                      "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        _save(data)


def forget(draft: Path, backend: str) -> dict[str, Any] | None:
    """Drop the verdict for `draft` (the pair goes back to the original file)."""
    with _lock:
        data = load()
        entry = data.pop(_key(draft, backend), None)
        if entry is not None:
            _save(data)
        return entry


def lookup(draft: Path, backend: str) -> dict[str, Any] | None:
    return load().get(_key(draft, backend))


def preferred(draft: Path, backend: "str | Callable[[], str]") -> Path:
    """The registered faster variant of `draft` when one was kept and still exists; else `draft`.
    `backend`: the one llama.cpp runs on here, or the function that tells it
    (engine.llamacpp.ggml_devices.current_backend), asked only when a variant is registered."""
    data = load()
    if not data:
        return draft
    entry = data.get(_key(draft, backend if isinstance(backend, str) else backend()))
    if entry and entry.get("kept") and entry.get("variant"):
        v = Path(entry["variant"])
        if v.is_file():
            return v
    return draft
