"""The flash-attention check on a tiny model: both settings at every depth and width, each
context really made with its setting, the process's own setting left as it was."""

from __future__ import annotations

import json
import os

import pytest

from tools import flash_attn_check


def test_both_settings_are_measured_at_every_depth_and_width(tiny_target, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TANDEM_FLASH_ATTN", "auto")
    made: list[str] = []
    real = flash_attn_check._context

    def spy(model, setting, n_ctx, threads):
        ctx = real(model, setting, n_ctx, threads)
        made.append(ctx.state_identity)
        return ctx

    monkeypatch.setattr(flash_attn_check, "_context", spy)
    out = tmp_path / "out"
    assert flash_attn_check.main(["--model", str(tiny_target), "--depths", "40,70", "--widths", "1,3",
                                  "--rounds", "2", "--threads", "1", "--out", str(out)]) == 0
    assert os.environ["TANDEM_FLASH_ATTN"] == "auto"
    assert [("fa1" in s, "fa0" in s) for s in made] == [(True, False), (False, True)] * 2
    rows = json.loads((out / "rows.json").read_text())["rows"]
    assert [(r["depth"], r["tokens"]) for r in rows] == [(40, 1), (40, 3), (70, 1), (70, 3)]
    assert all(r["on_ms"] > 0 and r["off_ms"] > 0 and r["off_vs_on"] == pytest.approx(r["off_ms"] / r["on_ms"], rel=0.05)
               for r in rows)
    assert "| 70 | 3 |" in capsys.readouterr().out


def test_bad_arguments_get_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        flash_attn_check.main(["--model", str(tmp_path / "none.gguf")])
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        flash_attn_check.main(["--model", str(tmp_path), "--depths", "a,b"])
    assert "expected integers" in capsys.readouterr().err
