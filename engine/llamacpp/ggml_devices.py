"""ggml's device registry and RPC backend: the one ctypes binding of libggml.

llama-cpp-python binds neither ggml's backend registry nor the RPC backend; both are exported
by the bundled libggml / libggml-rpc (built with -DGGML_RPC=ON), so the few functions Tandem
needs are bound here: list the devices llama.cpp will use with their backend and memory
(`devices`, `probe`), add an RPC server's devices, serve this host's devices, and hook ggml's
fatal abort.

The libraries are found through llama_cpp's package folder without importing llama_cpp, so
listing devices (`tandem models`, the app's start) does not load libllama; only the RPC calls,
which need llama.cpp's backend initialised, import it.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
from pathlib import Path
from typing import Callable, Sequence

from ..errors import ModelLoadError
from ..models.hardware import Device, Hardware, machine
from .backend_dl import BackendLoad, borrow, ensure_loaded

GGML_DEV_TYPES = {0: "CPU", 1: "GPU", 2: "iGPU", 3: "accelerator", 4: "meta"}


def _libdir() -> Path | None:
    """llama-cpp-python's folder of shared libraries, found without importing llama_cpp
    (importing it loads libllama); LLAMA_CPP_LIB_PATH names another, as llama_cpp reads it."""
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    if override:
        return Path(override) if Path(override).is_dir() else None
    try:
        spec = importlib.util.find_spec("llama_cpp")
    except (ImportError, ValueError):  # ValueError: a stubbed sys.modules entry
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    libdir = Path(next(iter(spec.submodule_search_locations))) / "lib"
    return libdir if libdir.is_dir() else None


def _load(libdir: Path, stem: str) -> ctypes.CDLL | None:
    """lib<stem>.so / lib<stem>.dylib / <stem>.dll from libdir, or None."""
    for name in (f"lib{stem}.so", f"lib{stem}.dylib", f"{stem}.dll"):
        p = libdir / name
        if p.exists():
            try:
                return ctypes.CDLL(str(p))
            except OSError:
                continue
    return None


_GGML_LOG_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


@_GGML_LOG_CALLBACK
def _ggml_log(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    """Keep the backends' start-up chatter (CUDA device lists) out of the terminal."""
    if os.environ.get("TANDEM_DEBUG"):
        sys.stderr.write(text.decode("utf-8", errors="replace"))


def _quiet_ggml_logs(libdir: Path) -> None:
    llama = sys.modules.get("engine.llamacpp.llama")
    if llama is not None:  # llama.cpp is loaded anyway: its own log routing covers ggml's
        llama.ensure_backend()
        return
    base = _load(libdir, "ggml-base")
    if base is not None and hasattr(base, "ggml_log_set"):
        base.ggml_log_set.argtypes = [_GGML_LOG_CALLBACK, ctypes.c_void_p]
        base.ggml_log_set.restype = None
        base.ggml_log_set(_ggml_log, None)


class _GgmlLibs:
    """The bound functions of libggml (registry, devices, abort hook) and, where this build
    has it, libggml-rpc (None: no RPC backend)."""

    def __init__(self, ggml: ctypes.CDLL, rpc: ctypes.CDLL | None, base: ctypes.CDLL | None = None):
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
        }
        for (lib, name), (args, res) in sig.items():
            fn = borrow(lib, name, [base])  # the accessors live in ggml-base (Windows looks only there)
            fn.argtypes, fn.restype = args, res
        try:
            abort = borrow(ggml, "ggml_set_abort_callback", [base])
            abort.argtypes, abort.restype = [vp], vp
            if rpc is not None:
                rpc.ggml_backend_rpc_add_server.argtypes, rpc.ggml_backend_rpc_add_server.restype = [cp], vp
                rpc.ggml_backend_rpc_start_server.argtypes = [cp, cp, sz, sz, ctypes.POINTER(vp)]
                rpc.ggml_backend_rpc_start_server.restype = None
        except AttributeError:  # an older libggml without the RPC exports: devices still list
            self.rpc = None


_libs: _GgmlLibs | None = None
_backends: BackendLoad | None = None


def backends() -> BackendLoad | None:
    """How this build's backends came in: linked in, or loaded from a portable build's
    libraries (the CPU variant chosen, GPU backends loaded or skipped); None without libggml."""
    _ggml_libs()
    return _backends


