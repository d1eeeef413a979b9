"""Partial downloads in the cache: what the store reports of each catalog model (the Hub's
resumable `.incomplete`, a dead mirror run's leftover) and deleting them without touching a
complete blob, another model's file, or a file a download is writing."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.errors import StoreError
from engine.models import partial, store
from engine.models.catalog import FileSpec, ModelSpec, PairSpec
from fakehub import refuse_unlink


def _model(mid: str, repo: str, data: bytes) -> ModelSpec:
    f = FileSpec(repo, f"{mid}.gguf", "main", len(data), hashlib.sha256(data).hexdigest())
    return ModelSpec(id=mid, title=mid, repo=repo, revision="main", quant="F32", license="mit", context_length=2048,
                     tokenizer="tiny", params_b=0.001, n_layers=2, n_kv_heads=2, head_dim=16, files=(f,))


def _pair(target: ModelSpec, draft: ModelSpec) -> PairSpec:
    return PairSpec(id="p", title="P", target=target, draft=draft, lookahead=4, tags=(), note="")


def _blobs(m: ModelSpec) -> Path:
    b = store.repo_dir(m.repo) / "blobs"
    b.mkdir(parents=True, exist_ok=True)
    return b


def _hub_partial(m: ModelSpec, n: int) -> Path:
    p = _blobs(m) / f"{m.files[0].sha256}.incomplete"
    p.write_bytes(b"x" * n)
    return p


def _complete(m: ModelSpec, data: bytes) -> Path:
    p = _blobs(m) / m.files[0].sha256  # type: ignore[operator]
    p.write_bytes(data)
    return p


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)  # a process that has ended, like one killed with -9


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(var, raising=False)
    target_data, draft_data = os.urandom(30_000), os.urandom(10_000)
    # the two models share one repository, as several catalog models do
    return _model("t", "org/shared-GGUF", target_data), target_data, _model("d", "org/shared-GGUF", draft_data), draft_data


def test_no_partial_when_nothing_was_downloaded(cache):
    target, _, draft, _ = cache
    assert partial.model_partial(target) is None and partial.pair_partial(_pair(target, draft)) is None


def test_the_hubs_partial_is_reported_with_its_bytes_and_the_files_size(cache):
    target, _, draft, draft_data = cache
    _hub_partial(target, 12_000)
    pm = partial.model_partial(target)
    assert pm is not None and pm.resumable
    assert (pm.on_disk, pm.freeable, pm.model.bytes) == (12_000, 12_000, 30_000)
    assert pm.describe().startswith("12.0 KB of 30.0 KB downloaded")
    _complete(draft, draft_data)  # the draft is whole: it counts towards what the pair has on disk
    pp = partial.pair_partial(_pair(target, draft))
    assert pp is not None and pp.on_disk == 22_000 and pp.freeable == 12_000
    assert pp.word == "22.0 KB of 40.0 KB (partial)"
    assert pp.detail_of(draft) is None and "Resume" in (pp.detail_of(target) or "")


def test_a_dead_mirror_runs_file_counts_but_not_a_live_ones(cache):
    target, _, draft, _ = cache
    sha = target.files[0].sha256
    live = _blobs(target) / f"{sha}.{os.getpid()}.mirror.incomplete"  # a run still going: not a leftover
    live.write_bytes(b"l" * 500)
    assert partial.model_partial(target) is None
    dead = _blobs(target) / f"{sha}.{_dead_pid()}.mirror.incomplete"
    dead.write_bytes(b"m" * 7_000)
    pm = partial.model_partial(target)
    assert pm is not None and not pm.resumable and pm.freeable == 7_000 and pm.on_disk == 0
    assert "not resumable" in pm.describe()
    assert partial.pair_partial(_pair(target, draft)).word == "7.0 KB left by a cut download"  # type: ignore[union-attr]
    assert partial.delete_partial(target) == 7_000
    assert not dead.exists() and live.exists()


def test_a_hub_partial_beside_its_complete_file_is_the_hubs_and_not_needed(cache, tmp_path, monkeypatch, capsys):
    """The file was finished another way (the mirror, another tool): the Hub's partial is no
    mirror leftover, nothing resumes it, and it is reported as not needed."""
    from engine.cli.main import main
    from fakehub import write_tiny_catalog

    target, target_data, draft, _ = cache
    _complete(target, target_data)
    _hub_partial(target, 12_000)
    pm = partial.model_partial(target)
    assert pm is not None and not pm.resumable and (pm.stale, pm.cut, pm.freeable) == (12_000, 0, 12_000)
    assert pm.describe() == "12.0 KB of a Hub download whose file is complete now (not needed; Delete frees it)"
    assert "mirror" not in pm.describe()
    dead = _blobs(target) / f"{target.files[0].sha256}.{_dead_pid()}.mirror.incomplete"
    dead.write_bytes(b"m" * 3_000)  # both kinds: each named for what it is
    assert partial.model_partial(target).describe() == (  # type: ignore[union-attr]
        "3.0 KB left by a cut mirror download and 12.0 KB of a Hub download whose file is complete now "
        "(not resumable; Delete frees it)")
    dead.unlink()

    monkeypatch.setenv("TANDEM_CATALOG", str(write_tiny_catalog(tmp_path, target.files[0], draft.files[0])))
    assert main(["models"]) == 0  # the draft is missing, so the pair's partial files are listed
    out = capsys.readouterr().out
    assert "12.0 KB of a Hub download whose file is complete now: not needed" in out
    assert "mirror" not in out.split("Partial downloads")[1]


def test_delete_removes_only_the_models_partial_files(cache):
    target, target_data, draft, _ = cache
    hub = _hub_partial(target, 12_000)
    leftover = _blobs(target) / f"{target.files[0].sha256}.{_dead_pid()}.mirror.incomplete"
    leftover.write_bytes(b"m" * 3_000)
    other = _hub_partial(draft, 4_000)  # another model's partial in the same repository
    stranger = _blobs(target) / "0123.incomplete"  # a file no catalog model names
    stranger.write_bytes(b"s")
    assert partial.delete_partial(target) == 15_000
    assert not hub.exists() and not leftover.exists()
    assert other.exists() and stranger.exists()
    assert partial.model_partial(target) is None and partial.delete_partial(target) == 0

    blob = _complete(target, target_data)  # a whole file and a stale partial beside it: the blob stays
    _hub_partial(target, 100)
    assert partial.delete_partial(target) == 100 and blob.read_bytes() == target_data


def test_delete_is_refused_while_a_download_holds_the_files_lock(cache):
    from huggingface_hub.utils import WeakFileLock

    target, _, _, _ = cache
    hub = _hub_partial(target, 12_000)
    lock = store.lock_path(target.files[0], target.files[0].sha256 or "")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with WeakFileLock(lock):  # as download_from_hub holds it while it writes the partial
        with pytest.raises(StoreError, match="being downloaded right now"):
            partial.delete_partial(target)
    assert hub.stat().st_size == 12_000
    assert partial.delete_partial(target) == 12_000


def test_a_partial_that_cannot_be_removed_is_one_clear_error(cache, monkeypatch):
    target, _, _, _ = cache
    hub = _hub_partial(target, 12_000)
    refuse_unlink(monkeypatch, hub)
    with pytest.raises(StoreError, match=r"cannot delete .*\.incomplete: Permission denied"):
        partial.delete_partial(target)
    assert hub.stat().st_size == 12_000
