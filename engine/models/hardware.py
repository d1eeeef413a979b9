"""What this machine has, and whether a pair fits in it.

RAM and cores from psutil; GPU devices, their backend (CUDA, Metal, Vulkan, CPU) and memory
are what llama.cpp registered, listed by the llama.cpp seam (engine.llamacpp.ggml_devices,
whose `probe()` fills `machine(devices)`), so we report exactly the devices llama.cpp will
use. This module holds the data types and the fit checks, and never loads llama.cpp itself.
nvidia-ml-py, where installed, gives a second opinion on NVIDIA.
"""

from __future__ import annotations

import os
import platform
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import psutil

from .catalog import ModelSpec, PairSpec

GB = 1e9


@dataclass
class Device:
    name: str
    description: str
    kind: str  # CPU | GPU | iGPU | accelerator
    backend: str  # CUDA | Metal | Vulkan | CPU | ...
    free: int
    total: int


@dataclass
class Hardware:
    ram_total: int
    ram_available: int
    cores_physical: int
    cores_usable: int
    devices: list[Device] = field(default_factory=list)
    nvml: list[dict] = field(default_factory=list)

    @property
    def gpus(self) -> list[Device]:
        return [d for d in self.devices if d.kind in ("GPU", "iGPU")]

    @property
    def backend(self) -> str:
        g = self.gpus
        return g[0].backend if g else "CPU"

    @property
    def vram_free(self) -> int:
        return sum(d.free for d in self.gpus if d.kind == "GPU")

    def summary(self) -> str:
        parts = [
            f"backend {self.backend}",
            f"RAM {self.ram_available / GB:.1f} of {self.ram_total / GB:.1f} GB free",
            f"{self.cores_physical} cores",
        ]
        for d in self.gpus:
            parts.append(f"{d.backend} {d.description or d.name}: {d.free / GB:.1f} of {d.total / GB:.1f} GB free")
        return ", ".join(parts)


@lru_cache(maxsize=1)
def host_gpu() -> str | None:
    """A GPU this machine has, whatever this llama.cpp build can use: the cards nvidia-smi
    reports, or Apple silicon's. None when there is none to find. Runs nvidia-smi, so callers
    ask only when llama.cpp registered no GPU."""
    if sys.platform == "darwin" and platform.machine() == "arm64":
        return "Apple silicon GPU"
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        r = subprocess.run([exe, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.SubprocessError):
        return None
    names = [ln.strip() for ln in r.stdout.splitlines() if ln.strip()] if r.returncode == 0 else []
    return ", ".join(dict.fromkeys(names)) or None


def gpu_rebuild_command() -> str:
    """The set-up command that rebuilds llama.cpp for this machine's GPU, runnable as printed."""
    backend = "metal" if sys.platform == "darwin" else "cuda"
    script = Path(__file__).resolve().parents[2] / "packaging" / "install_llama_cpp.sh"
    where = shlex.quote(str(script)) if script.exists() else "packaging/install_llama_cpp.sh"
    return f"TANDEM_BACKEND={backend} bash {where} {shlex.quote(sys.executable)}"


def unused_gpu(hw: Hardware, offload: bool) -> str | None:
    """When this machine has a GPU but this llama.cpp build runs on the CPU only: the words
    saying so (pair them with `gpu_rebuild_command()`); else None. `offload` is
    llama_supports_gpu_offload(), which every RPC build answers yes, so a build counts as a
    GPU build only when llama.cpp also registered a GPU device."""
    if offload and hw.gpus:
        return None
    gpu = host_gpu()
    if gpu is None:
        return None
    return f"{gpu} present, but this llama.cpp build is CPU-only"


def _nvml() -> list[dict]:
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver, no device: NVML is only a second opinion
        return []
    out: list[dict] = []
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            name = pynvml.nvmlDeviceGetName(h)
            out.append({"name": name.decode() if isinstance(name, bytes) else name, "free": int(mem.free), "total": int(mem.total)})
    except Exception:  # a device that will not answer: report what answered
        pass
    finally:
        try:
            pynvml.nvmlShutdown()  # every successful nvmlInit needs its shutdown, also after a failure
        except Exception:
            pass
    return out


@lru_cache(maxsize=1)
def usable_cpus() -> int:
    """Logical CPUs this process may run on: its affinity mask, which containers and
    `taskset` narrow, where the OS has one."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


@lru_cache(maxsize=1)
def physical_cores() -> int:
    """Physical cores this process can use: llama.cpp's thread count (hyperthreads slow its
    matrix kernels down) and the core count Tandem reports. The one place cores are counted."""
    usable = usable_cpus()
    return max(1, min(usable, psutil.cpu_count(logical=False) or usable))


def machine(devices: Sequence[Device] = ()) -> Hardware:
    """This machine with `devices`, the ones llama.cpp registered (listed by the llama.cpp seam:
    `engine.llamacpp.ggml_devices.probe()` is this with its devices): RAM, cores, NVML's view."""
    vm = psutil.virtual_memory()
    return Hardware(vm.total, vm.available, physical_cores(), usable_cpus(), list(devices), _nvml())


