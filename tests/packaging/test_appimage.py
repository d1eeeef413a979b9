"""packaging/appimage.sh: the AppDir (AppRun, desktop entry, icon, the bundle) in a squashfs,
appended to the AppImage runtime; without the runtime, one line says what is missing and where
it comes from.

A stand-in bundle (a script that prints its arguments) keeps this fast. The real AppImage of
the real bundle needs the runtime, which no package registry ships: the last test builds and
runs it when TANDEM_APPIMAGE_RUNTIME names one (a release check, not CI)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from bundle_stand_in import stand_in_bundle

ROOT = Path(__file__).resolve().parents[2]
APPIMAGE_SH = ROOT / "packaging" / "appimage.sh"
ARCH = os.uname().machine if hasattr(os, "uname") else "x86_64"

pytestmark = pytest.mark.skipif(shutil.which("mksquashfs") is None or shutil.which("unsquashfs") is None,
                                reason="squashfs-tools not on this machine (apt-get install squashfs-tools)")


def _build(tmp: Path, bundle: Path, runtime: Path | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "APPIMAGE_RUNTIME"}
    env["XDG_CACHE_HOME"] = str(tmp / "cache")  # no runtime cached there
    if runtime is not None:
        env["APPIMAGE_RUNTIME"] = str(runtime)
    return subprocess.run(["bash", str(APPIMAGE_SH), str(bundle), str(tmp / "out")], capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.fixture(scope="module")
def without_runtime(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("appimage")
    r = _build(tmp, stand_in_bundle(tmp), None)
    root = tmp / "extracted"
    subprocess.run(["unsquashfs", "-q", "-d", str(root), str(tmp / "out" / f"Tandem-{ARCH}.squashfs")],
                   check=True, capture_output=True, timeout=60)
    return r, root


def test_without_the_runtime_it_says_in_one_line_what_is_missing_and_where_from(without_runtime):
    r, _ = without_runtime
    assert r.returncode == 3
    line = r.stderr.strip()
    assert "\n" not in line
    assert f"the AppImage runtime (runtime-{ARCH}) is not here" in line
    assert "github.com/AppImage/type2-runtime" in line and "APPIMAGE_RUNTIME=" in line


def test_the_appdir_has_apprun_the_entry_the_icon_and_the_bundle(without_runtime):
    _, root = without_runtime
    assert os.access(root / "AppRun", os.X_OK)
    entry = (root / "tandem.desktop").read_text()
    assert "\nExec=tandem\n" in entry and "\nIcon=tandem\n" in entry and "\nType=Application\n" in entry
    assert (root / "usr/share/applications/tandem.desktop").read_text() == entry
    png = (ROOT / "assets" / "tandem.png").read_bytes()
    assert (root / "tandem.png").read_bytes() == png and os.readlink(root / ".DirIcon") == "tandem.png"
    assert (root / "usr/share/icons/hicolor/256x256/apps/tandem.png").read_bytes() == png
    assert (root / "usr/lib/tandem/_internal/lib.txt").read_text() == "a bundled library\n"
    if shutil.which("desktop-file-validate"):
        v = subprocess.run(["desktop-file-validate", str(root / "tandem.desktop")], capture_output=True, text=True)
        assert v.returncode == 0, v.stdout + v.stderr


@pytest.mark.parametrize("args, reaches", [
    ([], ""), (["app"], ""), (["--self-test", "m.gguf"], "--self-test m.gguf"), (["doctor"], "cli doctor"),
    (["models", "--json"], "cli models --json"),
])
def test_apprun_gives_the_commands_of_the_debs_tandem(without_runtime, args, reaches):
    _, root = without_runtime
    r = subprocess.run([str(root / "AppRun"), *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.strip() == f"bundle args: {reaches}".strip(), r.stdout + r.stderr


def test_a_file_that_is_no_appimage_runtime_is_refused(tmp_path):
    r = _build(tmp_path, stand_in_bundle(tmp_path), Path(shutil.which("true") or "/bin/true"))
    assert r.returncode == 2 and "is not an AppImage type-2 runtime" in r.stderr
    assert not (tmp_path / "out").exists()


def test_with_a_runtime_the_image_is_the_runtime_then_the_squashfs(tmp_path):
    """A stand-in runtime: /bin/true with the AppImage magic in its ELF padding (which the
    loader ignores), so the result runs; only the assembly is checked here."""
    elf = bytearray(Path(shutil.which("true") or "/bin/true").read_bytes())
    elf[8:11] = b"AI\x02"
    runtime = tmp_path / f"runtime-{ARCH}"
    runtime.write_bytes(bytes(elf))
    r = _build(tmp_path, stand_in_bundle(tmp_path), runtime)
    assert r.returncode == 0, r.stderr
    image = Path(r.stdout.strip().splitlines()[-1])
    assert image == tmp_path / "out" / f"Tandem-{ARCH}.AppImage" and os.access(image, os.X_OK)
    data = image.read_bytes()
    assert data[: len(elf)] == bytes(elf) and data[len(elf): len(elf) + 4] == b"hsqs"  # squashfs magic
    assert not list((tmp_path / "out").glob("*.squashfs")), "the squashfs is inside the image, not beside it"
    assert subprocess.run([str(image)], timeout=30).returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("TANDEM_APPIMAGE_RUNTIME"), reason="TANDEM_APPIMAGE_RUNTIME names no AppImage "
                    "runtime (release check: the runtime comes only from github.com/AppImage/type2-runtime)")
@pytest.mark.skipif(not (ROOT / "dist" / "tandem" / "tandem").exists(), reason="no bundle in dist/tandem (make package)")
def test_the_real_appimage_runs_its_self_test(tmp_path):
    env = dict(os.environ, APPIMAGE_RUNTIME=os.environ["TANDEM_APPIMAGE_RUNTIME"])
    r = subprocess.run(["bash", str(APPIMAGE_SH), str(ROOT / "dist" / "tandem"), str(tmp_path)], capture_output=True,
                       text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stderr
    image = r.stdout.strip().splitlines()[-1]
    env["QT_QPA_PLATFORM"] = "offscreen"
    run = subprocess.run([image, "--appimage-extract-and-run", "--self-test"], capture_output=True, text=True,
                         timeout=600, env=env)
    assert run.returncode == 0 and "self-test: ok" in run.stdout, run.stdout + run.stderr
