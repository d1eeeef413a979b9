"""Downloads from a fake Hub: progress, cancel, resume, sha256, disk space, errors, offline,
the remote header check, and the `pull`/`check` commands."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
import sys
import threading
import time
from collections import namedtuple
from pathlib import Path

import pytest

from engine.models import download, remote_header as remote, store
from engine.models.catalog import FileSpec
from engine.errors import Cancelled, StoreError
from fakehub import Failure, closed_port_url, fakehub, write_tiny_catalog  # noqa: F401  (fixture)

REPO = "tiny-org/tiny-target-GGUF"
FILE = "tiny-target-f32.gguf"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def served(fakehub, tiny_target):
    """The tiny target GGUF on the fake Hub, and its FileSpec (real size and sha256)."""
    fakehub.add(REPO, FILE, tiny_target)
    return fakehub.spec(REPO, FILE)


@pytest.fixture
def small_chunks(monkeypatch):
    """Read the body in 8 KiB pieces so a ~0.5 MB file gives many progress/cancel points."""
    monkeypatch.setattr(download, "TRANSFER_CHUNK", 8 * 1024)
    monkeypatch.setattr(download, "RETRY_WAIT", 0.0)


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _nothing_usable(spec: FileSpec) -> None:
    assert store.find_file(spec) is None
    assert not store.blob_path(spec).exists()
    assert not store.snapshot_path(spec).exists()


# -- the happy path ---------------------------------------------------------------------------
def test_progress_rises_to_100_and_file_lands_in_hf_layout(fakehub, served, small_chunks):
    fakehub.delay = 0.01
    fakehub.chunk = 8 * 1024
    events = []
    path = download.download_from_hub(served, progress=events.append)

    downloads = [e for e in events if e.phase == "download"]
    assert len(downloads) >= 3
    done = [e.done for e in downloads]
    assert done == sorted(done), "progress must never go backwards"
    assert downloads[-1].done == downloads[-1].total == served.bytes
    assert downloads[-1].fraction == 1.0
    assert any(e.bytes_per_s > 0 for e in downloads)
    assert any(e.eta_s is not None and e.eta_s > 0 for e in downloads[:-1])

    blob = store.repo_dir(REPO) / "blobs" / served.sha256
    assert path == store.repo_dir(REPO) / "snapshots" / served.revision / FILE
    assert path.is_symlink() and path.resolve() == blob.resolve()
    assert _sha(path) == served.sha256
    assert not list(blob.parent.glob("*.incomplete"))
    assert store.find_file(served) == path
    assert store.is_verified(path, served.sha256)
    # one HEAD for the metadata, one GET for the bytes
    assert [r.method for r in fakehub.requests(filename=FILE)] == ["HEAD", "GET"]


def test_huggingface_hub_sees_our_download_and_we_reuse_its(fakehub, served, tiny_draft):
    """Same cache layout both ways: no second download by either tool."""
    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    ours = download.download_from_hub(served)
    theirs = try_to_load_from_cache(REPO, FILE, cache_dir=str(store.hub_cache()), revision=served.revision)
    assert theirs is not None and Path(theirs).resolve() == ours.resolve()

    fakehub.add(REPO, "draft.gguf", tiny_draft, commit=served.revision)
    spec = fakehub.spec(REPO, "draft.gguf")
    p = hf_hub_download(REPO, "draft.gguf", revision=spec.revision, cache_dir=str(store.hub_cache()),
                        endpoint=fakehub.url)
    fakehub.log.clear()
    got = download.obtain(spec)
    assert got.resolve() == Path(p).resolve()
    assert fakehub.log == [], "a file huggingface_hub downloaded must be reused without any request"


def test_branch_revision_records_ref(fakehub, served):
    spec = fakehub.spec(REPO, FILE, revision="main")
    path = download.download_from_hub(spec)
    assert (store.repo_dir(REPO) / "refs" / "main").read_text() == served.revision
    assert path.parent.name == served.revision


def test_pinned_revision_gone_falls_back_to_main(fakehub, served):
    spec = fakehub.spec(REPO, FILE, revision="0" * 40)
    path = download.download_from_hub(spec)
    assert _sha(path) == served.sha256
    heads = fakehub.requests("HEAD")
    assert heads[0].path.split("/")[4] == "0" * 40 and heads[0].status == 404
    assert heads[1].path.split("/")[4] == "main"


def test_cdn_redirect_location_is_used_without_the_token(fakehub, served, monkeypatch):
    fakehub.cdn = True
    monkeypatch.setenv("HF_TOKEN", "hf_secret_for_the_hub_only")
    path = download.download_from_hub(served)
    assert _sha(path) == served.sha256
    head = fakehub.requests("HEAD")[0]
    get = fakehub.requests("GET")[-1]
    assert head.authorization == "Bearer hf_secret_for_the_hub_only"
    assert get.path.startswith("/cdn/") and get.authorization is None


# -- cancel and resume ------------------------------------------------------------------------
def test_cancel_leaves_nothing_usable_and_resume_continues(fakehub, served, small_chunks):
    fakehub.delay = 0.005
    fakehub.chunk = 8 * 1024
    cancel = threading.Event()

    def progress(p):
        if p.phase == "download" and p.done >= 100_000:
            cancel.set()

    with pytest.raises(Cancelled, match="cancelled"):
        download.download_from_hub(served, progress=progress, cancel=cancel)
    _nothing_usable(served)
    part = store.repo_dir(REPO) / "blobs" / f"{served.sha256}.incomplete"
    kept = part.stat().st_size
    assert 100_000 <= kept < served.bytes

    fakehub.delay = 0
    path = download.obtain(served)
    assert _sha(path) == served.sha256
    last = fakehub.requests("GET")[-1]
    assert last.range == f"bytes={kept}-" and last.status == 206
    assert last.sent == served.bytes - kept


def test_resume_after_cut_continues_from_the_partial(fakehub, served, small_chunks):
    fakehub.cut_after_bytes = 200_000
    with pytest.raises(download.DownloadInterrupted, match="run the same command again to resume"):
        download.download_from_hub(served, retries=0)
    _nothing_usable(served)
    part = store.repo_dir(REPO) / "blobs" / f"{served.sha256}.incomplete"
    kept = part.stat().st_size
    assert 0 < kept <= 200_000
    assert fakehub.requests("GET")[0].sent == 200_000

    path = download.download_from_hub(served, retries=0)
    assert _sha(path) == served.sha256
    gets = fakehub.requests("GET")
    assert len(gets) == 2
    assert gets[1].range == f"bytes={kept}-" and gets[1].status == 206
    assert gets[1].sent == served.bytes - kept, "only the missing bytes are fetched again"
    assert not part.exists()


def test_cut_is_retried_in_process(fakehub, served, small_chunks):
    fakehub.cut_after_bytes = 150_000
    fakehub.cuts = 2
    path = download.download_from_hub(served, retries=2)
    assert _sha(path) == served.sha256
    gets = fakehub.requests("GET")
    assert len(gets) == 3
    assert gets[0].range is None and gets[1].range and gets[2].range
    assert sum(g.sent for g in gets) < served.bytes + 2 * 150_000


def test_resume_across_a_process_restart(fakehub, served, tmp_path):
    """`tandem pull` killed mid-download (SIGKILL: no cleanup); a new process continues the partial."""
    fakehub.delay = 0.05
    fakehub.chunk = 16 * 1024
    catalog = write_tiny_catalog(tmp_path, served)
    env = {**os.environ, "TANDEM_CATALOG": str(catalog), "HF_ENDPOINT": fakehub.url, "HF_HUB_DISABLE_TELEMETRY": "1"}
    env.pop("HF_HUB_OFFLINE", None)
    cmd = [sys.executable, "-m", "engine.cli", "pull", "tiny-target", "--source", "hub"]
    part = store.repo_dir(REPO) / "blobs" / f"{served.sha256}.incomplete"
    first = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (part.exists() and part.stat().st_size > 0):
            assert first.poll() is None, "the first process ended before it could be interrupted"
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        first.kill()
        first.wait()
    kept = part.stat().st_size
    assert 0 < kept < served.bytes
    _nothing_usable(served)

    fakehub.delay = 0
    second = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert second.returncode == 0, second.stderr
    gets = fakehub.requests("GET")
    assert len(gets) == 2
    assert gets[1].range == f"bytes={kept}-" and gets[1].status == 206
    assert gets[1].sent == served.bytes - kept
    assert store.find_file(served, verify=True) is not None


def test_server_ignoring_range_starts_over_cleanly(fakehub, served, small_chunks):
    fakehub.cut_after_bytes = 100_000
    with pytest.raises(download.DownloadInterrupted):
        download.download_from_hub(served, retries=0)
    fakehub.ignore_range = True
    path = download.download_from_hub(served, retries=0)
    assert _sha(path) == served.sha256
    assert fakehub.requests("GET")[-1].status == 200


def test_a_download_in_progress_elsewhere_is_not_joined(fakehub, served):
    """huggingface_hub's own lock file for the blob: two writers never append to one partial."""
    from filelock import FileLock

    lock = store.lock_path(served, served.sha256)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock)):
        with pytest.raises(StoreError, match="another process is downloading"):
            download.download_from_hub(served)
    assert fakehub.requests("GET") == []
    assert _sha(download.download_from_hub(served)) == served.sha256


