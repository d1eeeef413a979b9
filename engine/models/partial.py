"""Downloads that stopped part-way: how much of each catalog model is on disk, and freeing it.

A cancelled or cut download from the Hub keeps `blobs/<sha256>.incomplete` (engine.models.download)
and the next download continues from its last byte: those bytes are reported as resumable. A
mirror run that was killed leaves `blobs/<sha256>.<pid>.mirror.incomplete` (engine.models.mirror):
the mirror cannot continue it (it assembles a file from its first chunk) and the next download
removes it, but until then it takes room, so it is reported too, as not resumable. A Hub
partial beside its file already whole (the mirror or another tool finished the file) is
reported as what it is, the Hub's, and as not needed: no download continues or removes it
(Delete does). The mirror's `.tandem-mirror-<pid>-*` work folders name no file, and several
catalog models share one repository, so they belong to no one model: they are not reported
(the next download from that repository sweeps them). A catalog file without a sha256 has no partial name known before the
Hub is asked: none is reported for it.

Deleting removes only those files: never a complete blob, never another model's file, and not
while a download holds the file's lock (this process or another one, such as `tandem pull`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import StoreError
from ..units import human_bytes
from . import mirror, store
from .catalog import FileSpec, ModelSpec, PairSpec


@dataclass(frozen=True)
class PartialFile:
    """One file a download left behind, beside the catalog file it belongs to."""

    path: Path
    spec: FileSpec
    have: int  # bytes on disk
    resumable: bool  # the Hub's partial of a file not yet whole: the next download continues it
    from_hub: bool = True  # the Hub's `.incomplete`; else a dead mirror run's file

    @property
    def stale(self) -> bool:
        """The Hub's partial beside its file already whole (another source or tool finished it):
        nothing continues it and nothing needs it."""
        return self.from_hub and not self.resumable


@dataclass(frozen=True)
class PartialModel:
    """A catalog model with partial files: what is on disk of it, and what Delete would free."""

    model: ModelSpec
    files: tuple[PartialFile, ...]
    complete: int  # bytes of the model's files that are whole on disk

    @property
    def resumable(self) -> bool:
        return any(f.resumable for f in self.files)

    @property
    def on_disk(self) -> int:
        """The model's bytes a download would not fetch again: whole files and resumable partials."""
        return self.complete + sum(f.have for f in self.files if f.resumable)

    @property
    def freeable(self) -> int:
        """What deleting the partial files frees."""
        return sum(f.have for f in self.files)

    @property
    def cut(self) -> int:
        """Bytes no download continues: what dead mirror runs left."""
        return sum(f.have for f in self.files if not f.from_hub)

    @property
    def stale(self) -> int:
        """Bytes of Hub partials whose files are whole on disk: not needed."""
        return sum(f.have for f in self.files if f.stale)

    def leftovers(self) -> list[str]:
        """What no download continues, in words: a cut mirror run's bytes, a stale Hub partial's."""
        return ([f"{human_bytes(self.cut)} left by a cut mirror download"] if self.cut else []) + (
            [f"{human_bytes(self.stale)} of a Hub download whose file is complete now"] if self.stale else [])

    def describe(self) -> str:
        """How much of the model is on disk, in words."""
        left = self.leftovers()
        if self.resumable:
            text = f"{human_bytes(self.on_disk)} of {human_bytes(self.model.bytes)} downloaded (partial: Resume continues it)"
            return text + "".join(f", plus {w}" for w in left)
        return f"{' and '.join(left)} ({'not resumable' if self.cut else 'not needed'}; Delete frees it)"


def _hub_partial(f: FileSpec, complete: bool) -> PartialFile | None:
    b = store.blob_path(f)
    if b is None:
        return None
    part = b.with_name(f"{b.name}.incomplete")
    try:
        have = part.stat().st_size if part.is_file() and not part.is_symlink() else 0
    except OSError:
        return None
    if not have:
        return None
    return PartialFile(part, f, have, resumable=not complete and have <= f.bytes)


def _mirror_leftovers(f: FileSpec) -> list[PartialFile]:
    if f.sha256 is None:
        return []
    blobs = store.repo_dir(f.repo) / "blobs"
    out = []
    for p in sorted(blobs.glob(f"{f.sha256}.*mirror.incomplete")) if blobs.is_dir() else []:
        try:
            if p.is_file() and not p.is_symlink() and mirror.is_stale(p):
                out.append(PartialFile(p, f, p.stat().st_size, resumable=False, from_hub=False))
        except OSError:
            continue
    return out


