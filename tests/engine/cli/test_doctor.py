"""`tandem doctor` reports what is there and what to do when something is missing."""

from __future__ import annotations

from engine.cli import doctor
from engine.cli.main import main as cli


def test_doctor_says_how_to_get_the_default_pair(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf"))  # nothing downloaded
    checks = {c.name: c for c in doctor.run_checks()}
    assert checks["python"].ok and checks["llama_cpp_python"].ok
    assert checks["backend"].detail.startswith(("CPU", "CUDA", "Metal", "Vulkan"))
    assert any(n.startswith("device ") for n in checks)
    assert str(tmp_path / "empty-hf") in checks["model store"].detail
    t = checks["default target"]
    assert not t.ok and t.fix == "tandem pull qwen2.5-coder-1.5b"
    rc = cli(["doctor"])
    out = capsys.readouterr().out
    assert rc == 1 and "-> tandem pull qwen2.5-coder-1.5b" in out and "problem(s)" in out
    # the optional parts follow, each made to work (the test extras install them all)
    for part in ("documents", "pictures", "tools (MCP)", "library", "server"):
        assert any(line.startswith(f"ok {part} ") for line in out.splitlines()), (part, out)
    assert "a tool listed and called" in out and "with FTS5" in out


def test_doctor_flags_a_damaged_model_file(tmp_path, monkeypatch):
    from engine.models import catalog, store

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    spec = catalog.load().default.draft.files[0]
    p = store.snapshot_path(spec)
    p.parent.mkdir(parents=True)
    with open(p, "wb") as f:  # right size, wrong bytes
        f.truncate(spec.bytes)
    checks = {c.name: c for c in doctor.run_checks()}
    d = checks["default draft"]
    assert not d.ok and "sha256 mismatch" in d.detail


# -- issue 24: a GPU machine running a CPU-only llama.cpp build is told how to fix it -------------
import os  # noqa: E402
import shlex  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

from engine.llamacpp import ggml_devices  # noqa: E402
from engine.models import hardware  # noqa: E402


@pytest.fixture
def fake_gpu_path(tmp_path, monkeypatch):
    """PATH with a fake nvidia-smi naming one card first; returns a function to switch it off."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    smi.write_text('#!/bin/sh\ncase "$*" in *compute_cap*) echo "NVIDIA GeForce RTX 4090, 8.9, 580.65.06";; '
                   '*) echo "NVIDIA GeForce RTX 4090";; esac\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    monkeypatch.setattr(sys, "platform", "linux")  # no Apple silicon answer, whatever runs the test
    hardware.host_gpu.cache_clear()
    yield smi
    hardware.host_gpu.cache_clear()


def _cpu_only_build(monkeypatch):
    import engine.llamacpp.llama as llama

    monkeypatch.setattr(llama, "supports_gpu_offload", lambda: False)
    monkeypatch.setattr(ggml_devices, "devices", lambda: [hardware.Device("CPU", "the CPU", "CPU", "CPU", 0, 0)])


def test_doctor_warns_when_a_gpu_is_present_but_the_build_is_cpu_only(fake_gpu_path, monkeypatch, capsys):
    _cpu_only_build(monkeypatch)
    checks = {c.name: c for c in doctor.run_checks()}
    g = checks["gpu build"]
    assert not g.ok
    assert g.detail == "NVIDIA GeForce RTX 4090 present, but this llama.cpp build is CPU-only"
    assert g.fix.startswith("TANDEM_BACKEND=cuda bash ") and g.fix.endswith(shlex.quote(sys.executable))
    cli(["doctor"])
    out = capsys.readouterr().out
    assert "!! gpu build" in out and f"-> {g.fix}" in out


def test_the_fix_command_reruns_the_set_up_for_cuda(fake_gpu_path, monkeypatch, tmp_path):
    _cpu_only_build(monkeypatch)
    cmd = shlex.split(hardware.gpu_rebuild_command())
    assert cmd[0] == "TANDEM_BACKEND=cuda" and cmd[1] == "bash" and cmd[2].endswith("packaging/install_llama_cpp.sh")
    env = dict(os.environ, TANDEM_BACKEND="cuda", TANDEM_WHEEL_CACHE=str(tmp_path / "w"))
    r = subprocess.run([cmd[1], cmd[2], "--dry-run", *cmd[3:]], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "-DGGML_CUDA=ON" in r.stdout and "-DCMAKE_CUDA_ARCHITECTURES=89" in r.stdout  # the fake card's


def test_no_warning_with_a_gpu_build_or_without_a_gpu(fake_gpu_path, monkeypatch):
    import engine.llamacpp.llama as llama

    monkeypatch.setattr(llama, "supports_gpu_offload", lambda: True)
    monkeypatch.setattr(ggml_devices, "devices", lambda: [hardware.Device("CUDA0", "RTX 4090", "GPU", "CUDA", 20 << 30, 24 << 30)])
    assert "gpu build" not in {c.name for c in doctor.run_checks()}
    # an RPC build answers llama_supports_gpu_offload() yes without any local GPU: still CPU-only
    monkeypatch.setattr(ggml_devices, "devices", lambda: [])
    assert "gpu build" in {c.name for c in doctor.run_checks()}
    fake_gpu_path.unlink()  # no nvidia-smi: nothing to warn about
    hardware.host_gpu.cache_clear()
    _cpu_only_build(monkeypatch)
    assert "gpu build" not in {c.name for c in doctor.run_checks()}


def test_a_failing_nvidia_smi_is_no_gpu(fake_gpu_path):
    fake_gpu_path.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    assert hardware.host_gpu() is None
