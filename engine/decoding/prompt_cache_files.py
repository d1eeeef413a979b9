"""The prompt cache's files: one saved KV state per file, in a folder kept under a byte budget.

A file is MAGIC, a 4-byte header length, a JSON header (the state's identity, its token count,
the state's size and CRC-32), the tokens (int32), then the state bytes llama.cpp gave. The
header and tokens are read alone (a folder scan costs a few kilobytes a file); the state is
checked against the header's size and CRC before llama.cpp sees a byte of it, so a cut or
damaged file is refused, never loaded into a context. Files are written to a temporary name
and renamed, by one background thread, so an answer never waits for a disk.
"""

from __future__ import annotations

import json
import os
import queue
import struct
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

MAGIC = b"TANDEMKV1\n"
SUFFIX = ".kv"
TMP_SUFFIX = ".tmp"
_MAX_HEADER = 64 * 1024
MAX_TOKENS = 1 << 24  # no context holds more: a header that says so is not ours
STALE_TMP_S = 600.0  # a temporary file this old was left by a writer that was killed


class DamagedState(ValueError):
    """The file is not a whole saved state (cut short, another format, a changed byte)."""


@dataclass
class StateFile:
    """One file found in the folder: what it holds and how large it is."""

    path: Path
    identity: str
    tokens: np.ndarray
    size: int
    mtime: float


def write_state(path: Path, identity: str, tokens: np.ndarray, data: Any) -> int:
    """Write a state file (atomically: a temporary name, then renamed); its size in bytes."""
    payload = memoryview(data).cast("B")
    header = json.dumps({"identity": identity, "n_tokens": int(len(tokens)), "size": payload.nbytes,
                         "crc": zlib.crc32(payload)}).encode()
    tmp = path.with_name(path.name + TMP_SUFFIX)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(tmp, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<I", len(header)))
        f.write(header)
        f.write(np.asarray(tokens, dtype="<i4").tobytes())
        f.write(payload)
    os.replace(tmp, path)
    return path.stat().st_size


def _read_header(f: Any) -> tuple[dict, np.ndarray, int]:
    """The header, the tokens, and where the state starts."""
    if f.read(len(MAGIC)) != MAGIC:
        raise DamagedState("not a Tandem prompt-cache file")
    raw = f.read(4)
    if len(raw) != 4:
        raise DamagedState("cut short in its header")
    (n,) = struct.unpack("<I", raw)
    if n > _MAX_HEADER:
        raise DamagedState("a header too long to be ours")
    try:
        head = json.loads(f.read(n))
        count, size, _crc, _ident = int(head["n_tokens"]), int(head["size"]), int(head["crc"]), str(head["identity"])
    except (ValueError, KeyError, TypeError):
        raise DamagedState("its header is not readable") from None
    if not 0 < count <= MAX_TOKENS or size <= 0:
        raise DamagedState("its header's counts are out of range")
    raw = f.read(4 * count)
    if len(raw) != 4 * count:
        raise DamagedState("cut short in its tokens")
    return head, np.frombuffer(raw, dtype="<i4").astype(np.int32), len(MAGIC) + 4 + n + 4 * count


def read_header(path: Path) -> StateFile:
    """What a file holds, without its state. OSError when unreadable; DamagedState when not ours."""
    st = path.stat()
    with open(path, "rb") as f:
        head, tokens, start = _read_header(f)
    if st.st_size != start + head["size"]:
        raise DamagedState(f"{st.st_size} bytes, not the {head['size']}-byte state its header promises")
    return StateFile(path, head["identity"], tokens, st.st_size, st.st_mtime)


def read_state(path: Path, identity: str) -> bytearray:
    """The state bytes of a file made under `identity`, checked whole. DamagedState when cut
    short, changed or made under another identity (the caller removes it); OSError when gone."""
    with open(path, "rb") as f:
        head, _tokens, _start = _read_header(f)
        if head["identity"] != identity:
            raise DamagedState("made for another model file, context size, llama.cpp build or KV type")
        data = bytearray(head["size"])
        if f.readinto(data) != len(data) or f.read(1):
            raise DamagedState("its state is cut short or runs on")
    if zlib.crc32(data) != head["crc"]:
        raise DamagedState("its state does not match its checksum")
    return data


def scan(folder: Path, identity: str, on_damaged: Callable[[Path, str], None]) -> list[StateFile]:
    """The files in `folder` made under `identity`, oldest use first. Files made under another
    identity (this model file at another context size, llama.cpp build or KV type) are refused
    and removed, as are damaged ones (`on_damaged` says so first) and stale temporary files."""
    found: list[StateFile] = []
    try:
        names = list(folder.iterdir())
    except OSError:
        return found
    now = time.time()
    for p in names:
        try:
            if p.name.endswith(TMP_SUFFIX):
                if now - p.stat().st_mtime > STALE_TMP_S:
                    p.unlink(missing_ok=True)
                continue
            if p.suffix != SUFFIX:
                continue
            sf = read_header(p)
        except DamagedState as e:
            on_damaged(p, str(e))
            p.unlink(missing_ok=True)
            continue
        except OSError:
            continue  # removed by another process meanwhile, or unreadable: not ours to judge
        if sf.identity != identity:
            p.unlink(missing_ok=True)
            continue
        found.append(sf)
    found.sort(key=lambda s: s.mtime)
    return found


def trim_folder(root: Path, budget: int) -> list[Path]:
    """Remove the least recently used state files under `root` (every model's) until they fit
    in `budget` bytes; the paths removed."""
    files = []
    for p in root.glob(f"*/*{SUFFIX}"):
        try:
            st = p.stat()
        except OSError:
            continue
        files.append((st.st_mtime, st.st_size, p))
    files.sort()
    total = sum(size for _, size, _ in files)
    removed = []
    for _, size, p in files:
        if total <= budget:
            break
        p.unlink(missing_ok=True)
        total -= size
        removed.append(p)
    return removed


def touch(path: Path) -> None:
    """Mark a file as just used (the folder is trimmed least recently used first)."""
    try:
        os.utime(path)
    except OSError:
        pass


class Writer:
    """One background thread doing the cache's disk work in order, so no answer waits for it."""

    def __init__(self, on_error: Callable[[BaseException], None]):
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._on_error = on_error
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="tandem-prompt-cache", daemon=True)
                self._thread.start()
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                job()
            except Exception as e:  # a full disk or a removed folder: the cache stays in memory
                self._on_error(e)
            finally:
                self._jobs.task_done()

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait for the queued work to be done (at most `timeout` seconds); whether it was."""
        done = threading.Event()
        if self._thread is None:
            return True
        self._jobs.put(done.set)
        return done.wait(timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Finish the queued work (at most `timeout` seconds), then stop the thread."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join(timeout)
            self._thread = None
