"""The PyInstaller bundle builds and passes its own --self-test (slow: a few minutes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

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
    from engine.cli.main import main as cli

    assert cli(["app", "--self-test"]) == 0  # the option reaches the app's parser
    assert "self-test: ok" in capsys.readouterr().out


@pytest.mark.skipif(os.environ.get("TANDEM_SKIP_BUNDLE") == "1", reason="TANDEM_SKIP_BUNDLE=1")
@pytest.mark.timeout(1500)  # ~110 s idle; PyInstaller's analysis ran past the suite's 300 s on a loaded 2-core machine
def test_bundle_builds_and_passes_its_self_test(tmp_path, tiny_target):
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
    # every optional part made to work inside the bundle (frozen, a missing one fails the self-test)
    for part in ("documents", "pictures", "tools (MCP)", "library", "server"):
        assert f"  {part}: ok (" in r.stdout, (part, r.stdout)
    r = subprocess.run([str(exe), "cli", "models"], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and "qwen2.5-coder-1.5b" in r.stdout, r.stdout + r.stderr
    _bundled_rpc_split_matches_local(exe, tiny_target, env, tmp_path / "worker.log")


def _bundled_rpc_split_matches_local(exe: Path, target: Path, env: dict, log_path: Path) -> None:
    """The frozen app runs a split target in a spawned child (engine/serving/remote_engine.py): that
    needs the launcher's freeze_support() and the bundled libggml-rpc. A bundled worker
    serves it, and the output equals the same model loaded locally."""
    from engine.llamacpp.ggml_devices import supports_rpc

    if not supports_rpc():
        return  # a build without -DGGML_RPC=ON: tests/engine/llamacpp/test_rpc.py says so as skips
    from test_rpc import free_port

    port = free_port()
    gen = [str(exe), "cli", "generate", "the value of", "--target", str(target), "--max-tokens", "12", "--no-colour"]
    local = subprocess.run(gen, capture_output=True, text=True, timeout=300, env=env)
    assert local.returncode == 0, local.stderr
    with open(log_path, "wb") as out:  # the worker's own handle: reading must not move its write offset
        worker = subprocess.Popen([str(exe), "cli", "worker", "--port", str(port), "--threads", "1"], stdout=out,
                                  stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 60
        while b"listening on" not in log_path.read_bytes():
            assert worker.poll() is None and time.monotonic() < deadline, log_path.read_text(errors="replace")
            time.sleep(0.1)
        split = subprocess.run(gen + ["--rpc", f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=300, env=env)
        assert split.returncode == 0, split.stderr
        assert split.stdout == local.stdout != ""
        assert log_path.read_bytes().count(b"Accepted client connection") >= 2  # the probe, then the split target
    finally:
        worker.kill()
        worker.wait(10)
