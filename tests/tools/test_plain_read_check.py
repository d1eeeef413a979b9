"""tools/plain_read_check.py (a never-read document with and without the plain twin) on the tiny
target: both modes run interleaved as real processes, each with the prompt cache emptied (the
whole document read every time), the machine's calibration kept, the ratios summed."""

from __future__ import annotations

import json

from engine.documents.blocks import attachment_block, with_attachments
from tools import plain_read_check


def test_both_modes_read_the_whole_document_each_time(tiny_target, tmp_path, capsys):
    docs = {"a.txt": "the value of the list and the data " * 12, "b.txt": "the data and the value " * 14}
    lines = [{"id": f"{n}-{k}", "kind": k, "prompt": with_attachments(q, [attachment_block(n, d)])}
             for n, d in docs.items() for k, q in (("quote", "Quote the value."), ("summary", "Sum it up."))]
    suite = tmp_path / "docs.jsonl"
    suite.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "out"
    assert plain_read_check.main(["--target", str(tiny_target), "--suite", str(suite), "--repeat", "2",
                                  "--max-tokens", "4", "--out", str(out)]) == 0
    got = json.loads((out / "runs.json").read_text())
    runs = got["runs"]
    assert sorted((r["doc"], r["mode"], r["rep"]) for r in runs) == sorted(
        (d, m, rep) for d in docs for m in ("never", "auto") for rep in (0, 1))
    assert [r["mode"] for r in runs[:4]] == ["never", "auto", "auto", "never"]  # interleaved, swapped
    assert all(r["wall_s"] > r["ttft_s"] > 0 and r["tokens"] > 50 and r["cached"] == 0 for r in runs)
    s = got["summary"]
    assert s["runs"] == 4 and s["same_text"] == 4  # nothing repacked in a tiny F32 model: one reading
    assert s["ttft_s_ratio"][1] <= s["ttft_s_ratio"][0] <= s["ttft_s_ratio"][2]
    assert "| first token |" in capsys.readouterr().out
