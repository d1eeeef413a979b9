"""The one libggml binding (engine/llamacpp/ggml_devices.py): the devices llama.cpp will use,
the machine they make, and that listing them does not load libllama."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from engine.llamacpp import ggml_devices
from engine.models.hardware import Hardware

ROOT = Path(__file__).resolve().parents[3]


def test_probe_reports_llama_cpp_devices():
    hw = ggml_devices.probe()
    assert isinstance(hw, Hardware)
    assert hw.ram_total > 0 and hw.ram_available > 0 and hw.cores_usable >= 1
    assert any(d.kind == "CPU" for d in hw.devices), hw.devices
    assert hw.backend in ("CPU", "CUDA", "Metal", "Vulkan") or hw.gpus
    assert "RAM" in hw.summary()
    assert ggml_devices.current_backend() == hw.backend.lower()


def test_listing_devices_does_not_load_libllama():
    """`tandem models` and the app's start list devices without importing llama_cpp."""
    code = ("import sys; from engine.llamacpp import ggml_devices; "
            "assert ggml_devices.devices(), 'no devices listed'; print('llama_cpp' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "False"


def test_rpc_calls_share_the_binding():
    """Listing and RPC go through one bound libggml: the handles RPC lists describe the same devices."""
    if not ggml_devices.supports_rpc():
        listed = ggml_devices.devices()
        assert listed  # devices list whatever the build
        return
    described = [ggml_devices.device_info(h)[0] for h in ggml_devices.local_devices()]
    assert described == [d.name for d in ggml_devices.devices()]
