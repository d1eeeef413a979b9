"""packaging/deb.sh: a .deb of a bundle folder installs into a scratch root with `tandem` on
PATH, the desktop entry and the icon, runs, and removes cleanly, leaving models and history.

A small stand-in bundle (a script that prints its arguments) keeps this fast; the real
bundle's package is built and installed the same way by packaging/release_check.sh."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from bundle_stand_in import stand_in_bundle

ROOT = Path(__file__).resolve().parents[2]
DEB_SH = ROOT / "packaging" / "deb.sh"

pytestmark = pytest.mark.skipif(shutil.which("dpkg-deb") is None or shutil.which("dpkg") is None,
                                reason="dpkg-deb/dpkg not on this machine (Debian/Ubuntu only)")


def _dpkg_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "usr/bin"):
        (root / d).mkdir(parents=True)
    for f in ("status", "available"):
        (root / "var/lib/dpkg" / f).write_text("")
    return root


@pytest.fixture(scope="module")
def deb(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("deb")
    r = subprocess.run(["bash", str(DEB_SH), str(stand_in_bundle(tmp)), str(tmp / "out"), "1.2.3"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    path = Path(r.stdout.strip().splitlines()[-1])
    assert path.name.startswith("tandem_1.2.3_") and path.suffix == ".deb"
    return path


def test_the_package_holds_the_bundle_the_command_the_entry_and_the_icon(deb):
    fields = subprocess.run(["dpkg-deb", "--field", str(deb), "Package", "Version"], capture_output=True, text=True,
                            check=True).stdout
    assert "Package: tandem" in fields and "Version: 1.2.3" in fields
    listing = subprocess.run(["dpkg-deb", "--contents", str(deb)], capture_output=True, text=True, check=True).stdout
    for path in ("./opt/tandem/tandem", "./opt/tandem/_internal/lib.txt", "./usr/bin/tandem",
                 "./usr/share/applications/tandem.desktop", "./usr/share/icons/hicolor/256x256/apps/tandem.png"):
        assert path in listing, path
    assert "root/root" in listing  # owned by root, whoever built it


@pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="dpkg --root installs as root only")
def test_install_run_and_purge_in_a_scratch_root_keeps_models_and_history(deb, tmp_path):
    root = _dpkg_root(tmp_path)
    # the package's Depends (GL, fontconfig) are the host's business, not this empty root's
    r = subprocess.run(["dpkg", f"--root={root}", "--force-depends", "--force-not-root", "-i", str(deb)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    tandem = root / "usr" / "bin" / "tandem"
    assert (root / "usr/share/applications/tandem.desktop").read_text().count("Exec=tandem app") == 1

    def run(*args: str) -> str:
        out = subprocess.run([str(tandem), *args], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert run("--self-test", "m.gguf") == "bundle args: --self-test m.gguf"
    assert run("doctor") == "bundle args: cli doctor"
    assert run("app", "--pair", "p") == "bundle args: --pair p"
    assert run() == "bundle args:"

    models = root / "home/u/.cache/huggingface/hub/models--x/blobs/abc"
    history = root / "home/u/.local/share/tandem/history.sqlite3"
    for f in (models, history):
        f.parent.mkdir(parents=True)
        f.write_bytes(b"keep me")
    r = subprocess.run(["dpkg", f"--root={root}", "--force-not-root", "--purge", "tandem"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (root / "opt" / "tandem").exists() and not tandem.exists()
    assert not (root / "usr/share/applications/tandem.desktop").exists()
    assert models.read_bytes() == history.read_bytes() == b"keep me"


def test_a_folder_without_a_bundle_is_one_line(tmp_path):
    r = subprocess.run(["bash", str(DEB_SH), str(tmp_path), str(tmp_path / "out")], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"deb.sh: {tmp_path}/tandem is not a bundle's executable (build one: make package)"]
    assert not (tmp_path / "out").exists()
