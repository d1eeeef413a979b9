"""Read a GGUF header from the Hub without downloading the model: HTTP range requests.

The header (metadata, vocabulary) sits at the start of the file; the tensor data that
makes up almost all of it is never fetched. Ranges grow (1 MiB, then doubling) until the
parser has what it needs: a 1.1 GB Qwen file costs about 8 MB. Used by `tandem check` to
decide whether a draft can speculate for a target before either is downloaded.

Requests go through huggingface_hub's URL and metadata helpers and its HTTP session and
headers, so HF_ENDPOINT, tokens and proxies apply, and errors (gated, 404, network) read
the same as for a download.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import StoreError
from .gguf_header import GGUFHeader, read_header_stream

FIRST_RANGE = 1 << 20
MAX_HEADER_BYTES = 512 << 20  # a corrupt length field must not make us fetch a whole model

_REMOTE = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)/(?P<file>[^@]+?\.gguf)(?:@(?P<rev>[\w./-]+))?$")


@dataclass
class RemoteHeader:
    header: GGUFHeader
    source: str  # repo/file@revision or the URL
    bytes_read: int  # body bytes received
    requests: int  # ranged GETs made
    file_size: int | None


def parse_remote_spec(value: str) -> tuple[str, str, str] | None:
    """'org/name/file.gguf' or 'org/name/sub/file.gguf@rev' -> (repo, filename, revision)."""
    m = _REMOTE.match(value.strip())
    if not m:
        return None
    return m["repo"], m["file"], m["rev"] or "main"


class _RangeReader:
    """`read(n)` over a remote file, fetching growing ranges as the parser asks for more."""

    def __init__(self, url: str, where: str, size: int | None, first: int, limit: int, revision: str = "main"):
        self.url = url
        self.where = where
        self.revision = revision
        self.size = size
        self.next = first
        self.limit = limit
        self.buf = bytearray()
        self.pos = 0
        self.eof = False
        self.bytes_read = 0
        self.requests = 0

    def read(self, n: int) -> bytes:
        while self.pos + n > len(self.buf) and not self.eof:
            self._fetch(max(self.next, self.pos + n - len(self.buf)))
            self.next *= 2
        out = bytes(self.buf[self.pos : self.pos + n])
        self.pos += len(out)
        return out

    def _fetch(self, want: int) -> None:
        from huggingface_hub import errors as hfe
        from huggingface_hub.utils import get_session, hf_raise_for_status

        from .download import TIMEOUT, request_headers, translate

        start = len(self.buf)
        if start + want > self.limit:
            want = self.limit - start
            if want <= 0:
                raise StoreError(f"{self.where}: the GGUF header is larger than {self.limit:,} bytes; refusing to read on")
        end = start + want - 1
        if self.size is not None:
            end = min(end, self.size - 1)
            if start > end:
                self.eof = True
                return
        headers = request_headers(self.url)
        headers["Range"] = f"bytes={start}-{end}"
        self.requests += 1
        try:
            with get_session().stream("GET", self.url, headers=headers, follow_redirects=True, timeout=TIMEOUT) as r:
                if r.status_code == 416:
                    self.eof = True
                    return
                hf_raise_for_status(r)
                if r.status_code == 200 and start > 0:
                    raise StoreError(f"{self.where}: the server does not support range requests")
                got = 0
                for chunk in r.iter_bytes(256 * 1024):
                    take = chunk[: want - got]
                    self.buf += take
                    got += len(take)
                    self.bytes_read += len(chunk)
                    if got >= want:
                        break  # a server that ignored the range: stop reading the model
        except StoreError:
            raise
        except hfe.HfHubHTTPError as e:
            raise translate(e, self.where, self.revision) from None
        except Exception as e:  # noqa: BLE001 - transport errors
            raise StoreError(f"{self.where}: connection lost while reading the header ({type(e).__name__})") from None
        if got < want:
            self.eof = True


def read_remote_header(
    repo: str,
    filename: str,
    revision: str = "main",
    *,
    first: int = FIRST_RANGE,
    limit: int = MAX_HEADER_BYTES,
) -> RemoteHeader:
    """The metadata and vocabulary of a GGUF on the Hub, via range requests (no tensor table)."""
    from .download import file_metadata

    where = f"{repo}/{filename}" + (f"@{revision}" if revision != "main" else "")
    url, meta = file_metadata(repo, filename, revision)
    return _read(meta.location or url, where, meta.size, first, limit, revision)


def read_url_header(url: str, *, first: int = FIRST_RANGE, limit: int = MAX_HEADER_BYTES) -> RemoteHeader:
    """Same as `read_remote_header` for any HTTP(S) URL that honours Range."""
    from .download import offline

    if offline():
        raise StoreError(f"{url}: offline mode is on (HF_HUB_OFFLINE); cannot read a remote header")
    return _read(url, url, None, first, limit)


def _read(url: str, where: str, size: int | None, first: int, limit: int, revision: str = "main") -> RemoteHeader:
    reader = _RangeReader(url, where, size, first, limit, revision)
    header = read_header_stream(reader.read, where, with_tensors=False, chunk=4096)
    return RemoteHeader(header, where, reader.bytes_read, reader.requests, size)
