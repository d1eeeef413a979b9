"""The GPU probe's pipeline (write shaped models, quantize, measure, predict) on tiny shapes."""

from __future__ import annotations

import json

from tools import gpu_probe
from engine.models.gguf_header import read_header


def test_gpu_probe_runs_end_to_end_on_tiny_shapes(tmp_path):
    out = tmp_path / "gpu.json"
    rc = gpu_probe.main(["--target-shape", "tiny", "--draft-shape", "tiny", "--dir", str(tmp_path / "m"),
                         "--tokens", "16", "--alphas", "code:0.9", "--out", str(out)])
    assert rc == 0
    m = json.loads(out.read_text())
    assert m["target_alone_tok_s"] > 0 and m["draft_step_s"] > 0
    assert set(m["verify_s"]) >= {"1", "2", "4", "8", "16"}
    assert m["verify_ratio"]["1"] == 1.0
    assert set(m["self_draft_speedup"]) == {"2", "4", "8"}
    assert m["predicted"]["code"]["alpha"] == 0.9 and "speedup" in m["predicted"]["code"]["best"]
    q = next((tmp_path / "m").glob("target-*Q4_K_M.gguf"))
    h = read_header(q)
    assert h.get("general.file_type") == 15  # llama.cpp's MOSTLY_Q4_K_M
    assert len(h.get("tokenizer.ggml.tokens")) == gpu_probe.SHAPES["tiny"][5]
