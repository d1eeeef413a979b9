"""A fake Hugging Face Hub on 127.0.0.1 for the store/download tests.

It speaks the part of the Hub protocol that huggingface_hub and engine.models.download use:
HEAD/GET on `/{org}/{name}/resolve/{revision}/{filename}` with X-Repo-Commit, ETag and
X-Linked-Etag (the sha256, as the Hub does for LFS files), X-Linked-Size and
Content-Length; `Range: bytes=a-[b]` answered with 206 (416 past the end); errors carry
X-Error-Code / X-Error-Message exactly as `huggingface_hub.utils.hf_raise_for_status`
maps them (EntryNotFound, RevisionNotFound, RepoNotFound, GatedRepo).

Knobs, all settable while it runs: `cut_after_bytes` + `cuts` (close the socket mid-body
that many times), `delay` (seconds per `chunk` bytes sent: a slow link), `fail`
(status/error-code overrides per file or for all), `corrupt` (serve bytes that differ
from the advertised sha256), `ignore_range`, `cdn` (HEAD answers 302 to another host name,
like the real Hub's CDN redirect). Every request is logged with its Range header and the
number of body bytes actually sent.

Use the `fakehub` fixture (tests import it from here): it also points HF_HOME at a
temporary folder and HF_ENDPOINT at the server, so nothing touches the real Hub or cache.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from engine.models.catalog import FileSpec

_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_CDN = re.compile(r"^/cdn/(?P<sha>[0-9a-f]{64})$")


@dataclass
class Logged:
    method: str
    path: str
    range: str | None
    status: int
    sent: int = 0  # body bytes written to the socket
    authorization: str | None = None


@dataclass
class Served:
    repo: str
    filename: str
    data: bytes
    sha256: str
    commit: str


@dataclass
class Failure:
    status: int
    code: str | None = None
    message: str | None = None


GATED_MESSAGE = (
    "Access to model {repo} is restricted. You must have access to it and be authenticated to access it. "
    "Please log in."
)


@dataclass
class FakeHub:
    host: str = "127.0.0.1"
    chunk: int = 16 * 1024
    delay: float = 0.0
    cut_after_bytes: int | None = None
    cuts: int = 1
    fail: dict[str, Failure] = field(default_factory=dict)  # "repo/filename", "repo" or "*"
    corrupt: bool = False
    ignore_range: bool = False
    cdn: bool = False
    files: dict[tuple[str, str], Served] = field(default_factory=dict)
    log: list[Logged] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # keep pytest output clean
                pass

            def do_HEAD(self):
                hub._handle(self, head=True)

            def do_GET(self):
                hub._handle(self, head=False)

        self.server = http.server.ThreadingHTTPServer((self.host, 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    # -- setup -----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def add(self, repo: str, filename: str, data: bytes | Path, commit: str | None = None) -> Served:
        raw = data.read_bytes() if isinstance(data, Path) else bytes(data)
        commit = commit or hashlib.sha1(repo.encode()).hexdigest()
        s = Served(repo, filename, raw, hashlib.sha256(raw).hexdigest(), commit)
        self.files[(repo, filename)] = s
        return s

    def spec(self, repo: str, filename: str, **overrides):
        """A FileSpec for a served file, pinned to its commit, with its real size and sha256."""

        s = self.files[(repo, filename)]
        kw = dict(repo=repo, filename=filename, revision=s.commit, bytes=len(s.data), sha256=s.sha256, mirrors=())
        kw.update(overrides)
        return FileSpec(**kw)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- inspection ------------------------------------------------------------------------
    def requests(self, method: str | None = None, filename: str | None = None) -> list[Logged]:
        with self._lock:
            out = list(self.log)
        return [r for r in out if (method is None or r.method == method) and (filename is None or r.path.endswith("/" + filename))]

    def body_bytes_sent(self, filename: str | None = None) -> int:
        return sum(r.sent for r in self.requests("GET", filename))

    # -- serving ---------------------------------------------------------------------------
    def _failure_for(self, repo: str, filename: str) -> Failure | None:
        return self.fail.get(f"{repo}/{filename}") or self.fail.get(repo) or self.fail.get("*")

    def _error(self, h, entry: Logged, status: int, code: str | None, message: str | None, head: bool) -> None:
        body = json.dumps({"error": message or code or "error"}).encode()
        h.send_response(status)
        if code:
            h.send_header("X-Error-Code", code)
        if message:
            h.send_header("X-Error-Message", message)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head:
            h.wfile.write(body)
        entry.status = status

    def _handle(self, h: http.server.BaseHTTPRequestHandler, head: bool) -> None:
        entry = Logged("HEAD" if head else "GET", h.path, h.headers.get("Range"), 0,
                       authorization=h.headers.get("Authorization"))
        with self._lock:
            self.log.append(entry)
        m = _RESOLVE.match(h.path)
        c = _CDN.match(h.path)
        served: Served | None = None
        if c:
            served = next((s for s in self.files.values() if s.sha256 == c["sha"]), None)
            if served is None:
                return self._error(h, entry, 404, None, "no such blob", head)
        elif m:
            repo, rev, filename = m["repo"], m["rev"], m["file"]
            failure = self._failure_for(repo, filename)
            if failure is not None:
                msg = failure.message
                if msg is None and failure.code == "GatedRepo":
                    msg = GATED_MESSAGE.format(repo=repo)
                return self._error(h, entry, failure.status, failure.code, msg, head)
            if not any(r == repo for r, _ in self.files):
                return self._error(h, entry, 401, "RepoNotFound", "Repository not found", head)
            served = self.files.get((repo, filename))
            commits = {s.commit for (r, _), s in self.files.items() if r == repo}
            if rev != "main" and rev not in commits:
                return self._error(h, entry, 404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
            if served is None:
                return self._error(h, entry, 404, "EntryNotFound", f"{filename} does not exist on {rev}", head)
            if self.cdn:
                h.send_response(302)
                h.send_header("Location", f"http://localhost:{self.port}/cdn/{served.sha256}")
                self._meta_headers(h, served)
                h.send_header("Content-Length", "0")
                h.end_headers()
                entry.status = 302
                return
        else:
            return self._error(h, entry, 404, None, "not a resolve url", head)
        self._send_file(h, entry, served, head)

    def _meta_headers(self, h, s: Served) -> None:
        h.send_header("X-Repo-Commit", s.commit)
        h.send_header("ETag", f'"{s.sha256}"')
        h.send_header("X-Linked-Etag", f'"{s.sha256}"')
        h.send_header("X-Linked-Size", str(len(s.data)))
        h.send_header("Accept-Ranges", "bytes")

    def _send_file(self, h, entry: Logged, s: Served, head: bool) -> None:
        data = s.data
        if self.corrupt:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        total = len(data)
        start, end = 0, total - 1
        status = 200
        rng = h.headers.get("Range")
        if rng and not self.ignore_range:
            mr = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
            if mr:
                start = int(mr[1])
                end = min(int(mr[2]), total - 1) if mr[2] else total - 1
                if start >= total:
                    h.send_response(416)
                    h.send_header("Content-Range", f"bytes */{total}")
                    h.send_header("Content-Length", "0")
                    h.end_headers()
                    entry.status = 416
                    return
                status = 206
        body = data[start : end + 1]
        h.send_response(status)
        self._meta_headers(h, s)
        h.send_header("Content-Type", "application/octet-stream")
        h.send_header("Content-Length", str(len(body)))
        if status == 206:
            h.send_header("Content-Range", f"bytes {start}-{end}/{total}")
        h.end_headers()
        entry.status = status
        if head:
            return
        cut = None
        with self._lock:
            if self.cut_after_bytes is not None and self.cuts > 0:
                cut = self.cut_after_bytes
                self.cuts -= 1
        pos = 0
        try:
            while pos < len(body):
                n = min(self.chunk, len(body) - pos)
                if cut is not None:
                    n = min(n, cut - pos)
                    if n <= 0:
                        h.wfile.flush()
                        h.connection.shutdown(socket.SHUT_RDWR)
                        h.close_connection = True
                        return
                h.wfile.write(body[pos : pos + n])
                pos += n
                entry.sent = pos
                if self.delay:
                    h.wfile.flush()
                    time.sleep(self.delay)
        except (BrokenPipeError, ConnectionResetError, OSError):
            h.close_connection = True


def isolate_hf(monkeypatch, tmp_path: Path, endpoint: str) -> None:
    """Point huggingface_hub at a temp cache and `endpoint`; no token, no telemetry lookup.

    huggingface_hub reads some settings at import time (offline mode, the token file, the
    endpoint used for its agent-registry fetch), so those module attributes are patched too.
    """
    import huggingface_hub.constants as hfc
    from huggingface_hub.utils import _detect_agent

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
                "TANDEM_PIP_ARGS", "TANDEM_CATALOG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setattr(hfc, "HF_HUB_OFFLINE", False)  # the environment may have set it at import time
    monkeypatch.setattr(hfc, "HF_TOKEN_PATH", str(tmp_path / "hf" / "token"))
    monkeypatch.setattr(hfc, "HF_STORED_TOKENS_PATH", str(tmp_path / "hf" / "stored_tokens"))
    monkeypatch.setattr(_detect_agent, "_registry", _detect_agent._EMPTY_REGISTRY)


def refuse_unlink(monkeypatch, path: Path) -> None:
    """Removing `path` fails as on a folder the user may not write (root ignores the mode bits)."""
    real_unlink = Path.unlink

    def unlink(self: Path, missing_ok: bool = False) -> None:
        if self == path:
            raise PermissionError(13, "Permission denied")
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)


@pytest.fixture
def fakehub(tmp_path, monkeypatch):
    """A running FakeHub; HF_HOME/HF_ENDPOINT point at a temp cache and the server."""
    hub = FakeHub()
    isolate_hf(monkeypatch, tmp_path, hub.url)
    yield hub
    hub.close()


def closed_port_url() -> str:
    """An http URL on 127.0.0.1 where nothing listens (connection refused: 'network down')."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


