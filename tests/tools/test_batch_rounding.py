"""tools/batch_rounding.py (which passes round as one-token steps) on the tiny target: every
setting asked for is loaded and measured at every width, a difference is found where rows
differ, and bad arguments get one line."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tools import batch_rounding


def test_every_setting_is_loaded_and_measured_at_every_width(tiny_target, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TANDEM_FLASH_ATTN", "auto")
    from engine.llamacpp import llama

    loads: list[bool] = []
    real = llama.Model.__init__

    def init(self, *a, **kw):
        loads.append(kw.get("repack"))
        real(self, *a, **kw)

    monkeypatch.setattr(llama.Model, "__init__", init)
    out = tmp_path / "out"
    assert batch_rounding.main(["--model", str(tiny_target), "--widths", "2,4", "--repack", "on,off",
                                "--flash-attn", "auto,off", "--threads", "1", "--out", str(out)]) == 0
    assert loads == [True, False]
    assert os.environ["TANDEM_FLASH_ATTN"] == "auto"
    results = json.loads((out / "rows.json").read_text())["results"]
    assert [(r["repack"], r["flash_attn"]) for r in results] == [("on", "auto"), ("on", "off"), ("off", "auto"), ("off", "off")]
    for r in results:
        assert [row["tokens"] for row in r["rows"]] == [2, 4]
        assert all(row["largest_difference"] >= 0 and row["exact"] == (row["largest_difference"] == 0) for row in r["rows"])
        assert r["widest_exact"] == batch_rounding.widest_exact(r["rows"])
    assert "| off | off |" in capsys.readouterr().out


def test_a_row_that_differs_is_found_and_ends_the_exact_widths():
    one = [np.zeros(5, dtype=np.float32) for _ in range(3)]
    rows = np.zeros((3, 5), dtype=np.float32)
    rows[2, 1] = 0.25
    assert batch_rounding.largest_differences(one, rows) == [0.0, 0.0, 0.25]
    measured = [{"tokens": 2, "exact": True}, {"tokens": 4, "exact": False}, {"tokens": 8, "exact": True}]
    assert batch_rounding.widest_exact(measured) == 2
    assert batch_rounding.widest_exact([{"tokens": 2, "exact": False}]) == 1


@pytest.mark.parametrize("args, says", [(["--widths", "1,2"], "2 tokens or more"), (["--widths", "a"], "expected integers"),
                                        (["--repack", "maybe"], "expected some of on, off")])
def test_bad_arguments_get_one_line(tiny_target, capsys, args, says):
    with pytest.raises(SystemExit):
        batch_rounding.main(["--model", str(tiny_target), *args])
    assert says in capsys.readouterr().err


def test_a_missing_model_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        batch_rounding.main(["--model", str(tmp_path / "none.gguf")])
    assert "no such file" in capsys.readouterr().err