# -- integrity --------------------------------------------------------------------------------
def test_sha256_mismatch_is_rejected_and_discarded(fakehub, served):
    fakehub.corrupt = True  # right size and advertised sha256, wrong bytes
    with pytest.raises(StoreError, match="sha256 mismatch.*discarded"):
        download.download_from_hub(served)
    _nothing_usable(served)
    assert not list((store.repo_dir(REPO) / "blobs").glob("*.incomplete"))


def test_hub_file_differing_from_catalog_is_refused_before_download(fakehub, served):
    wrong = fakehub.spec(REPO, FILE, sha256="ab" * 32)
    with pytest.raises(StoreError, match="changed upstream.*nothing was downloaded"):
        download.download_from_hub(wrong)
    assert fakehub.requests("GET") == []
    bad_size = fakehub.spec(REPO, FILE, bytes=served.bytes + 1)
    with pytest.raises(StoreError, match="serves .* bytes but the catalog expects"):
        download.download_from_hub(bad_size)
    assert fakehub.requests("GET") == []


def test_corrupt_cached_copy_is_discarded_and_fetched_again(fakehub, served):
    path = download.download_from_hub(served)
    blob = path.resolve()
    blob.chmod(0o644)
    data = bytearray(blob.read_bytes())
    data[-1] ^= 0xFF
    blob.write_bytes(bytes(data))
    os.utime(blob, (1, 1))  # a different mtime: the "verified" record no longer applies
    events = []
    again = download.obtain(served, progress=events.append)
    assert _sha(again) == served.sha256
    notices = [e.message for e in events if e.phase == "notice"]
    assert notices and "sha256 mismatch" in notices[0] and "discarded" in notices[0]
    assert len(fakehub.requests("GET")) == 2


