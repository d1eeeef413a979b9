"""Hardware probing through llama.cpp's own device list, and the fit verdicts."""

from __future__ import annotations

from engine import catalog, hardware
from engine.hardware import Device, Hardware, pair_fit, recommend

GB = 10**9


def _hw(ram_free: float, gpu_free: float | None = None, cores: int = 8) -> Hardware:
    devs = [Device("CPU", "cpu", "CPU", "CPU", int(ram_free * GB), int(ram_free * GB))]
    if gpu_free is not None:
        devs.append(Device("CUDA0", "Test GPU", "GPU", "CUDA", int(gpu_free * GB), int(gpu_free * GB)))
    return Hardware(int(64 * GB), int(ram_free * GB), cores, cores, devs)


def test_probe_reports_llama_cpp_devices():
    hw = hardware.probe()
    assert hw.ram_total > 0 and hw.ram_available > 0 and hw.cores_usable >= 1
    assert any(d.kind == "CPU" for d in hw.devices), hw.devices
    assert hw.backend in ("CPU", "CUDA", "Metal", "Vulkan") or hw.gpus
    assert "RAM" in hw.summary()


def test_fit_verdicts_follow_memory():
    pair = catalog.load().pair("qwen2.5-coder-7b")
    need = pair_fit(pair, _hw(100)).need
    w = pair.target.bytes + pair.draft.bytes
    assert need > w  # KV cache and overhead on top of the weights
    assert pair_fit(pair, _hw(2, gpu_free=24)).verdict == "fits on GPU"
    assert pair_fit(pair, _hw(16, gpu_free=4)).verdict == "partial offload"
    assert pair_fit(pair, _hw(16)).verdict == "fits in RAM"
    bad = pair_fit(pair, _hw(3))
    assert bad.verdict == "does not fit" and "GB" in bad.detail and not bad.ok


def test_kv_cache_grows_with_context():
    pair = catalog.load().pair("qwen2.5-coder-7b")
    assert pair_fit(pair, _hw(100), n_ctx=32768).kv == 8 * pair_fit(pair, _hw(100), n_ctx=4096).kv


def test_recommendation():
    cat = catalog.load()
    pairs = list(cat.pairs.values())
    small_cpu = recommend(pairs, _hw(20, cores=2), default=cat.default_pair)
    assert small_cpu is not None and small_cpu.id == cat.default_pair
    big_gpu = recommend(pairs, _hw(64, gpu_free=80), default=cat.default_pair)
    assert big_gpu is not None and big_gpu.target.params_b >= 32
    assert recommend(pairs, _hw(0.5)) is None


def test_one_physical_core_count(monkeypatch):
    """llama.cpp's threads and the reported cores come from one count: physical cores, capped
    by the CPUs this process may use (containers and taskset narrow the affinity mask)."""
    from engine import llama

    def counts(affinity: int, physical: int | None) -> tuple[int, int]:
        monkeypatch.setattr(hardware.os, "sched_getaffinity", lambda pid: set(range(affinity)), raising=False)
        monkeypatch.setattr(hardware.psutil, "cpu_count", lambda logical=True: physical if not logical else 2 * affinity)
        hardware.usable_cpus.cache_clear()
        hardware.physical_cores.cache_clear()
        return hardware.physical_cores(), llama.default_threads()

    try:
        assert counts(affinity=2, physical=8) == (2, 2)  # a 2-CPU container on an 8-core host
        assert counts(affinity=16, physical=8) == (8, 8)  # hyperthreads do not count
        assert counts(affinity=4, physical=None) == (4, 4)  # psutil cannot tell: the usable CPUs
        assert hardware.probe().cores_physical == 4 and hardware.probe().cores_usable == 4
    finally:
        hardware.usable_cpus.cache_clear()
        hardware.physical_cores.cache_clear()
