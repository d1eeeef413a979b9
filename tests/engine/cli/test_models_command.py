"""`tandem models` shows a download that stopped part-way as the app's Models page does: the
row's bytes on disk of the pair's size, and per model whether `tandem pull` resumes it."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

from engine.cli.main import main
from engine.models import catalog, partial, store
from engine.models.catalog import FileSpec
from fakehub import write_tiny_catalog


def _spec(repo: str, name: str, size: int) -> FileSpec:
    data = os.urandom(size)
    return FileSpec(repo, name, "main", size, hashlib.sha256(data).hexdigest())


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)  # a process that has ended, like a mirror run killed with -9


def _leave(f: FileSpec, suffix: str, n: int) -> None:
    blobs = store.repo_dir(f.repo) / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    (blobs / f"{f.sha256}{suffix}").write_bytes(b"x" * n)


def test_models_shows_a_partial_download_with_its_bytes_and_whether_pull_resumes_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(var, raising=False)
    target, draft = _spec("org/t-GGUF", "t.gguf", 40_000), _spec("org/d-GGUF", "d.gguf", 10_000)
    monkeypatch.setenv("TANDEM_CATALOG", str(write_tiny_catalog(tmp_path, target, draft)))
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "not downloaded" in out and "Partial downloads" not in out

    _leave(target, ".incomplete", 12_000)  # a cancelled Hub download: the next pull continues it
    _leave(draft, f".{_dead_pid()}.mirror.incomplete", 3_000)  # a killed mirror run: nothing continues it
    pp = partial.pair_partial(catalog.load().pair("tiny"))
    assert pp is not None and pp.word == "12.0 KB of 50.0 KB (partial)"
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("*tiny "))
    assert row.endswith("12.0 KB of 50.0 KB (partial)") and "not downloaded" not in out, out
    assert "  tiny tiny-target: 12.0 KB of 40.0 KB on disk, resumable: `tandem pull tiny` continues it\n" in out
    assert ("  tiny tiny-draft: 3.0 KB left by a cut mirror download, not resumable: "
            "`tandem pull tiny` removes it and starts over\n") in out

    (store.repo_dir(target.repo) / "blobs" / f"{target.sha256}.incomplete").unlink()
    assert main(["models"]) == 0  # only the dead mirror run's file is left: no bytes of the total count
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("*tiny "))
    assert row.endswith("3.0 KB left by a cut download"), row
