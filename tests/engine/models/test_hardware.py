"""Hardware probing through llama.cpp's own device list, and the fit verdicts."""

from __future__ import annotations

from engine.models import catalog, hardware
from engine.models.hardware import Device, Hardware, pair_fit, recommend

GB = 10**9


def _hw(ram_free: float, gpu_free: float | None = None, cores: int = 8) -> Hardware:
    devs = [Device("CPU", "cpu", "CPU", "CPU", int(ram_free * GB), int(ram_free * GB))]
    if gpu_free is not None:
        devs.append(Device("CUDA0", "Test GPU", "GPU", "CUDA", int(gpu_free * GB), int(gpu_free * GB)))
    return Hardware(int(64 * GB), int(ram_free * GB), cores, cores, devs)


def test_the_machine_holds_the_devices_it_is_given():
    """hardware describes what the llama.cpp seam lists; it lists nothing itself."""
    gpu = Device("CUDA0", "Test GPU", "GPU", "CUDA", 3 * GB, 4 * GB)
    hw = hardware.machine([gpu])
    assert hw.devices == [gpu] and hw.backend == "CUDA" and hw.vram_free == 3 * GB
    assert hw.ram_total > 0 and hw.cores_usable >= 1
    assert hardware.machine().devices == [] and hardware.machine().backend == "CPU"
    assert not hasattr(hardware, "probe") and not hasattr(hardware, "ggml_devices")


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
    # a 24 GB card: a 27-32B target that fits on it, with a published GPU speed-up to show
    card = recommend(pairs, _hw(32, gpu_free=24), default=cat.default_pair)
    assert card is not None and 27 <= card.target.params_b <= 33 and card.gpu_speedup
    assert hardware.pair_fit(card, _hw(32, gpu_free=24)).verdict == "fits on GPU"
    assert recommend(pairs, _hw(0.5)) is None


def test_one_physical_core_count(monkeypatch):
    """llama.cpp's threads and the reported cores come from one count: physical cores, capped
    by the CPUs this process may use (containers and taskset narrow the affinity mask)."""
    from engine.llamacpp import llama

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
        assert hardware.machine().cores_physical == 4 and hardware.machine().cores_usable == 4
    finally:
        hardware.usable_cpus.cache_clear()
        hardware.physical_cores.cache_clear()


def _calibration_file(tmp_path, entries):
    import json

    p = tmp_path / "calibration.json"
    p.write_text(json.dumps(entries))
    return p


def test_measured_decode_bandwidth_comes_from_this_machines_calibration(tmp_path):
    from engine.models import calibration

    me = calibration.machine_id()
    p = _calibration_file(tmp_path, {
        f"{me}|cpu:ngl0|t2|big.gguf:2000000000": {"verify_s": {"1": 0.1, "2": 0.15}},  # 20 GB/s
        f"{me}|cpu:ngl0|t2|small.gguf:100000000": {"verify_s": {"1": 0.01}},  # 10 GB/s
        f"{me}|cpu:ngl0|t2|draft.gguf:50000000": {"draft_token_s": 0.01},  # no verify time: ignored
        "another-host|Other CPU|cpu:ngl0|t2|big.gguf:2000000000": {"verify_s": {"1": 0.001}},  # not this machine
    })
    bw = hardware.measured_decode_bandwidth(_hw(16), p)
    assert bw is not None and abs(bw.bytes_per_s - 20 * GB) < 1e6
    assert bw.basis == "measured decode of big.gguf"
    # With a GPU, an offloaded run says nothing about RAM: only ngl0 runs count.
    gpu_only = _calibration_file(tmp_path, {f"{me}|gpu:ngl-1|t2|big.gguf:2000000000": {"verify_s": {"1": 0.01}}})
    assert hardware.measured_decode_bandwidth(_hw(16, gpu_free=8), gpu_only) is None
    assert hardware.measured_decode_bandwidth(_hw(16), tmp_path / "missing.json") is None


