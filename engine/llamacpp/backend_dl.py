"""Backends as loadable libraries: the portable build's CPU variants and GPU backends.

llama.cpp built with GGML_BACKEND_DL (the bundle's build) ships every backend as a library
of its own: the CPU backend once per instruction-set level (libggml-cpu-sse42.so ...
libggml-cpu-icelake.so) and each GPU backend (libggml-cuda.so). Such a build registers no
backend by itself; `ggml_backend_load_all_from_path(dir)` scores the CPU variants against
this CPU, loads the best one, and loads each GPU backend whose driver is present.
llama-cpp-python never calls it, so the seam does, once per libggml instance, before
anything lists devices or loads a model. A build with its backends linked in (the developer
venv's, tuned to the machine that built it) registers them itself: then nothing is loaded.

The result (`BackendLoad`) names the CPU variant chosen and the GPU backends loaded or
skipped, in the one-line form `tandem doctor` and the app's status bar show.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

_CPU_VARIANT = re.compile(r"^(?:lib)?ggml-cpu-(.+)\.(?:so|dll|dylib)$")
# the GPU backend libraries ggml_backend_load_all_from_path looks for, and the name each
# registers under once loaded
GPU_LIBRARIES = {"cuda": "CUDA", "hip": "ROCm", "vulkan": "Vulkan", "metal": "MTL", "sycl": "SYCL",
                 "opencl": "OpenCL", "musa": "MUSA"}
NOT_GPU = {"CPU", "RPC", "BLAS"}


@dataclass(frozen=True)
class BackendLoad:
    """What the seam found: a build with its backends linked in (`dynamic` False), or a
    backend-DL build with the CPU variant and the GPU backends it loaded."""

    dynamic: bool
    cpu_variant: str | None = None  # "haswell"; None: no CPU variant could be loaded
    variants: tuple[str, ...] = ()  # the CPU variants shipped, in file-name order
    gpus: tuple[str, ...] = ()  # GPU backends loaded ("CUDA")
    skipped: tuple[tuple[str, str], ...] = field(default=())  # (GPU backend, why it is not used)

    def cpu_line(self) -> str:
        """One line about the CPU kernels, for `tandem doctor`."""
        if not self.dynamic:
            return "built for this machine's CPU (backends linked in, not a portable build)"
        if self.cpu_variant is None:
            shipped = ", ".join(self.variants) or "none"
            return f"portable build, but no CPU variant fits this CPU (shipped: {shipped})"
        return f"portable build: variant {self.cpu_variant}, the best of {len(self.variants)} for this CPU ({', '.join(self.variants)})"

    def gpu_lines(self) -> list[str]:
        """One line per GPU backend library of a portable build: loaded, or why not."""
        lines = [f"{name} backend loaded" for name in self.gpus]
        lines += [f"{name} backend not used: {why}" for name, why in self.skipped]
        return lines

    def status_text(self) -> str:
        """The status bar's few words ("" for a build with its backends linked in): the CPU
        variant, and each shipped GPU backend left unused with the first words of why (a GPU
        bundle on a machine without the driver runs on the CPU, and says so)."""
        if not self.dynamic:
            return ""
        parts = [f"CPU kernels: {self.cpu_variant}" if self.cpu_variant else "no CPU kernels for this CPU"]
        parts += [f"{name} not used: {why.split(' (')[0]}" for name, why in self.skipped]
        return " · ".join(parts)


def cpu_variants(libdir: Path) -> tuple[str, ...]:
    """The CPU variants a backend-DL build ships in `libdir` (x64, sse42, haswell, ...)."""
    names = []
    for p in libdir.iterdir() if libdir.is_dir() else ():
        m = _CPU_VARIANT.match(p.name)
        if m:
            names.append(m.group(1))
    return tuple(sorted(names))


def gpu_libraries(libdir: Path) -> dict[str, Path]:
    """The GPU backend libraries in `libdir`, by the name their backend registers under."""
    out = {}
    for key, reg_name in GPU_LIBRARIES.items():
        for name in (f"libggml-{key}.so", f"libggml-{key}.dylib", f"ggml-{key}.dll"):
            if (libdir / name).is_file():
                out[reg_name] = libdir / name
    return out


def needs_loading(registered_backends: int) -> bool:
    """A libggml that registered no backend by itself is a backend-DL build: load them."""
    return registered_backends == 0


def variant_of(module_path: str | None) -> str | None:
    """"haswell" for .../libggml-cpu-haswell.so; None for a path that is no CPU variant."""
    if not module_path:
        return None
    m = _CPU_VARIANT.match(Path(module_path).name)
    return m.group(1) if m else None


def why_not_loaded(path: Path, opener: Callable[[str], Any] = ctypes.CDLL) -> str:
    """Why ggml did not load a GPU backend library: the loader's own message (a missing
    driver library names itself), else no usable device."""
    try:
        opener(str(path))
    except OSError as e:
        # a frozen app's ctypes (PyInstaller) raises its own "Failed to load dynlib/dll" from the loader's error
        msg = str(e.__cause__ if isinstance(e.__cause__, OSError) else e).strip()
        missing = re.search(r"([\w.+-]+\.so[\w.]*): cannot open shared object file", msg)
        if missing:
            return f"{missing.group(1)} not found (no driver for it on this machine)"
        return msg.splitlines()[0][:200] if msg else "the library could not be loaded"
    return "no usable device (the library loads, but its backend registered nothing)"


NO_DEVICE = "no device found (the library and the driver load, but the driver reports no GPU)"


def summarize(reg_names: Iterable[str], cpu_module: str | None, libdir: Path,
              opener: Callable[[str], Any] = ctypes.CDLL, no_device: Iterable[str] = ()) -> BackendLoad:
    """The `BackendLoad` of a backend-DL build after loading: the registered backends'
    names, the file the CPU backend came from, the library folder, and the GPU backends that
    registered without a device (CUDA does where the driver is installed but sees no GPU)."""
    names, empty = set(reg_names), set(no_device)
    gpus = tuple(sorted(n for n in names if n not in NOT_GPU and n not in empty))
    skipped = tuple((name, why_not_loaded(path, opener)) for name, path in sorted(gpu_libraries(libdir).items())
                    if name not in names)
    skipped += tuple((name, NO_DEVICE) for name in sorted(empty & names - NOT_GPU))
    cpu = variant_of(cpu_module) if "CPU" in names else None
    if cpu is None and "CPU" in names:
        cpu = Path(cpu_module).name if cpu_module else "unknown"
    return BackendLoad(dynamic=True, cpu_variant=cpu, variants=cpu_variants(libdir), gpus=gpus, skipped=skipped)


# -- the running process ---------------------------------------------------------------------
def module_of(address: int) -> str | None:
    """The file of the shared library that holds `address`, or None."""
    if not address:
        return None
    try:
        if sys.platform == "win32":
            k32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
            handle = ctypes.c_void_p()
            flags = 0x4 | 0x2  # FROM_ADDRESS | UNCHANGED_REFCOUNT
            if not k32.GetModuleHandleExW(flags, ctypes.c_void_p(address), ctypes.byref(handle)):
                return None
            buf = ctypes.create_unicode_buffer(32768)
            n = k32.GetModuleFileNameW(handle, buf, len(buf))
            return buf.value[:n] or None

        class DlInfo(ctypes.Structure):
            _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                        ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]

        dladdr = ctypes.CDLL(None).dladdr
        dladdr.argtypes, dladdr.restype = [ctypes.c_void_p, ctypes.POINTER(DlInfo)], ctypes.c_int
        info = DlInfo()
        if not dladdr(address, ctypes.byref(info)) or not info.dli_fname:
            return None
        return os.fsdecode(info.dli_fname)
    except (OSError, AttributeError):
        return None


_lock = threading.Lock()
_done: dict[int, BackendLoad] = {}  # by the address of an instance's ggml_backend_reg_count


def borrow(lib: Any, name: str, others: Iterable[Any]) -> Any:
    """`lib`'s function `name`, or the first of `others` that defines it, set on `lib` so that
    callers keep calling `lib.name`. On Linux and macOS a library's look-up reaches the
    libraries it links; Windows' GetProcAddress sees only the DLL's own exports, and ggml
    keeps its registry in ggml.dll but the device and backend accessors in ggml-base.dll."""
    try:
        return getattr(lib, name)
    except AttributeError:
        pass
    for other in others:
        if other is None:
            continue
        try:
            fn = getattr(other, name)
        except AttributeError:
            continue
        setattr(lib, name, fn)
        return fn
    raise AttributeError(name)


def _siblings(libdir: Path) -> list[Any]:
    """libggml and libggml-base from `libdir` (loaded once per path by the system loader: the
    instances `lib` uses when it came from the same folder)."""
    out = []
    for name in ("ggml.dll", "ggml-base.dll", "libggml.dylib", "libggml-base.dylib", "libggml.so.0", "libggml-base.so.0"):
        if (libdir / name).is_file():
            try:
                out.append(ctypes.CDLL(str(libdir / name)))
            except OSError:
                continue
    return out


def _bind(lib: Any, libdir: Path) -> Any:
    vp = ctypes.c_void_p
    others: list[Any] | None = None
    for name, args, res in (("ggml_backend_reg_count", [], ctypes.c_size_t),
                            ("ggml_backend_reg_get", [ctypes.c_size_t], vp),
                            ("ggml_backend_reg_name", [vp], ctypes.c_char_p),
                            ("ggml_backend_load_all_from_path", [ctypes.c_char_p], None)):
        if others is None and not hasattr(lib, name):
            others = _siblings(libdir)
        fn = borrow(lib, name, others or [])
        fn.argtypes, fn.restype = args, res
    return lib


def _device_counts(lib: Any, regs: list[Any], libdir: Path) -> list[int] | None:
    """How many devices each registered backend has (None: this libggml cannot say)."""
    try:
        fn = borrow(lib, "ggml_backend_reg_dev_count", _siblings(libdir))
    except AttributeError:
        return None
    fn.argtypes, fn.restype = [ctypes.c_void_p], ctypes.c_size_t
    return [int(fn(r)) for r in regs]


def ensure_loaded(lib: Any, libdir: Path) -> BackendLoad:
    """Load a backend-DL build's backends from `libdir` into the libggml that `lib` reaches
    (libggml itself, or libllama, whose symbol look-up reaches the libggml it links), once;
    do nothing for a build whose backends are linked in. Returns what was found."""
    try:
        lib = _bind(lib, libdir)
    except AttributeError:  # a libggml older than the backend registry: nothing to load
        return BackendLoad(dynamic=False)
    try:  # one libggml instance (a library loaded twice under two names is two)
        key = ctypes.cast(lib.ggml_backend_reg_count, ctypes.c_void_p).value or id(lib)
    except (TypeError, ctypes.ArgumentError):
        key = id(lib)
    with _lock:
        if key in _done:
            return _done[key]
        if not needs_loading(lib.ggml_backend_reg_count()):
            result = BackendLoad(dynamic=False)
        else:
            lib.ggml_backend_load_all_from_path(os.fsencode(str(libdir)))
            regs = [lib.ggml_backend_reg_get(i) for i in range(lib.ggml_backend_reg_count())]
            names = [(lib.ggml_backend_reg_name(r) or b"").decode(errors="replace") for r in regs]
            cpu = next((r for r, n in zip(regs, names) if n == "CPU"), None)
            counts = _device_counts(lib, regs, libdir)
            empty = [n for n, c in zip(names, counts) if c == 0] if counts is not None else []
            result = summarize(names, module_of(cpu) if cpu else None, libdir, no_device=empty)
        _done[key] = result
        return result


__all__ = ["BackendLoad", "borrow", "cpu_variants", "ensure_loaded", "gpu_libraries", "needs_loading", "summarize",
           "variant_of", "why_not_loaded"]