def _ggml_libs() -> _GgmlLibs | None:
    """libggml (and libggml-rpc) from llama_cpp's folder, bound once; None when it cannot be
    loaded (asked again next time: a missing library is cheap to look for)."""
    global _libs, _backends
    if _libs is not None:
        return _libs
    libdir = _libdir()
    if libdir is None:
        return None
    _quiet_ggml_logs(libdir)
    ggml = _load(libdir, "ggml")
    if ggml is None:
        return None
    _backends = ensure_loaded(ggml, libdir)  # a portable build's CPU variant and GPU backends
    try:
        _libs = _GgmlLibs(ggml, _load(libdir, "ggml-rpc"), _load(libdir, "ggml-base"))
    except AttributeError:  # a libggml without the registry
        return None
    return _libs


# -- devices and the machine ---------------------------------------------------------------------
def device_info(dev: int) -> tuple[str, str, str, int, int]:
    """(name, description, kind, free bytes, total bytes) of a ggml device handle."""
    libs = _ggml_libs()
    assert libs is not None, "a device handle comes from a loaded libggml"
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    libs.ggml.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
    name = (libs.ggml.ggml_backend_dev_name(dev) or b"").decode(errors="replace")
    desc = (libs.ggml.ggml_backend_dev_description(dev) or b"").decode(errors="replace")
    kind = GGML_DEV_TYPES.get(libs.ggml.ggml_backend_dev_type(dev), "other")
    return name, desc, kind, int(free.value), int(total.value)


def devices() -> list[Device]:
    """The devices llama.cpp's backends registered, with their backend and free/total memory
    (none when libggml cannot be loaded)."""
    libs = _ggml_libs()
    if libs is None:
        return []
    out = []
    for i in range(libs.ggml.ggml_backend_dev_count()):
        dev = libs.ggml.ggml_backend_dev_get(i)
        name, desc, kind, free, total = device_info(dev)
        reg = libs.ggml.ggml_backend_dev_backend_reg(dev)
        backend = (libs.ggml.ggml_backend_reg_name(reg) or b"").decode(errors="replace") if reg else ""
        out.append(Device(name=name, description=desc, kind=kind, backend=backend, free=free, total=total))
    return out


def probe() -> Hardware:
    """This machine as llama.cpp sees it: RAM, cores and the devices it registered."""
    return machine(devices())


def current_backend() -> str:
    """"cpu", "cuda", "metal", ...: the backend llama.cpp would run a model on here (what a
    draft's requantised variants are filed under)."""
    try:
        gpus = [d for d in devices() if d.kind in ("GPU", "iGPU")]
    except Exception:
        gpus = []
    return (gpus[0].backend if gpus else "CPU").lower()


# -- the RPC backend ---------------------------------------------------------------------------
def supports_rpc() -> bool:
    """True when this llama.cpp build has the RPC backend (-DGGML_RPC=ON)."""
    import llama_cpp

    from .llama import ensure_backend

    ensure_backend()
    libs = _ggml_libs()
    return bool(llama_cpp.llama_supports_rpc()) and libs is not None and libs.rpc is not None


def _require_rpc() -> _GgmlLibs:
    import llama_cpp

    from .llama import ensure_backend

    ensure_backend()
    libs = _ggml_libs()
    if libs is None or libs.rpc is None or not llama_cpp.llama_supports_rpc():
        raise ModelLoadError("this llama.cpp build has no RPC backend: rebuild with packaging/install_llama_cpp.sh "
                             "(it adds -DGGML_RPC=ON)")
    return libs


def local_devices() -> list[int]:
    """Handles of every device registered in this process (CPU included)."""
    libs = _require_rpc()
    return [libs.ggml.ggml_backend_dev_get(i) for i in range(libs.ggml.ggml_backend_dev_count())]


def rpc_add_server(endpoint: str) -> list[int]:
    """Connect llama.cpp's RPC client to `HOST:PORT`; return the worker's device handles.

    llama.cpp aborts the process when the endpoint does not answer: check it first
    (`engine.llamacpp.rpc_backend.probe`)."""
    libs = _require_rpc()
    assert libs.rpc is not None
    reg = libs.rpc.ggml_backend_rpc_add_server(endpoint.encode())
    if not reg:
        return []
    return [libs.ggml.ggml_backend_reg_dev_get(reg, i) for i in range(libs.ggml.ggml_backend_reg_dev_count(reg))]


def rpc_start_server(endpoint: str, devices: Sequence[int], *, cache_dir: str | None = None, n_threads: int | None = None) -> None:
    """Serve `devices` over TCP at `endpoint`; blocks for as long as the server runs."""
    from .llama import default_threads

    libs = _require_rpc()
    assert libs.rpc is not None
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
    libs = _require_rpc()
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
