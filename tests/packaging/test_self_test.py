"""`tandem --self-test [MODEL.gguf]`, the bundle's own check: with a model file its result line
names the file (a real quantized model is what reaches the CPU's SIMD kernels); a bad path
is one line and a failing exit, no traceback."""

from __future__ import annotations

from app.main import main
from engine.models.tinymodel import write_model


def test_self_test_runs_the_given_model_and_names_it(tmp_path, capsys):
    tiny_target = write_model(tmp_path / "given-model.gguf", seed=3)
    assert main(["--self-test", str(tiny_target)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith(f"self-test: ok ({tiny_target.name}: "), out
    assert "acceptance" in out[0] and "CPU kernels" in out[0]


def test_self_test_of_a_missing_model_says_so_in_one_line(tmp_path, capsys):
    missing = tmp_path / "nope.gguf"
    assert main(["--self-test", str(missing)]) == 1
    out = capsys.readouterr()
    assert out.out.strip().splitlines() == [f"self-test: FAILED (nope.gguf: {missing}: no such file)"]
    assert "Traceback" not in out.err
