"""The prefill comparison on a tiny model with a stand-in llama-bench (a script answering in
llama-bench's JSON): every setting measured on both sides, interleaved, the ratio the medians'."""

from __future__ import annotations

import json
import stat

from tools import prefill_peer


def _fake_bench(tmp_path, tok_s: float = 1000.0):
    calls = tmp_path / "calls"
    script = tmp_path / "llama-bench"
    script.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\necho '[{{\"avg_ts\": {tok_s}}}]'\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script), calls


def test_each_setting_is_read_by_tandem_and_llama_bench_alike(tiny_target, tmp_path, capsys):
    binary, calls = _fake_bench(tmp_path)
    out = tmp_path / "out"
    assert prefill_peer.main(["--model", str(tiny_target), "--llama-bench", binary, "--tokens", "96",
                              "--batches", "32,64", "--threads", "1", "--repeat", "2", "--out", str(out)]) == 0
    sent = calls.read_text().splitlines()
    assert len(sent) == 8 and all("-p 96 -n 0" in s and "-t 1" in s for s in sent)
    assert [s.split("-b ")[1].split()[0] for s in sent] == ["32", "32", "64", "64"] * 2  # interleaved repetitions
    assert [s.split("--repack ")[1].split()[0] for s in sent] == ["1", "0"] * 4  # both weight layouts
    rows = json.loads((out / "prefill_peer.json").read_text())["rows"]
    assert [(r["tokens"], r["batch"]) for r in rows] == [(96, 32), (96, 64)]
    for r in rows:
        assert set(r["tandem_tok_s"]) == {"never", "auto"}
        assert all(len(v) == 2 and all(x > 0 for x in v) for v in r["tandem_tok_s"].values())
        assert r["ratio"] > 0 and r["llama_bench_tok_s"] == {"1": [1000.0, 1000.0], "0": [1000.0, 1000.0]}
    printed = capsys.readouterr().out
    assert "| 96 | 64 | 1 |" in printed and "Tandem, reading auto" in printed and "llama-bench, repack 0" in printed