def test_full_disk_is_refused_before_any_request(fakehub, served, monkeypatch):
    Usage = namedtuple("Usage", "total used free")
    monkeypatch.setattr(store.shutil, "disk_usage", lambda p: Usage(10**12, 10**12 - 1000, 1000))
    with pytest.raises(StoreError, match="not enough disk space"):
        download.obtain(served)
    assert fakehub.log == [], "no request may be made when the file cannot fit"
    _nothing_usable(served)


# -- errors -----------------------------------------------------------------------------------
@pytest.mark.parametrize("status", [401, 403])
def test_gated_repo_says_how_to_get_access(fakehub, served, status):
    fakehub.fail[REPO] = Failure(status, "GatedRepo")
    with pytest.raises(StoreError) as e:
        download.obtain(served)
    msg = str(e.value)
    assert "gated" in msg and "hf auth login" in msg and f"{fakehub.url}/{REPO}" in msg
    assert type(e.value) is StoreError  # not "unreachable": no mirror fallback for a permission problem
    assert fakehub.requests("GET") == []


def test_missing_file_404(fakehub, served):
    spec = dataclasses.replace(served, filename="nope.gguf")
    with pytest.raises(StoreError, match=r"nope.gguf: file not found .*\(404\)"):
        download.obtain(spec)


