"""ggml's device registry and RPC backend, bound with ctypes beside llama.cpp's own calls.

llama-cpp-python does not bind ggml's backend registry or the RPC backend; both are exported
by the bundled libggml / libggml-rpc (built with -DGGML_RPC=ON), so the few functions Tandem
needs (list devices and their memory, add an RPC server's devices, serve this host's devices,
hook ggml's fatal abort) are bound here.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Callable, Sequence

import llama_cpp

from ..errors import ModelLoadError
from .llama import default_threads, ensure_backend

# llama-cpp-python does not bind ggml's backend registry or the RPC backend; both are
# exported by the bundled libggml / libggml-rpc (built with -DGGML_RPC=ON), so we bind the
# few functions we need here, next to every other llama.cpp call.

GGML_DEV_TYPES = {0: "CPU", 1: "GPU", 2: "iGPU", 3: "accelerator", 4: "meta"}


def supports_rpc() -> bool:
    """True when this llama.cpp build has the RPC backend (-DGGML_RPC=ON)."""
    ensure_backend()
    return bool(llama_cpp.llama_supports_rpc()) and _ggml_libs() is not None


class _GgmlLibs:
    """The bound functions of libggml (registry, devices, abort hook) and libggml-rpc."""

    def __init__(self, ggml: ctypes.CDLL, rpc: ctypes.CDLL):
        vp, sz, cp = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
        self.ggml, self.rpc = ggml, rpc
        sig = {
            (ggml, "ggml_backend_dev_count"): ([], sz),
            (ggml, "ggml_backend_dev_get"): ([sz], vp),
            (ggml, "ggml_backend_dev_name"): ([vp], cp),
            (ggml, "ggml_backend_dev_description"): ([vp], cp),
            (ggml, "ggml_backend_dev_type"): ([vp], ctypes.c_int),
            (ggml, "ggml_backend_dev_memory"): ([vp, ctypes.POINTER(sz), ctypes.POINTER(sz)], None),
            (ggml, "ggml_backend_dev_backend_reg"): ([vp], vp),
            (ggml, "ggml_backend_reg_name"): ([vp], cp),
            (ggml, "ggml_backend_reg_dev_count"): ([vp], sz),
            (ggml, "ggml_backend_reg_dev_get"): ([vp, sz], vp),
            (ggml, "ggml_set_abort_callback"): ([vp], vp),
            (rpc, "ggml_backend_rpc_add_server"): ([cp], vp),
            (rpc, "ggml_backend_rpc_start_server"): ([cp, cp, sz, sz, ctypes.POINTER(vp)], None),
        }
        for (lib, name), (args, res) in sig.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, res


_libs: _GgmlLibs | None = None
_libs_tried = False


def _ggml_libs() -> _GgmlLibs | None:
    """libggml and libggml-rpc from llama_cpp/lib, or None when this build has no RPC."""
    global _libs, _libs_tried
    if _libs_tried:
        return _libs
    _libs_tried = True
    libdir = Path(llama_cpp.__file__).parent / "lib"

    def first(stem: str) -> ctypes.CDLL | None:
        for name in (f"lib{stem}.so", f"lib{stem}.dylib", f"{stem}.dll"):
            if (libdir / name).exists():
                try:
                    return ctypes.CDLL(str(libdir / name))
                except OSError:
                    return None
        return None

    ggml, rpc = first("ggml"), first("ggml-rpc")
    if ggml is None or rpc is None:
        return None
    try:
        _libs = _GgmlLibs(ggml, rpc)
    except AttributeError:  # an older libggml without these exports
        _libs = None
    return _libs


def _require_libs() -> _GgmlLibs:
    ensure_backend()
    libs = _ggml_libs()
    if libs is None or not llama_cpp.llama_supports_rpc():
        raise ModelLoadError("this llama.cpp build has no RPC backend: rebuild with packaging/install_llama_cpp.sh "
                             "(it adds -DGGML_RPC=ON)")
    return libs


def device_info(dev: int) -> tuple[str, str, str, int, int]:
    """(name, description, kind, free bytes, total bytes) of a ggml device handle."""
    libs = _require_libs()
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    libs.ggml.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
    name = (libs.ggml.ggml_backend_dev_name(dev) or b"").decode(errors="replace")
    desc = (libs.ggml.ggml_backend_dev_description(dev) or b"").decode(errors="replace")
    kind = GGML_DEV_TYPES.get(libs.ggml.ggml_backend_dev_type(dev), "other")
    return name, desc, kind, int(free.value), int(total.value)


def local_devices() -> list[int]:
    """Handles of every device registered in this process (CPU included)."""
    libs = _require_libs()
    return [libs.ggml.ggml_backend_dev_get(i) for i in range(libs.ggml.ggml_backend_dev_count())]


def rpc_add_server(endpoint: str) -> list[int]:
    """Connect llama.cpp's RPC client to `HOST:PORT`; return the worker's device handles.

    llama.cpp aborts the process when the endpoint does not answer: check it first
    (`engine.llamacpp.rpc_backend.probe`)."""
    libs = _require_libs()
    reg = libs.rpc.ggml_backend_rpc_add_server(endpoint.encode())
    if not reg:
        return []
    return [libs.ggml.ggml_backend_reg_dev_get(reg, i) for i in range(libs.ggml.ggml_backend_reg_dev_count(reg))]


def rpc_start_server(endpoint: str, devices: Sequence[int], *, cache_dir: str | None = None, n_threads: int | None = None) -> None:
    """Serve `devices` over TCP at `endpoint`; blocks for as long as the server runs."""
    libs = _require_libs()
    arr = (ctypes.c_void_p * len(devices))(*devices)
    libs.rpc.ggml_backend_rpc_start_server(
        endpoint.encode(), os.fsencode(cache_dir) if cache_dir else None, n_threads or default_threads(), len(devices), arr
    )


_abort_hook_ref: object = None


def set_fatal_hook(hook: Callable[[str], None] | None) -> None:
    """Call `hook(message)` when ggml is about to abort the process (a lost RPC worker:
    llama.cpp's RPC client has no error path). The hook runs on llama.cpp's thread and
    should end the process itself with a clear message; if it returns, ggml aborts."""
    global _abort_hook_ref
    libs = _require_libs()
    if hook is None:
        libs.ggml.ggml_set_abort_callback(None)
        _abort_hook_ref = None
        return

    @ctypes.CFUNCTYPE(None, ctypes.c_char_p)
    def _hook(message: bytes) -> None:
        try:
            hook((message or b"").decode("utf-8", errors="replace").strip())
        except BaseException:  # noqa: BLE001 - a callback must not raise into C
            pass

    _abort_hook_ref = _hook
    libs.ggml.ggml_set_abort_callback(ctypes.cast(_hook, ctypes.c_void_p))
