"""Auto's measured costs, kept on disk so a fresh process does not pay for them again.

What a target pass over n tokens costs depends on the machine, the backend (CPU, CUDA,
Metal, how many layers offloaded), the thread count and the model file; what a drafted
token costs depends on the same with the draft file. Both are stored in one small JSON
file in the user data folder, keyed by exactly those things, and refreshed with the
medians of real steps after every generation. A corrupt or unreadable file is ignored
(and rewritten): calibration is a cache, never a reason to fail.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

from .. import paths

_lock = threading.Lock()


def store_path() -> Path:
    return paths.data_dir() / "calibration.json"


@lru_cache(maxsize=1)
def machine_id() -> str:
    """Host name and CPU model: timings from another machine must not be reused."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{platform.node()}|{cpu}"


def file_id(path: str | os.PathLike[str] | None) -> str:
    """A model file by name and size (a re-downloaded identical file keeps its calibration)."""
    if path is None:
        return "none"
    p = Path(path)
    try:
        return f"{p.name}:{p.stat().st_size}"
    except OSError:
        return p.name


_SAMPLE = 1 << 20  # bytes read from each end of a model file for `content_id`


@lru_cache(maxsize=64)
def _sampled_digest(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read(_SAMPLE))  # the header: metadata, vocabulary, tensor layout
        f.seek(max(0, size - _SAMPLE))
        h.update(f.read(_SAMPLE))  # the last weights
    return h.hexdigest()[:16]


def content_id(path: str | os.PathLike[str] | None) -> str:
    """A model file by name, size and a digest of its first and last MiB: for what must never be
    mixed up between two files that share a name and a size (a saved KV state restored into a
    context), where `file_id` is enough for what only measures (calibration)."""
    if path is None:
        return "none"
    p = Path(path)
    try:
        st = p.stat()
        return f"{p.name}:{st.st_size}:{_sampled_digest(str(p), st.st_size, st.st_mtime_ns)}"
    except OSError:
        return p.name


def key(model_file: str, *, threads: int, backend: str) -> str:
    return f"{machine_id()}|{backend}|t{threads}|{model_file}"


RPC_MARK = "+rpc:"  # in the backend part of a key: a target split over these RPC workers


def local_verify_s(rpc_key: str, path: Path | None = None) -> dict[str, float]:
    """Seconds per target pass by batch size for the same model file, machine and threads
    loaded here without RPC workers, from what earlier local runs stored; {} when none did.
    With several local backends stored (CPU only, GPU offload), the fastest single-token
    pass is the one a user would choose."""
    try:
        head, threads, model_file = rpc_key.rsplit("|", 2)
        machine, _backend = head.rsplit("|", 1)
    except ValueError:
        return {}
    best: dict[str, float] = {}
    for k, entry in _read(path or store_path()).items():
        if not isinstance(k, str) or not isinstance(entry, dict) or not k.endswith(f"|{threads}|{model_file}"):
            continue
        try:
            k_head = k.rsplit("|", 2)[0]
            k_machine, k_backend = k_head.rsplit("|", 1)
        except ValueError:
            continue
        verify = entry.get("verify_s")
        if k_machine != machine or RPC_MARK in k_backend or not isinstance(verify, dict):
            continue
        clean = {str(n): float(v) for n, v in verify.items() if isinstance(v, (int, float)) and v > 0}
        if "1" in clean and ("1" not in best or clean["1"] < best["1"]):
            best = clean
    return best


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError, UnicodeDecodeError):
        return {}


def load(k: str, path: Path | None = None) -> dict[str, Any] | None:
    entry = _read(path or store_path()).get(k)
    return entry if isinstance(entry, dict) else None


def save(entries: dict[str, dict[str, Any]], path: Path | None = None) -> None:
    """Merge `entries` into the store (atomic replace; disk errors are ignored)."""
    p = path or store_path()
    with _lock:
        data = _read(p)
        data.update(entries)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".calibration-", dir=p.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.replace(tmp, p)
        except OSError:
            pass


def entries(path: Path | None = None) -> dict[str, Any]:
    """Every stored entry by key (for estimates made before a model is loaded)."""
    return _read(path or store_path())
