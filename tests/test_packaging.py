"""The PyInstaller bundle builds and passes its own --self-test (slow: a few minutes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def test_desktop_entry_and_icon_exist():
    entry = (ROOT / "assets" / "tandem.desktop").read_text()
    assert "Exec=tandem app" in entry and "Icon=tandem" in entry
    assert (ROOT / "assets" / "tandem.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (ROOT / "assets" / "tandem.svg").read_text()


def test_self_test_from_source():
    r = subprocess.run([sys.executable, "-m", "app", "--self-test"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "self-test: ok" in r.stdout


def test_tandem_app_passes_its_options_to_the_app(capsys):
    from engine.cli import main as cli

    assert cli(["app", "--self-test"]) == 0  # the option reaches the app's parser
    assert "self-test: ok" in capsys.readouterr().out


@pytest.mark.skipif(os.environ.get("TANDEM_SKIP_BUNDLE") == "1", reason="TANDEM_SKIP_BUNDLE=1")
def test_bundle_builds_and_passes_its_self_test(tmp_path):
    pytest.importorskip("PyInstaller")
    dist, work = tmp_path / "dist", tmp_path / "build"
    r = subprocess.run(
        [sys.executable, "-m", "PyInstaller", str(ROOT / "packaging" / "tandem.spec"), "--noconfirm",
         "--distpath", str(dist), "--workpath", str(work), "--log-level", "WARN"],
        capture_output=True, text=True, timeout=1500, cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    exe = dist / "tandem" / ("tandem.exe" if os.name == "nt" else "tandem")
    assert exe.exists()
    assert any((dist / "tandem" / "_internal" / "llama_cpp" / "lib").glob("libllama*")), "llama.cpp libraries not bundled"
    data = dist / "tandem" / "_internal" / "engine" / "data"  # where engine/resources.py looks outside a checkout
    assert (data / "models.toml").read_bytes() == (ROOT / "models.toml").read_bytes()
    def files(d):
        return sorted(p.relative_to(d) for p in d.rglob("*") if p.is_file())

    assert files(data / "suites") == files(ROOT / "assets" / "suites")  # subfolders too
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    r = subprocess.run([str(exe), "--self-test"], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "self-test: ok" in r.stdout
    r = subprocess.run([str(exe), "cli", "models"], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and "qwen2.5-coder-1.5b" in r.stdout, r.stdout + r.stderr
