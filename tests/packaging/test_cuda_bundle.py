"""A GPU bundle (`make package-cuda`) carries the CUDA backend with its runtime beside it and
needs nothing else but the driver: where the driver is missing it runs on its CPU variants and
says so in one line. A release check (the bundle takes an hour to build): it runs when
TANDEM_CUDA_BUNDLE names the bundle folder (dist/cuda/tandem)."""

from __future__ import annotations

import ctypes.util
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

BUNDLE = Path(os.environ.get("TANDEM_CUDA_BUNDLE", "")) if os.environ.get("TANDEM_CUDA_BUNDLE") else None

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(BUNDLE is None, reason="TANDEM_CUDA_BUNDLE names no GPU bundle (make package-cuda: dist/cuda/tandem)"),
]
RUNTIME = ("libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13")


def _lib() -> Path:
    assert BUNDLE is not None
    return BUNDLE / "_internal" / "llama_cpp" / "lib"


def test_the_cuda_backend_and_its_runtime_sit_beside_the_cpu_variants():
    lib = _lib()
    assert (lib / "libggml-cuda.so").is_file()
    assert len(list(lib.glob("libggml-cpu-*.so"))) >= 3
    for name in RUNTIME:
        assert (lib / name).is_file() and not (lib / name).is_symlink(), name
    dyn = subprocess.run(["readelf", "-d", str(lib / "libggml-cuda.so")], capture_output=True, text=True, check=True).stdout
    assert re.search(r"R(UN)?PATH.*\[\$ORIGIN", dyn), dyn
    needed = re.findall(r"\(NEEDED\).*\[(.+)\]", dyn)
    assert "libcuda.so.1" in needed and all(n in needed for n in ("libcudart.so.13", "libcublas.so.13"))


@pytest.mark.skipif(shutil.which("ldd") is None, reason="no ldd")
def test_it_finds_everything_but_the_driver_beside_itself():
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    out = subprocess.run(["ldd", str(_lib() / "libggml-cuda.so")], capture_output=True, text=True, env=env).stdout
    missing = [ln.split()[0] for ln in out.splitlines() if "not found" in ln]
    assert set(missing) <= {"libcuda.so.1"}, out


def test_the_doctor_says_in_one_line_whether_cuda_is_used():
    assert BUNDLE is not None
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    r = subprocess.run([str(BUNDLE / "tandem"), "cli", "doctor"], capture_output=True, text=True, timeout=300, env=env)
    lines = [ln.strip() for ln in (r.stdout + r.stderr).splitlines() if "CUDA backend" in ln]
    assert len(lines) == 1, r.stdout + r.stderr
    if ctypes.util.find_library("cuda") is None:  # no driver on this machine
        assert lines[0].endswith("CUDA backend not used: libcuda.so.1 not found (no driver for it on this machine)")
    else:
        assert "CUDA backend loaded" in lines[0] or "CUDA backend not used: no device found" in lines[0]