def test_missing_repo(fakehub, served):
    spec = dataclasses.replace(served, repo="nobody/nothing")
    with pytest.raises(StoreError, match="repository not found.*hf auth login"):
        download.obtain(spec)
    assert not store.repo_dir("nobody/nothing").exists(), "a failed download leaves no empty repo folder"


def test_server_error_counts_as_unreachable(fakehub, served):
    fakehub.fail["*"] = Failure(503)
    with pytest.raises(download.HubUnreachable, match="503"):
        download.obtain(served)


def test_network_down(fakehub, served, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", closed_port_url())
    with pytest.raises(download.HubUnreachable, match="cannot reach"):
        download.obtain(served)
    _nothing_usable(served)


def test_unknown_source_is_an_error(served):
    with pytest.raises(StoreError, match="unknown source"):
        download.obtain(served, source="ftp")


# -- offline mode -----------------------------------------------------------------------------
def test_offline_uses_what_is_present_without_any_request(fakehub, served, monkeypatch):
    path = download.obtain(served)
    fakehub.log.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert download.obtain(served) == path
    assert fakehub.log == []


def test_offline_and_absent_is_a_clear_error(fakehub, served, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(download.HubUnreachable, match="offline mode is on.*HF_HUB_OFFLINE") as e:
        download.obtain(served)
    assert str(store.hub_cache()) in str(e.value) and "unset it" in str(e.value)
    assert fakehub.log == []


# -- remote header check ----------------------------------------------------------------------
def test_remote_header_reads_only_the_header_with_growing_ranges(fakehub, tiny_target):
    from engine.models.gguf_header import read_header

    fakehub.add(REPO, FILE, tiny_target)
    r = remote.read_remote_header(REPO, FILE, first=4096)
    local = read_header(tiny_target, with_tensors=False)
    assert r.header.metadata == local.metadata
    size = tiny_target.stat().st_size
    assert r.file_size == size
    assert r.bytes_read < size // 4, "only the header, never the tensors"
    gets = fakehub.requests("GET")
    assert len(gets) == r.requests >= 2
    assert gets[0].range == "bytes=0-4095"
    assert gets[1].range == "bytes=4096-12287"  # the next range is twice as large
    assert r.bytes_read == sum(g.sent for g in gets)


def test_remote_header_errors(fakehub, tiny_target, monkeypatch):
    fakehub.add(REPO, FILE, tiny_target)
    fakehub.add(REPO, "notgguf.gguf", b"PK\x03\x04" + b"\0" * 100)
    from engine.errors import ModelFileError

    with pytest.raises(ModelFileError, match="not a GGUF file"):
        remote.read_remote_header(REPO, "notgguf.gguf")
    with pytest.raises(StoreError, match="not found"):
        remote.read_remote_header(REPO, "missing.gguf")
    fakehub.fail[REPO] = Failure(403, "GatedRepo")
    with pytest.raises(StoreError, match="gated"):
        remote.read_remote_header(REPO, FILE)


def test_parse_remote_spec():
    assert remote.parse_remote_spec("Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf") == (
        "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "main")
    assert remote.parse_remote_spec("org/name/sub/x.gguf@abc123") == ("org/name", "sub/x.gguf", "abc123")
    assert remote.parse_remote_spec("x.gguf") is None
    assert remote.parse_remote_spec("org/x.gguf") is None


def test_check_command_remote_pair(fakehub, tiny_target, tiny_draft, other_vocab_model, no_byte_fallback, capsys):
    from engine.cli.main import main

    fakehub.add("org/target", "t.gguf", tiny_target)
    fakehub.add("org/draft", "d.gguf", tiny_draft)
    fakehub.add("org/other", "o.gguf", other_vocab_model)
    fakehub.add("org/nobytes", "n.gguf", no_byte_fallback)

    assert main(["check", "org/target/t.gguf", "org/draft/d.gguf"]) == 0
    out = capsys.readouterr().out
    assert "compatible: the draft can speculate" in out
    assert "range request" in out and "header only" in out
    assert "vocabulary" in out and "llama" in out

    assert main(["check", "org/target/t.gguf", "org/other/o.gguf"]) == 0
    out = capsys.readouterr().out
    assert "bridged (text)" in out and "token 300 differs" in out and "tokenisation" in out

    assert main(["check", "org/target/t.gguf", "org/nobytes/n.gguf"]) == 1
    out = capsys.readouterr().out
    assert "incompatible" in out and "no byte fallback" in out

    # mixed: a local target and a remote draft
    assert main(["check", str(tiny_target), "org/draft/d.gguf"]) == 0
    assert "(local" in capsys.readouterr().out

    assert main(["check", "org/target/t.gguf", "org/draft/missing.gguf"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tandem: error:") and "not found" in err and len(err.strip().splitlines()) == 1
    assert main(["check", "nonsense", "org/draft/d.gguf"]) == 2
    assert "no such file" in capsys.readouterr().err


# -- the pull command -------------------------------------------------------------------------


def test_pull_and_models_commands(fakehub, served, tiny_draft, tmp_path, monkeypatch, capsys):
    from engine.cli.main import main

    fakehub.add("tiny-org/tiny-draft-GGUF", "d.gguf", tiny_draft)
    dspec = fakehub.spec("tiny-org/tiny-draft-GGUF", "d.gguf")
    monkeypatch.setenv("TANDEM_CATALOG", str(write_tiny_catalog(tmp_path, served, dspec)))

    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "*tiny" in out and "not downloaded" in out
    assert "tok/s expected" in out and "Expected speed: target alone, an estimate" in out  # as the app's fit column

    assert main(["pull", "tiny-target", "--source", "hub"]) == 0
    err = capsys.readouterr().err
    assert "100.0%" in err and "tiny-target:" in err
    assert main(["models"]) == 0
    assert "target only" in capsys.readouterr().out

    assert main(["pull"]) == 0  # the default pair: only the draft is fetched now
    assert "pair tiny is ready" in capsys.readouterr().err
    assert len(fakehub.requests("GET")) == 2
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "ready" in out and "target only" not in out

    assert main(["pull", "no-such-pair"]) == 2
    assert "neither a pair nor a model" in capsys.readouterr().err


def test_models_says_draft_only(fakehub, served, tiny_draft, tmp_path, monkeypatch, capsys):
    from engine.cli.main import main

    fakehub.add("tiny-org/tiny-draft-GGUF", "d.gguf", tiny_draft)
    dspec = fakehub.spec("tiny-org/tiny-draft-GGUF", "d.gguf")
    monkeypatch.setenv("TANDEM_CATALOG", str(write_tiny_catalog(tmp_path, served, dspec)))
    download.obtain(dspec)
    assert main(["models"]) == 0
    assert "draft only" in capsys.readouterr().out


def test_pull_ctrl_c_keeps_the_partial_and_the_next_pull_resumes(fakehub, served, tmp_path, monkeypatch,
                                                                  capsys, small_chunks):
    from engine.cli import models as cli_models
    from engine.cli.main import main

    fakehub.delay = 0.005
    fakehub.chunk = 8 * 1024
    monkeypatch.setenv("TANDEM_CATALOG", str(write_tiny_catalog(tmp_path, served)))

    class InterruptingBar(cli_models.ProgressBar):
        def __call__(self, p):
            super().__call__(p)
            if p.phase == "download" and p.done >= 120_000:
                raise KeyboardInterrupt  # what Ctrl+C does in the middle of the transfer

    monkeypatch.setattr(cli_models, "ProgressBar", InterruptingBar)
    assert main(["pull", "tiny-target", "--source", "hub"]) == 130
    assert "run the same command again to resume" in capsys.readouterr().err
    _nothing_usable(served)
    kept = (store.repo_dir(REPO) / "blobs" / f"{served.sha256}.incomplete").stat().st_size
    assert kept >= 120_000

    monkeypatch.setattr(cli_models, "ProgressBar", InterruptingBar.__mro__[1])
    fakehub.delay = 0
    assert main(["pull", "tiny-target", "--source", "hub"]) == 0
    last = fakehub.requests("GET")[-1]
    assert last.range == f"bytes={kept}-" and last.sent == served.bytes - kept
    assert store.find_file(served, verify=True) is not None


def test_check_catalog_ids_reads_remote_headers_when_not_downloaded(fakehub, served, tiny_draft, tmp_path,
                                                                   monkeypatch, capsys):
    from engine.cli.main import main

    fakehub.add("tiny-org/tiny-draft-GGUF", "d.gguf", tiny_draft)
    dspec = fakehub.spec("tiny-org/tiny-draft-GGUF", "d.gguf")
    monkeypatch.setenv("TANDEM_CATALOG", str(write_tiny_catalog(tmp_path, served, dspec)))
    assert main(["check", "tiny-target", "tiny-draft"]) == 0
    out = capsys.readouterr().out
    assert out.count("remote: header only") == 2 and "compatible" in out
    assert all(g.range and g.range.startswith("bytes=0-") for g in fakehub.requests("GET"))
    assert store.find_file(served) is None, "checking downloads nothing"

    download.obtain(served)
    fakehub.log.clear()
    assert main(["check", "tiny-target", "tiny-draft"]) == 0
    out = capsys.readouterr().out
    assert "tiny-target (downloaded:" in out
    assert [r.path for r in fakehub.requests("GET")] == [f"/tiny-org/tiny-draft-GGUF/resolve/{dspec.revision}/d.gguf"]


def test_progress_bar_on_a_terminal_and_on_a_pipe():
    import io

    from engine.cli.models import ProgressBar
    from engine.models.store import Progress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    bar = ProgressBar(tty)
    bar(Progress("m.gguf", 0, 4_000_000, 0.0, None))
    time.sleep(0.11)
    bar(Progress("m.gguf", 1_000_000, 4_000_000, 2_000_000.0, 1.5))
    bar(Progress("m.gguf", 0, 0, phase="notice", message="something happened"))
    bar(Progress("m.gguf", 4_000_000, 4_000_000, 2_000_000.0, 0.0))
    text = tty.getvalue()
    assert "\r" in text and "25.0%" in text and "2.0 MB/s" in text and "ETA 2s" in text
    assert "\nnote: something happened\n" in text
    assert text.endswith("\n") and "100.0%" in text

    pipe = io.StringIO()
    bar = ProgressBar(pipe)
    for done in range(0, 4_000_001, 100_000):
        bar(Progress("m.gguf", done, 4_000_000, 1e6, 1.0))
    lines = pipe.getvalue().splitlines()
    assert "\r" not in pipe.getvalue()
    assert len(lines) == 11 and lines[-1].count("100.0%") == 1  # one line per 10%
