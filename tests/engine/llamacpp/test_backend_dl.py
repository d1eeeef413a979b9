"""A portable (backend-DL) llama.cpp build's backends are loaded by the seam, and a build with
its backends linked in is left alone (engine/llamacpp/backend_dl.py).

The decision and the one-line messages run everywhere against a stand-in libggml; the last
test runs a real portable build when one was built (packaging/portable.sh leaves its
libraries in build/portable/llama_cpp/lib; TANDEM_PORTABLE_LIB names another folder)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli.doctor import _backend_load_checks
from engine.llamacpp import backend_dl, ggml_devices
from engine.llamacpp.backend_dl import BackendLoad, ensure_loaded, needs_loading, summarize

ROOT = Path(__file__).resolve().parents[3]
PORTABLE_LIB = Path(os.environ.get("TANDEM_PORTABLE_LIB") or ROOT / "build" / "portable" / "llama_cpp" / "lib")


class FakeGgml:
    """A libggml stand-in: `static` backends registered by itself; loading registers CPU and
    RPC from the folder it is given. Records every load call."""

    def __init__(self, static: list[str], loads: tuple[str, ...] = ("RPC", "CPU"), devices: dict | None = None):
        self.regs = list(static)
        self.loaded_from: list[bytes] = []

        def reg_count():
            return len(self.regs)

        def reg_get(i):
            return 1000 + i

        def reg_name(r):
            return self.regs[r - 1000].encode()

        def load_all(path):
            self.loaded_from.append(path)
            self.regs += list(loads)

        def dev_count(r):  # every backend has one device unless `devices` says otherwise
            return (devices or {}).get(self.regs[r - 1000], 1)

        self.ggml_backend_reg_count = reg_count
        self.ggml_backend_reg_get = reg_get
        self.ggml_backend_reg_name = reg_name
        self.ggml_backend_load_all_from_path = load_all
        if devices is not None:
            self.ggml_backend_reg_dev_count = dev_count


def _libdir(tmp_path: Path, *names: str) -> Path:
    d = tmp_path / "lib"
    d.mkdir()
    for n in names:
        (d / n).write_bytes(b"")
    return d


def test_only_a_libggml_that_registered_nothing_loads_backends():
    assert needs_loading(0)
    assert not needs_loading(1) and not needs_loading(3)


def test_a_build_with_linked_backends_is_left_alone(tmp_path):
    lib = FakeGgml(["CPU"])
    load = ensure_loaded(lib, _libdir(tmp_path, "libggml-cpu-haswell.so"))
    assert lib.loaded_from == [] and load == BackendLoad(dynamic=False)
    assert load.status_text() == ""
    assert "not a portable build" in load.cpu_line()


def test_a_portable_build_loads_its_folder_once_and_names_the_variant(tmp_path, monkeypatch):
    libdir = _libdir(tmp_path, "libggml-cpu-x64.so", "libggml-cpu-sse42.so", "libggml-cpu-haswell.so", "libggml.so")
    monkeypatch.setattr(backend_dl, "module_of", lambda reg: str(libdir / "libggml-cpu-sse42.so"))
    lib = FakeGgml([])
    load = ensure_loaded(lib, libdir)
    assert lib.loaded_from == [os.fsencode(str(libdir))]
    assert load.dynamic and load.cpu_variant == "sse42" and load.variants == ("haswell", "sse42", "x64")
    assert load.gpus == () and load.skipped == ()
    assert load.cpu_line() == "portable build: variant sse42, the best of 3 for this CPU (haswell, sse42, x64)"
    assert load.status_text() == "CPU kernels: sse42"
    assert ensure_loaded(lib, libdir) is load and len(lib.loaded_from) == 1  # once per libggml


def test_a_gpu_backend_without_its_driver_is_skipped_with_one_line(tmp_path):
    libdir = _libdir(tmp_path, "libggml-cpu-x64.so", "libggml-cuda.so")

    def no_driver(path):
        raise OSError("libcuda.so.1: cannot open shared object file: No such file or directory")

    load = summarize(["CPU", "RPC"], str(libdir / "libggml-cpu-x64.so"), libdir, opener=no_driver)
    assert load.gpus == ()
    assert load.gpu_lines() == ["CUDA backend not used: libcuda.so.1 not found (no driver for it on this machine)"]
    assert load.status_text() == "CPU kernels: x64 · CUDA not used: libcuda.so.1 not found"  # the status bar

    def frozen_no_driver(path):  # PyInstaller's ctypes hides the loader's message behind its own
        try:
            no_driver(path)
        except OSError as e:
            raise OSError(f"Failed to load dynlib/dll {path!r}. Most likely this dynlib/dll was not found when "
                          "the application was frozen.") from e

    frozen = summarize(["CPU"], str(libdir / "libggml-cpu-x64.so"), libdir, opener=frozen_no_driver)
    assert frozen.gpu_lines() == load.gpu_lines()
    loaded = summarize(["CPU", "CUDA"], str(libdir / "libggml-cpu-x64.so"), libdir, opener=no_driver)
    assert loaded.status_text() == "CPU kernels: x64"
    assert loaded.gpu_lines() == ["CUDA backend loaded"] and loaded.skipped == ()
    assert backend_dl.why_not_loaded(libdir / "libggml-cuda.so", opener=lambda p: None).startswith("no usable device")


def test_a_gpu_backend_that_loads_but_finds_no_device_is_not_called_loaded(tmp_path, monkeypatch):
    """The driver installed but no GPU visible (a container without the device): CUDA
    registers with no device, and the bundle runs on the CPU."""
    libdir = _libdir(tmp_path, "libggml-cpu-x64.so", "libggml-cuda.so")
    monkeypatch.setattr(backend_dl, "module_of", lambda reg: str(libdir / "libggml-cpu-x64.so"))
    no_gpu, gpu = FakeGgml([], loads=("CPU", "CUDA"), devices={"CUDA": 0}), FakeGgml([], loads=("CPU", "CUDA"), devices={})
    load = ensure_loaded(no_gpu, libdir)
    assert load.gpus == () and load.skipped == (("CUDA", backend_dl.NO_DEVICE),)
    assert load.gpu_lines() == ["CUDA backend not used: no device found (the library and the driver load, "
                                "but the driver reports no GPU)"]
    assert load.status_text() == "CPU kernels: x64 · CUDA not used: no device found"
    with_gpu = ensure_loaded(gpu, libdir)
    assert with_gpu.gpus == ("CUDA",) and with_gpu.gpu_lines() == ["CUDA backend loaded"]


def test_doctor_says_when_no_variant_fits_this_cpu():
    none_fit = BackendLoad(dynamic=True, cpu_variant=None, variants=("haswell", "skylakex"))
    checks = _backend_load_checks(none_fit)
    assert [c.ok for c in checks] == [False]
    assert checks[0].detail == "portable build, but no CPU variant fits this CPU (shipped: haswell, skylakex)"
    assert checks[0].fix
    gpu = BackendLoad(dynamic=True, cpu_variant="haswell", variants=("haswell",), skipped=(("CUDA", "no usable device"),))
    assert [(c.name, c.ok, c.detail) for c in _backend_load_checks(gpu)][1:] == [
        ("gpu backend", True, "CUDA backend not used: no usable device")]
    assert _backend_load_checks(None) == []


def test_this_venvs_build_reports_what_it_is():
    load = ggml_devices.backends()
    assert load is not None
    if not load.dynamic:  # the developer venv: backends linked in, CPU registered by itself
        assert any(d.kind == "CPU" for d in ggml_devices.devices())
    else:
        assert load.cpu_variant in load.variants


@pytest.mark.skipif(not any(PORTABLE_LIB.glob("*ggml-cpu-*")), reason=f"no portable llama.cpp build in {PORTABLE_LIB} "
                    "(packaging/portable.sh builds one; CI does not)")
def test_a_real_portable_build_loads_a_variant_and_generates(tiny_target):
    """With the portable libraries in place of the venv's, the doctor names the variant and a
    model loads and generates (without the seam's load call a backend-DL build has no device)."""
    env = dict(os.environ, LLAMA_CPP_LIB_PATH=str(PORTABLE_LIB))
    code = ("from engine.llamacpp import ggml_devices; from engine.cli.doctor import _backend_load_checks;"
            "print(_backend_load_checks(ggml_devices.backends())[0].detail);"
            "from engine import Engine; import sys;"
            f"e = Engine(sys.argv[1], n_ctx=128, metrics_log=False); print(len(e.generate('the value of', max_tokens=4).tokens))")
    r = subprocess.run([sys.executable, "-c", code, str(tiny_target)], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    first, count = r.stdout.strip().splitlines()[-2:]
    assert first.startswith("portable build: variant "), first
    assert count == "4"