def write_tiny_catalog(tmp_path: Path, target: FileSpec, draft: FileSpec | None = None, mirror: str = "",
                       cpu_draft: FileSpec | None = None, projector: FileSpec | None = None) -> Path:
    """A catalog with one pair, "tiny", of these files (the draft defaults to the target);
    `mirror` is TOML appended to each file entry (a [[models."{mid}".files.mirrors]] table);
    `cpu_draft` is a published Q4_0 draft the pair prefers on CPU ("tiny-draft-q4_0");
    `projector` the target's vision projector (its own revision)."""
    draft = draft or target

    def model(mid: str, f: FileSpec, quant: str = "F32") -> str:
        mirrors = mirror.replace("{mid}", mid)  # not .format: package names carry their own {n}
        sees = "" if projector is None or mid != "tiny-target" else f"""
[models."{mid}".projector]
filename = "{projector.filename}"
revision = "{projector.revision}"
bytes = {projector.bytes}
sha256 = "{projector.sha256}"
"""
        return sees + f"""
[models."{mid}"]
title = "{mid}"
repo = "{f.repo}"
revision = "{f.revision}"
quant = "{quant}"
license = "mit"
context_length = 2048
tokenizer = "tiny"
params_b = 0.001
n_layers = 2
n_kv_heads = 2
head_dim = 16
[[models."{mid}".files]]
filename = "{f.filename}"
bytes = {f.bytes}
sha256 = "{f.sha256}"
{mirrors}
"""

    text = 'schema = 1\ndefault_pair = "tiny"\n' + model("tiny-target", target) + model("tiny-draft", draft) + """
[[pairs]]
id = "tiny"
title = "Tiny pair"
target = "tiny-target"
draft = "tiny-draft"
lookahead = 4
tags = ["code"]
note = "test"
"""
    if cpu_draft is not None:
        text += 'preferred_draft = { cpu = "tiny-draft-q4_0" }\n' + model("tiny-draft-q4_0", cpu_draft, "Q4_0")
    p = tmp_path / "models.toml"
    p.write_text(text)
    return p