def partial_files(f: FileSpec, complete: bool | None = None) -> list[PartialFile]:
    """What downloads of `f` left behind in the cache: the Hub's partial, dead mirror runs' files
    (`complete`: whether `f` itself is whole on disk, when the caller knows)."""
    if complete is None:
        complete = store.find_file(f) is not None
    hub = _hub_partial(f, complete)
    return ([hub] if hub is not None else []) + _mirror_leftovers(f)


def model_partial(model: ModelSpec) -> PartialModel | None:
    """The model's partial download, or None when no download of it left a file behind."""
    files: list[PartialFile] = []
    complete = 0
    for f in model.downloads:
        whole = store.find_file(f) is not None
        complete += f.bytes if whole else 0
        files += partial_files(f, whole)
    return PartialModel(model, tuple(files), complete) if files else None


@dataclass(frozen=True)
class PairPartial:
    """A pair whose models have partial downloads: one line for its row, details per model."""

    pair: PairSpec
    models: tuple[PartialModel, ...]  # the pair's models that have partial files
    on_disk: int  # the pair's bytes a download would not fetch again (whole files and resumable partials)

    @property
    def resumable(self) -> bool:
        return any(m.resumable for m in self.models)

    @property
    def freeable(self) -> int:
        return sum(m.freeable for m in self.models)

    @property
    def word(self) -> str:
        """The row's words: '312.0 MB of 1.1 GB (partial)', or what a dead mirror run left."""
        if self.resumable:
            return f"{human_bytes(self.on_disk)} of {human_bytes(self.pair.bytes)} (partial)"
        return f"{human_bytes(self.freeable)} left by a cut download"

    def detail_of(self, model: ModelSpec) -> str | None:
        """The model's line when it has partial files, else None."""
        return next((m.describe() for m in self.models if m.model.id == model.id), None)


def pair_partial(pair: PairSpec) -> PairPartial | None:
    """The pair's partial downloads, or None when none of its models has one."""
    found, on_disk = [], 0
    for m in pair.models:
        pm = model_partial(m)
        if pm is not None:
            found.append(pm)
            on_disk += pm.on_disk
        else:
            on_disk += sum(f.bytes for f in m.downloads if store.find_file(f) is not None)
    return PairPartial(pair, tuple(found), on_disk) if found else None


def _inside_blobs(p: Path, f: FileSpec) -> bool:
    blobs = (store.repo_dir(f.repo) / "blobs").resolve()
    return p.parent.resolve() == blobs and p.name.endswith(".incomplete")


def delete_partial(model: ModelSpec) -> int:
    """Remove the model's partial files (never a complete blob); returns the bytes freed.

    Refused (StoreError) while a download holds a file's lock; a file that vanished meanwhile
    counts as freed by nobody; a file that cannot be removed raises StoreError with the reason.
    """
    from filelock import Timeout
    from huggingface_hub.utils import WeakFileLock  # the lock downloads of this file take

    found = model_partial(model)
    freed = 0
    for pf in found.files if found is not None else ():
        if not _inside_blobs(pf.path, pf.spec):  # belt and braces: only partial files in this repo's blobs
            raise StoreError(f"{pf.path} is not a partial download in the model cache: not deleting it")
        try:
            if pf.path.name == f"{pf.spec.sha256}.incomplete":  # the Hub's partial: its download's lock
                lock = store.lock_path(pf.spec, pf.spec.sha256 or "")
                lock.parent.mkdir(parents=True, exist_ok=True)
                try:
                    with WeakFileLock(lock, timeout=0.2):
                        freed += _unlink(pf.path)
                except Timeout:
                    raise StoreError(f"{pf.spec.filename} is being downloaded right now: "
                                     "cancel that download before deleting its partial file") from None
            elif mirror.is_stale(pf.path):  # a mirror run that is still alive keeps its file
                freed += _unlink(pf.path)
        except OSError as e:
            raise StoreError(f"cannot delete {pf.path}: {e.strerror or e}") from None
    return freed


def _unlink(p: Path) -> int:
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        return 0
    p.unlink(missing_ok=True)
    return size
