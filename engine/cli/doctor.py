"""`tandem doctor`: versions, backend and devices, the model store, and what to do next
(main.py adds the optional parts' checks, parts.py)."""

from __future__ import annotations

import platform
import shutil
import sys
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..llamacpp.backend_dl import BackendLoad


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def run_checks() -> list[Check]:
    from ..models import catalog, hardware, store

    checks: list[Check] = []
    checks.append(Check("python", sys.version_info >= (3, 11), f"{platform.python_implementation()} {platform.python_version()} on {platform.platform()}",
                        "Tandem needs Python 3.11 or newer"))
    for dist, need in (("tandem-studio", False), ("llama_cpp_python", True), ("gguf", True), ("huggingface_hub", True),
                       ("PySide6_Essentials", False), ("pyqtgraph", False)):
        v = _version(dist)
        checks.append(Check(dist, v is not None or not need, v or "not installed",
                            "" if v or not need else f"pip install {dist}"))
    checks.append(_row_kernels_check())
    try:
        from ..llamacpp.build import built_by_tandem

        ours = built_by_tandem()
        built = "built by packaging/install_llama_cpp.sh" if ours else "not built by Tandem's script"
        checks.append(Check("llama.cpp build", True, built,
                            "" if ours else "bash packaging/install_llama_cpp.sh .venv/bin/python (avoids AMX crashes)"))
    except ImportError as e:
        checks.append(Check("llama.cpp build", False, str(e), "bash packaging/install_llama_cpp.sh .venv/bin/python"))
        return checks
    from ..llamacpp import ggml_devices
    from ..llamacpp.llama import supports_gpu_offload  # loads libllama: only once llama_cpp is known to import

    hw = ggml_devices.probe()
    # llama_supports_gpu_offload() is also true for any RPC build: count real local GPUs.
    offload = supports_gpu_offload()
    gpu = offload and bool(hw.gpus)
    checks.append(Check("backend", True, f"{hw.backend}; GPU offload {'supported' if gpu else 'not in this build'}"))
    checks += _backend_load_checks(ggml_devices.backends())
    unused = hardware.unused_gpu(hw, offload)
    if unused:  # the set-up built for the CPU on a GPU machine (an old venv, or a failed GPU build)
        checks.append(Check("gpu build", False, unused, hardware.gpu_rebuild_command()))
    for d in hw.devices:
        checks.append(Check(f"device {d.name}", True, f"{d.kind} {d.backend}: {d.description}, {d.free / 1e9:.1f} of {d.total / 1e9:.1f} GB free"))
    checks.append(_rpc_check())
    checks.append(Check("memory", True, f"RAM {hw.ram_available / 1e9:.1f} of {hw.ram_total / 1e9:.1f} GB free, {hw.cores_physical} physical cores"))
    cache = store.hub_cache()
    cache.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(cache).free
    cat = catalog.load()
    pair = cat.default
    checks.append(Check("model store", free > pair.bytes, f"{cache} ({free / 1e9:.1f} GB free)",
                        "" if free > pair.bytes else f"free {pair.bytes / 1e9:.1f} GB or set HF_HOME to a larger disk"))
    for role, m in (("target", pair.target), ("draft", pair.draft)):
        p = store.find_model(m.id, cat)
        if p is None:
            checks.append(Check(f"default {role}", False, f"{m.id} not downloaded", f"tandem pull {pair.id}"))
            continue
        try:
            for f in m.files:
                fp = store.find_file(f)
                assert fp is not None
                store.verify_file(fp, f)
            checks.append(Check(f"default {role}", True, f"{m.id}: verified (sha256) at {p}"))
        except Exception as e:  # noqa: BLE001 - reported, not raised
            checks.append(Check(f"default {role}", False, f"{m.id}: {e}", f"delete it and run `tandem pull {pair.id}`"))
    return checks


def _backend_load_checks(load: "BackendLoad | None") -> list[Check]:
    """The CPU kernels (a portable build's variant, or this machine's own flags) and a portable
    build's GPU backends, loaded or skipped with the reason."""
    if load is None:
        return []
    ok = load.cpu_variant is not None or not load.dynamic
    checks = [Check("cpu kernels", ok, load.cpu_line(),
                    "" if ok else "build llama.cpp for this CPU: bash packaging/install_llama_cpp.sh .venv/bin/python")]
    checks += [Check("gpu backend", True, line) for line in load.gpu_lines()]
    return checks


def _row_kernels_check() -> Check:
    """The sampler's compiled C (setup.py builds it): without it nothing can generate."""
    from ..decoding.sampling.kernels import build_command, problem

    why = problem()
    if why is None:
        return Check("row kernels", True, "built (engine/decoding/sampling/_row_kernels)")
    return Check("row kernels", False, f"not built: generation cannot run ({why})", build_command())


def _rpc_check() -> Check:
    """Is llama.cpp's RPC backend in this build (`tandem worker`, `--rpc`)? Informational."""
    from ..llamacpp.ggml_devices import supports_rpc
    from ..llamacpp.rpc_backend import PROTO

    if supports_rpc():
        return Check("rpc", True, f"available (protocol {'.'.join(map(str, PROTO))}): `tandem worker` on other hosts, "
                                  "then --rpc HOST:PORT")
    return Check("rpc", True, "not in this build (splitting a target over hosts needs it): "
                              "bash packaging/install_llama_cpp.sh .venv/bin/python adds -DGGML_RPC=ON")


def report(checks: list[Check]) -> str:
    lines = []
    for c in checks:
        mark = "ok " if c.ok else "!! "
        lines.append(f"{mark}{c.name:22s} {c.detail}")
        if c.fix and not c.ok:
            lines.append(f"{'':26s}-> {c.fix}")
    bad = [c for c in checks if not c.ok]
    lines.append("")
    lines.append("All good." if not bad else f"{len(bad)} problem(s); the arrows say what to do.")
    return "\n".join(lines)
