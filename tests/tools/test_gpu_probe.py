"""The GPU probe's pipeline (write shaped models, quantize, measure, predict) on tiny shapes."""

from __future__ import annotations

import json
from pathlib import Path

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
    # greedy speculation wrote the target-alone tokens, with the self-draft and the free oracle
    assert all(v is None for v in m["self_draft_first_difference"].values())
    assert set(m["free_agreeing_draft_speedup"]) == {"4", "8"}
    assert all(v is None for v in m["free_agreeing_draft_first_difference"].values())
    assert m["predicted"]["code"]["alpha"] == 0.9 and "speedup" in m["predicted"]["code"]["best"]
    q = next((tmp_path / "m").glob("target-*Q4_K_M.gguf"))
    h = read_header(q)
    assert h.get("general.file_type") == 15  # llama.cpp's MOSTLY_Q4_K_M
    assert len(h.get("tokenizer.ggml.tokens")) == gpu_probe.SHAPES["tiny"][5]


def _probe(tmp_path, name: str, verify_ms, draft_ratio: float):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"target": "t.gguf", "draft": "d.gguf", "hardware": "backend CUDA",
                                "verify_s": {str(n): verify_ms(n) / 1000 for n in (1, 2, 4, 8, 9, 12, 16)},
                                "draft_cost_ratio": draft_ratio}))
    return path


def test_a_measured_probe_prices_the_replay_like_a_published_curve(tmp_path, capsys):
    """`draft_replay predict --probe`: a GPU-like flat curve with a cheap draft pays, a curve
    where n tokens cost n passes with a draft as dear as the target never does."""
    from tools import draft_replay

    rec = Path(__file__).resolve().parents[2] / "docs" / "results" / "host-overhead" / "draft-recording.jsonl"
    flat = _probe(tmp_path, "flat", lambda n: 2.0 + 0.05 * n, 0.1)
    steep = _probe(tmp_path, "steep", lambda n: 2.0 * n, 1.0)
    assert draft_replay.main(["predict", "--recording", str(rec), "--probe", str(flat), "--probe", str(steep),
                              "--only-probes"]) == 0
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[3:-1]]
            for line in capsys.readouterr().out.splitlines()[2:]}
    flat_lookup, flat_draft, steep_lookup, steep_draft = (float(c.split("x")[0]) for c in rows["all"])
    assert flat_draft > 1.5 and flat_lookup > 1.05
    assert steep_draft <= 1.0 and steep_lookup <= 1.02
    name, curve = draft_replay.curve_from_probe(json.loads(flat.read_text()), "flat")
    assert name == "measured:flat" and curve["draft_ratio"] == 0.1 and "backend CUDA" in curve["source"]