def default_parallel(hw: Hardware | None = None) -> int:
    """The parallel slots offered where nobody chose (the app's server switch; `tandem serve` keeps
    1): two, so one answer runs beside another; four with 8 or more physical cores and 16 GB free
    (each slot holds a whole context); one with under 2 GB free."""
    hw = hw or machine()
    if hw.ram_available < 2 * GB:
        return 1
    return 4 if hw.cores_physical >= 8 and hw.ram_available >= 16 * GB else 2


# -- memory bandwidth: what bounds decode speed ----------------------------------------------
@dataclass(frozen=True)
class Bandwidth:
    """Bytes per second that decoding can stream through RAM, and where the figure came from."""

    bytes_per_s: float
    basis: str  # words for a tooltip: "measured decode of X" or "memory copy test"


MIN_MEASURED_BYTES = 64 << 20  # below this a decode's time is llama.cpp's per-token overhead, not RAM


def measured_decode_bandwidth(hw: Hardware | None = None, cal_path: Path | None = None) -> Bandwidth | None:
    """Weight bytes / seconds per target-alone token from Auto's persisted calibration on this
    machine (engine/models/calibration.py): the real decode speed, best over the models measured.
    On a machine with a GPU only CPU-only runs (ngl0) count: they say what RAM delivers. A
    model under MIN_MEASURED_BYTES does not count: its pass is overhead, and a test model of a
    few MB read as 0.7 GB/s predicted ~0.0 tok/s for every real pair (and hours for a bench)."""
    from . import calibration

    data = calibration.entries(cal_path)
    me = calibration.machine_id() + "|"
    best: Bandwidth | None = None
    for key, entry in data.items():
        if not key.startswith(me) or not isinstance(entry, dict):
            continue
        parts = key[len(me):].split("|")
        if len(parts) != 3:
            continue
        backend, _threads, file_id = parts
        if hw is not None and hw.gpus and not backend.endswith("ngl0"):
            continue
        name, _, size = file_id.rpartition(":")
        t1 = (entry.get("verify_s") or {}).get("1") if isinstance(entry.get("verify_s"), dict) else None
        try:
            if int(size) < MIN_MEASURED_BYTES:
                continue
            bw = int(size) / float(t1)
        except (TypeError, ValueError, ZeroDivisionError):
            continue
        if bw > 0 and (best is None or bw > best.bytes_per_s):
            best = Bandwidth(bw, f"measured decode of {name}")
    return best


@lru_cache(maxsize=1)
def copy_test_bandwidth() -> Bandwidth:
    """A 64 MB memory copy (best of 3): read + write bytes per second. Tens of milliseconds,
    once per process; decode reaches about this on a small machine."""
    import time

    import numpy as np

    src = np.ones(64 << 20, dtype=np.uint8)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t)
    return Bandwidth(2 * src.nbytes / max(best, 1e-9), "memory copy test")


def ram_bandwidth(hw: Hardware | None = None) -> Bandwidth:
    """The measured decode bandwidth when Auto has calibrated a model here, else the copy test."""
    return measured_decode_bandwidth(hw) or copy_test_bandwidth()


@dataclass
class MemoryFit:
    verdict: str  # "fits on GPU" | "fits in RAM" | "partial offload" | "does not fit"
    need: int  # bytes
    weights: int
    kv: int
    overhead: int
    detail: str
    tok_s: float | None = None  # expected target-alone decode speed (estimate), where known
    speed_basis: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict != "does not fit"

    @property
    def label(self) -> str:
        """The verdict with the expected speed: "fits in RAM · ~3 tok/s expected"."""
        if self.tok_s is None:
            return self.verdict
        if self.tok_s < 0.1:  # "~0.0" would read as "does not run"; it runs, very slowly
            return f"{self.verdict} · under 0.1 tok/s expected"
        rate = f"{self.tok_s:.0f}" if self.tok_s >= 10 else f"{self.tok_s:.1f}"
        return f"{self.verdict} · ~{rate} tok/s expected"


def expected_tok_s(weight_bytes: int, bw: Bandwidth) -> float:
    """Decode is bandwidth-bound: every token streams all the weights once."""
    return bw.bytes_per_s / max(weight_bytes, 1)


def with_speed(fit: MemoryFit, target_bytes: int, bw: Bandwidth | None) -> MemoryFit:
    """Add the expected speed to a verdict that runs from RAM (GPU bandwidth is not known here)."""
    if bw is None or fit.verdict != "fits in RAM":
        return fit
    fit.tok_s = expected_tok_s(target_bytes, bw)
    fit.speed_basis = bw.basis
    rate = "under 0.1" if fit.tok_s < 0.1 else f"~{fit.tok_s:.1f}"
    fit.detail += (f"; {rate} tok/s expected (estimate: {bw.bytes_per_s / GB:.1f} GB/s from a "
                   f"{bw.basis} ÷ {target_bytes / GB:.2f} GB of target weights per token)")
    return fit


