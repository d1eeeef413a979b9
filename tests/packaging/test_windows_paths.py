"""What the Windows release build needs from the code, checked on Linux.

- Every llama.cpp function Tandem binds by name is found in the library it is looked up in,
  as Windows' GetProcAddress finds it: only the DLL's own exports (Linux look-ups also reach
  the libraries a library links, which hid that ggml's device accessors live in ggml-base),
  and each is declared with its export macro (so MSVC exports it under its plain C name).
- The main paths use no POSIX-only call: a stale-download check that would end another
  process on Windows (os.kill(pid, 0) is TerminateProcess there), a uid check with no uid.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.llamacpp import backend_dl, ggml_devices

ROOT = Path(__file__).resolve().parents[2]


class ExportsOnly:
    """A shared library as Windows would show it: only the symbols the file itself defines."""

    def __init__(self, path: Path):
        self._lib = ctypes.CDLL(str(path))
        out = subprocess.run(["nm", "-D", "--defined-only", str(path)], capture_output=True, text=True, check=True).stdout
        self._defined = {line.split()[-1] for line in out.splitlines() if line.strip()}

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in self._defined:
            raise AttributeError(name)
        return getattr(self._lib, name)


def _lib(stem: str) -> Path:
    libdir = ggml_devices._libdir()
    assert libdir is not None
    return libdir / f"lib{stem}.so"


needs_elf = pytest.mark.skipif(sys.platform != "linux" or shutil.which("nm") is None, reason="reads ELF exports with nm")


@needs_elf
def test_devices_bind_from_each_librarys_own_exports():
    libs = ggml_devices._GgmlLibs(ExportsOnly(_lib("ggml")), ExportsOnly(_lib("ggml-rpc")), ExportsOnly(_lib("ggml-base")))
    assert libs.rpc is not None  # the abort hook was found (in ggml-base), so RPC stays available
    n = libs.ggml.ggml_backend_dev_count()
    assert n >= 1
    names = [libs.ggml.ggml_backend_dev_name(libs.ggml.ggml_backend_dev_get(i)) for i in range(n)]
    assert all(names), names


@needs_elf
def test_the_backend_loader_binds_from_each_librarys_own_exports():
    lib = backend_dl._bind(ExportsOnly(_lib("ggml")), _lib("ggml").parent)
    assert lib.ggml_backend_reg_count() >= 1
    assert lib.ggml_backend_reg_name(lib.ggml_backend_reg_get(0))


def test_every_bound_function_is_declared_exported():
    include = Path(ggml_devices._libdir() or ".").parents[1] / "include"
    if not (include / "ggml.h").exists():
        pytest.skip(f"llama-cpp-python's headers are not installed beside it ({include})")
    source = "\n".join(p.read_text() for p in (ROOT / "engine" / "llamacpp").glob("*.py"))
    names = set(re.findall(r"\"((?:ggml|llama)_[a-z0-9_]+)\"", source)) | set(re.findall(r"\.(ggml_backend_rpc_[a-z_]+)\b", source))
    names.discard("llama_cpp")
    # The MTP seam's names come from llama.cpp's staging header (C++ linkage, not installed):
    # llama-cpp-python's llama_cpp_ext binds them under each ABI's symbol, the MSVC one included.
    import llama_cpp.llama_cpp_ext as ext

    ext_source = Path(ext.__file__).read_text()
    staged = {n for n in names if hasattr(ext, n)}
    assert all(f'"?{n}@@' in ext_source for n in staged), "an MTP binding without its MSVC name"
    names -= staged
    headers = "\n".join(p.read_text() for p in include.glob("*.h"))
    unexported = [n for n in sorted(names)
                  if not re.search(r"\b(?:GGML_API|GGML_BACKEND_API|LLAMA_API)\b[^;{}]*?\b" + n + r"\s*\(", headers)]
    assert len(names) >= 15 and not unexported, unexported


def test_a_stale_download_check_never_signals_a_process_on_windows(monkeypatch):
    from engine.models import mirror

    psutil = pytest.importorskip("psutil")
    asked = []

    def kill(pid, sig):
        raise AssertionError("os.kill(pid, 0) terminates the process on Windows")

    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(os, "kill", kill)
    monkeypatch.setattr(psutil, "pid_exists", lambda pid: asked.append(pid) or pid == 4242)
    assert mirror._alive(4242) and not mirror._alive(4343)
    assert asked == [4242, 4343]


def test_a_read_only_history_side_file_is_restored_without_uids(tmp_path, monkeypatch):
    from app.history.readonly import _restore_side_mode

    side = tmp_path / "history.sqlite3-wal"
    side.write_bytes(b"")
    side.chmod(0o444)
    monkeypatch.delattr(os, "geteuid")  # Windows has none
    assert _restore_side_mode(side, 0o100644)
    assert side.stat().st_mode & 0o777 == 0o644