def test_a_tiny_models_decode_is_not_taken_for_ram_bandwidth(tmp_path):
    """A few-MB model's pass is llama.cpp's overhead: counted as bandwidth it predicted ~0.0 tok/s
    for real pairs; with only such a measurement, the copy test (or nothing) is the basis."""
    from engine.models import calibration

    me = calibration.machine_id()
    p = _calibration_file(tmp_path, {f"{me}|cpu:ngl0|t2|target.gguf:1500000": {"verify_s": {"1": 0.002}}})  # 0.75 GB/s
    assert hardware.measured_decode_bandwidth(_hw(16), p) is None
    p = _calibration_file(tmp_path, {f"{me}|cpu:ngl0|t2|target.gguf:1500000": {"verify_s": {"1": 0.002}},
                                     f"{me}|cpu:ngl0|t2|real.gguf:1000000000": {"verify_s": {"1": 0.1}}})  # 10 GB/s
    assert hardware.measured_decode_bandwidth(_hw(16), p).basis == "measured decode of real.gguf"


def test_a_very_slow_estimate_is_not_written_as_zero():
    pair = catalog.load().pair("qwen2.5-coder-32b")
    fit = pair_fit(pair, _hw(100, cores=2), bandwidth=hardware.Bandwidth(0.5 * GB, "memory copy test"))
    assert fit.tok_s < 0.1 and fit.label == "fits in RAM · under 0.1 tok/s expected"
    assert "~0.0" not in fit.detail and "under 0.1 tok/s expected" in fit.detail


def test_copy_test_bandwidth_is_a_plausible_figure():
    bw = hardware.copy_test_bandwidth()
    assert 0.1 * GB < bw.bytes_per_s < 10_000 * GB and bw.basis == "memory copy test"


def test_fit_in_ram_says_the_expected_speed_as_an_estimate():
    pair = catalog.load().pair("qwen2.5-coder-32b")
    bw = hardware.Bandwidth(20 * GB, "memory copy test")
    fit = pair_fit(pair, _hw(100, cores=2), bandwidth=bw)
    assert fit.verdict == "fits in RAM"
    assert abs(fit.tok_s - 20 * GB / pair.target.bytes) < 1e-9  # bandwidth / weight bytes
    assert fit.label == f"fits in RAM · ~{fit.tok_s:.1f} tok/s expected"
    assert "estimate" in fit.detail and "memory copy test" in fit.detail
    # No speed without a bandwidth, and none for a verdict that does not run from RAM.
    assert pair_fit(pair, _hw(100)).label == "fits in RAM"
    assert pair_fit(pair, _hw(3), bandwidth=bw).tok_s is None
    assert pair_fit(pair, _hw(2, gpu_free=80), bandwidth=bw).label == "fits on GPU"


def test_nvml_is_shut_down_also_when_a_device_fails(monkeypatch):
    """Every nvmlInit that succeeded gets its nvmlShutdown, also when listing devices fails
    (the review found an `except` that returned without it)."""
    import sys
    import types

    calls: list[str] = []
    fake = types.SimpleNamespace(
        nvmlInit=lambda: calls.append("init"),
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(free=1, total=2) if h == 0 else 1 / 0,
        nvmlDeviceGetName=lambda h: b"GPU0",
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert hardware._nvml() == [{"name": "GPU0", "free": 1, "total": 2}]
    assert calls == ["init", "shutdown"]


def test_the_default_slot_count_follows_cores_and_free_memory():
    from engine.models.hardware import default_parallel

    assert default_parallel(_hw(ram_free=1, cores=16)) == 1  # under 2 GB free: one at a time
    assert default_parallel(_hw(ram_free=8, cores=2)) == 2  # one answer beside another
    assert default_parallel(_hw(ram_free=8, cores=16)) == 2  # each slot holds a whole context
    assert default_parallel(_hw(ram_free=32, cores=8)) == 4