def model_need(m: ModelSpec, n_ctx: int) -> tuple[int, int, int]:
    """(weights, kv cache, overhead) bytes for one model at a context length."""
    weights = m.bytes
    kv = m.kv_bytes_per_token() * n_ctx
    overhead = int(0.25 * GB + 0.05 * weights)  # compute buffers, logits, runtime
    return weights, kv, overhead


def pair_fit(pair: PairSpec, hw: Hardware, n_ctx: int = 4096, workers: Sequence[tuple[str, int]] = (),
             bandwidth: Bandwidth | None = None) -> MemoryFit:
    """Memory a pair needs (weights + KV cache + overhead) against what this machine has,
    and, when it does not fit here, against this machine plus RPC `workers`
    ((endpoint, free bytes) each): the target can be split, the draft stays local.
    With `bandwidth`, a pair that runs from RAM also gets its expected decode speed."""
    models = [pair.target] + ([pair.draft] if pair.draft.id != pair.target.id else [])
    w = kv = ov = 0
    for m in models:
        a, b, c = model_need(m, n_ctx)
        w, kv, ov = w + a, kv + b, ov + c
    need = w + kv + ov
    detail = (f"needs {need / GB:.1f} GB (weights {w / GB:.1f} + KV cache {kv / GB:.2f} at {n_ctx} tokens "
              f"+ overhead {ov / GB:.1f})")
    local = with_speed(_local_fit(need, w, kv, ov, detail, hw), pair.target.weights_bytes, bandwidth)
    if local.ok or not workers:
        return local
    draft_need = sum(model_need(pair.draft, n_ctx)) if pair.draft.id != pair.target.id else 0
    here = hw.ram_available + hw.vram_free
    remote = sum(free for _, free in workers)
    hosts = 1 + len({ep.partition(":")[0] if not ep.startswith("127.") else ep for ep, _ in workers})
    if here + remote >= need and here >= draft_need:
        parts = ", ".join(f"{ep} {free / GB:.1f} GB" for ep, free in workers)
        return MemoryFit(f"fits across {hosts} hosts", need, w, kv, ov,
                   f"{detail}; this machine {here / GB:.1f} GB free + workers {parts}")
    return MemoryFit("does not fit", need, w, kv, ov,
               f"{detail}; only {here / GB:.1f} GB here + {remote / GB:.1f} GB on {len(workers)} worker(s) free")


def _local_fit(need: int, w: int, kv: int, ov: int, detail: str, hw: Hardware) -> MemoryFit:
    gpu_free = hw.vram_free
    if hw.gpus and gpu_free >= need:
        return MemoryFit("fits on GPU", need, w, kv, ov, f"{detail}; GPU has {gpu_free / GB:.1f} GB free")
    if hw.gpus and gpu_free + hw.ram_available >= need and gpu_free > 0:
        share = gpu_free / need
        return MemoryFit("partial offload", need, w, kv, ov,
                   f"{detail}; about {share:.0%} on the GPU ({gpu_free / GB:.1f} GB free), the rest in RAM")
    if hw.ram_available >= need:
        return MemoryFit("fits in RAM", need, w, kv, ov, f"{detail}; {hw.ram_available / GB:.1f} GB RAM free")
    return MemoryFit("does not fit", need, w, kv, ov,
               f"{detail}; only {hw.ram_available / GB:.1f} GB RAM" + (f" + {gpu_free / GB:.1f} GB GPU" if hw.gpus else "") + " free")


def recommend(
    pairs: list[PairSpec],
    hw: Hardware,
    n_ctx: int = 4096,
    prefer_tag: str | None = None,
    default: str | None = None,
) -> PairSpec | None:
    """The pair to suggest on first run: the largest that fits on the GPU (a 24 GB card gets a
    27-32B target with a small draft or its own MTP head); on a CPU the default pair when it
    fits, else the largest that stays interactive."""
    cands = [p for p in pairs if (prefer_tag is None or prefer_tag in p.tags)]
    good = [p for p in cands if pair_fit(p, hw, n_ctx).verdict in ("fits on GPU", "fits in RAM")]
    if not good:
        return None
    if hw.gpus:
        gpu = [p for p in good if pair_fit(p, hw, n_ctx).verdict == "fits on GPU"]
        good = gpu or good
    else:
        for p in good:
            if p.id == default:
                return p
        # On a CPU, tokens/s falls with size: about 1B parameters per physical core stays
        # interactive (a 1.5B Q4 target runs at ~15 tok/s on 2 cores here).
        limit = max(1.5, float(hw.cores_physical))
        small = [p for p in good if p.target.params_b <= limit]
        good = small or good
    # the largest target; between equals, one whose GPU speed-up someone has published
    return max(good, key=lambda p: (p.target.params_b, bool(hw.gpus and p.gpu_speedup)))
