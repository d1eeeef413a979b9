"""The prompt cache: prompts already read, kept as llama.cpp sequence states, so a prompt that
starts as one of them is read only past the shared part.

One cache per engine, shared by every decoder (each draft choice has its own target context:
without it a request with another draft choice re-read the whole prompt). States stay in
memory under a byte budget and on disk across restarts (prompt_cache_files.py), least recently
used first out of both. A state is used only by a context of the same `state_identity` (model
file, context size, llama.cpp build, KV layout). On an attention-only target any state
sharing a prefix with the prompt serves: it is loaded whole, then the KV past the shared part
is removed. A recurrent or hybrid target's state cannot be cut back: only a state saved at
exactly a prefix of the prompt serves, which is why decoders save one at the prompt's end.
"""

from __future__ import annotations

import itertools
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .. import paths
from ..errors import DecodeError, TandemError
from ..llamacpp.context import Context, keyed
from . import prompt_cache_files as files

log = logging.getLogger(__name__)

GiB = 1 << 30
MIN_GAIN = 64  # restore a state only when it saves reading at least this many more tokens than the context keeps


@dataclass(frozen=True)
class CacheLimits:
    """How much the prompt cache may hold. `memory_bytes` None: the smaller of 2 GiB and a
    quarter of the memory available when the engine starts; `disk_bytes` 0: nothing on disk
    (the folder is shared by every model, its least recently used files go first);
    `min_tokens`: shorter prompts are read again rather than kept (not worth a state)."""

    memory_bytes: int | None = None
    disk_bytes: int = 4 * GiB
    min_tokens: int = 256
    folder: Path | None = None  # None: paths.prompt_cache_dir()

    def __post_init__(self) -> None:
        for name in ("memory_bytes", "disk_bytes", "min_tokens"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise TandemError(f"the prompt cache's {name} must be a whole number >= 0, got {v!r}")

    def memory_budget(self) -> int:
        if self.memory_bytes is not None:
            return self.memory_bytes
        import psutil

        return min(2 * GiB, psutil.virtual_memory().available // 4)


@dataclass(eq=False)  # one entry is itself: its fields hold numpy arrays
class _Entry:
    identity: str
    tokens: np.ndarray  # int32: what the state holds, position by position
    data: Any  # the state bytes (a numpy uint8 array or a bytearray); None when only on disk
    path: Path | None = None  # its file, once written
    used: int = 0  # a clock tick: larger is more recent
    writing: bool = False  # its file is queued for the writer

    @property
    def nbytes(self) -> int:
        return len(self.data) if self.data is not None else 0


def shared_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """How many leading tokens two int32 arrays share."""
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


class PromptCache:
    """Read prompts' states for one target file, in memory and on disk. `restore` before a
    prompt is read, `store` after; both run in the decoder's thread, between its llama.cpp calls."""

    def __init__(self, model_id: str, limits: CacheLimits | None = None):
        self.limits = limits or CacheLimits()
        self.memory_budget = self.limits.memory_budget()
        root = self.limits.folder or paths.prompt_cache_dir()
        self.root = root
        self.folder = root / paths.safe_name(model_id)
        self.on_disk = self.limits.disk_bytes > 0
        self._entries: list[_Entry] = []
        self._scanned: set[str] = set()  # identities whose files were read into the index
        self._clock = itertools.count(1)
        self._lock = threading.Lock()  # the writer thread updates entries' files
        self._writer = files.Writer(lambda e: log.warning("prompt cache not saved to %s (%s)", self.folder, e))

    # -- what the decoder calls ---------------------------------------------------------------
    def restore(self, ctx: Context, prompt: Sequence[int], images: Sequence[Any] = ()) -> int:
        """Make `ctx` hold the longest prefix of `prompt` (all but its last token) that it or
        this cache has; how many positions it holds. Falls back to `ctx.reuse_prefix`.
        `images`: the prompt's pictures (ImageSpans); a state is keyed by their content."""
        if ctx.after_decode is not None:  # an MTP head needs the hidden state of every position read
            return ctx.reuse_prefix(prompt, images)
        want = keyed(prompt[: len(prompt) - 1], images)
        own = shared_prefix(ctx.keyed_tokens(), want)
        if ctx.recurrent and own < ctx.n_past:
            own = 0  # cutting a recurrent state back re-reads what it keeps: any saved state is cheaper
        for entry, n in self._candidates(ctx, want):
            if n < max(own + MIN_GAIN, 1):
                break
            if (entry.tokens[n:] < 0).any():
                continue  # a picture past the shared part: not this request's to name
            data = entry.data if entry.data is not None else self._read(entry)
            if data is None:
                continue
            if not ctx.load_state(data, entry.tokens, images):
                log.warning("prompt cache: llama.cpp refused a saved state%s; it is dropped",
                            f" ({entry.path.name})" if entry.path else "")
                self._drop(entry)
                continue  # the context was emptied: `reuse_prefix` below keeps nothing
            try:
                ctx.truncate(n)
            except DecodeError:  # a memory that cannot be cut back here: read it all
                ctx.clear()
                return 0
            with self._lock:
                entry.used = next(self._clock)
                if entry.data is None:
                    entry.data = data  # read from disk: now in memory too
                    self._fit_memory()
            if entry.path is not None:
                files.touch(entry.path)
            return n
        return ctx.reuse_prefix(prompt, images)

    def store(self, ctx: Context) -> None:
        """Keep what `ctx` holds now (a prompt read, or a prompt and its answer), unless it is
        short or a kept state already serves every prompt it would."""
        n = ctx.n_past
        if n < max(self.limits.min_tokens, 1):
            return
        tokens = ctx.keyed_tokens()  # a picture's cells: its content's key
        ident = ctx.state_identity
        self._scan(ident)
        with self._lock:
            for e in self._entries:
                if e.identity == ident and len(e.tokens) >= n and (len(e.tokens) == n or not ctx.recurrent) \
                        and shared_prefix(e.tokens, tokens) == n:
                    e.used = next(self._clock)  # already kept (an attention state also serves its prefixes)
                    return
        data = ctx.save_state()
        if data is None:
            return
        entry = _Entry(ident, tokens, data, used=next(self._clock))
        with self._lock:
            if not ctx.recurrent:  # a state whose tokens start this one's serves nothing this one cannot
                for e in [e for e in self._entries if e.identity == ident and len(e.tokens) < n
                          and shared_prefix(e.tokens, tokens) == len(e.tokens)]:
                    self._drop_locked(e)
            self._entries.append(entry)
            self._fit_memory()
            if self.on_disk:
                entry.writing = True
                self._writer.submit(lambda: self._write(entry, data))

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait for the files being written (tests, and an engine that closes)."""
        return self._writer.flush(timeout)

    def close(self) -> None:
        self._writer.close()
        with self._lock:
            self._entries.clear()

    def clear(self) -> None:
        """Forget every kept state of this target, in memory and on disk."""
        self.flush()
        with self._lock:
            self._entries.clear()
            self._scanned.clear()
        for p in self.folder.glob(f"*{files.SUFFIX}"):
            p.unlink(missing_ok=True)

    @property
    def memory_used(self) -> int:
        with self._lock:
            return sum(e.nbytes for e in self._entries)

    # -- inside --------------------------------------------------------------------------------
    def _candidates(self, ctx: Context, want: np.ndarray) -> list[tuple[_Entry, int]]:
        """The states that could serve `want`, with how many of its tokens each gives, most first."""
        ident = ctx.state_identity
        self._scan(ident)
        out = []
        with self._lock:
            for e in self._entries:
                if e.identity != ident or (e.data is None and e.path is None):
                    continue
                n = shared_prefix(e.tokens, want)
                if ctx.recurrent and n != len(e.tokens):
                    continue  # a recurrent state is at its last token, and stays there
                out.append((e, n))
        out.sort(key=lambda en: (en[1], -len(en[0].tokens), en[0].used), reverse=True)  # most tokens, least to load
        return out

    def _scan(self, ident: str) -> None:
        """Read the folder's index once per identity (refusing other identities' files)."""
        if not self.on_disk or ident in self._scanned:
            return
        self._scanned.add(ident)
        found = files.scan(self.folder, ident, self._warn_damaged)
        with self._lock:
            known = {e.path for e in self._entries if e.path is not None}
            for sf in found:
                if sf.path not in known:
                    self._entries.append(_Entry(ident, sf.tokens, None, sf.path, used=next(self._clock)))

    def _read(self, entry: _Entry) -> bytearray | None:
        assert entry.path is not None
        try:
            return files.read_state(entry.path, entry.identity)
        except files.DamagedState as e:
            self._warn_damaged(entry.path, str(e))
        except OSError:
            pass  # removed meanwhile (another process trimmed the folder)
        self._drop(entry)
        return None

    @staticmethod
    def _warn_damaged(path: Path, why: str) -> None:
        log.warning("prompt cache file %s is damaged (%s): removed; the prompt is read again", path.name, why)

    def _write(self, entry: _Entry, data: Any) -> None:
        """The writer thread's job: one state to its file, then the folder trimmed to budget."""
        path = self.folder / f"{_token_hash(entry.tokens)}{files.SUFFIX}"
        written = False
        try:
            files.write_state(path, entry.identity, entry.tokens, data)
            written = True
        finally:
            with self._lock:
                entry.writing = False
                alive = entry in self._entries
                if alive and written:
                    entry.path = path
                elif alive and entry.data is None:  # evicted from memory, and not on disk either
                    self._entries.remove(entry)
        if written and not alive:  # dropped while it was being written
            path.unlink(missing_ok=True)
        removed = set(files.trim_folder(self.root, self.limits.disk_bytes))
        if removed:
            with self._lock:
                for e in list(self._entries):
                    if e.path in removed:
                        e.path = None
                        if e.data is None:
                            self._entries.remove(e)

    def _drop(self, entry: _Entry) -> None:
        with self._lock:
            self._drop_locked(entry)

    def _drop_locked(self, entry: _Entry) -> None:
        if entry in self._entries:
            self._entries.remove(entry)
        if entry.path is not None:
            path = entry.path
            self._writer.submit(lambda: path.unlink(missing_ok=True))

    def _fit_memory(self) -> None:
        """Under the lock: drop the least recently used states' bytes until the rest fit (a
        state also on disk stays findable there)."""
        total = sum(e.nbytes for e in self._entries)
        for e in sorted(self._entries, key=lambda e: e.used):
            if total <= self.memory_budget:
                break
            if e.data is None:
                continue
            total -= e.nbytes
            if e.path is None and not e.writing:
                self._entries.remove(e)
            e.data = None


def _token_hash(tokens: np.ndarray) -> str:
    import hashlib

    return hashlib.blake2b(np.ascontiguousarray(tokens, dtype="<i4").tobytes(), digest_size=16).hexdigest()
