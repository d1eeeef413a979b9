"""`tandem --self-test [MODEL.gguf]`, the bundle's own check: with a model file its result line
names the file (a real quantized model is what reaches the CPU's SIMD kernels), then a line
per optional part made to work (a bundle fails when one is missing or broken); a bad path is
one line and a failing exit, no traceback."""

from __future__ import annotations

from app.main import _parts_ok, main
from engine.cli.parts import PARTS
from engine.models.tinymodel import write_model


def test_self_test_runs_the_given_model_and_names_it(tmp_path, capsys):
    tiny_target = write_model(tmp_path / "given-model.gguf", seed=3)
    assert main(["--self-test", str(tiny_target)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith(f"self-test: ok ({tiny_target.name}: "), out
    assert "acceptance" in out[0] and "CPU kernels" in out[0]
    # then a line per optional part, each made to work (the test extras install them all)
    assert [line.split(":")[0].strip() for line in out[1:]] == [name for name, _, _ in PARTS], out
    assert all(": ok (" in line for line in out[1:]), out
    assert "a tool listed and called" in "\n".join(out)


def _without(monkeypatch, module: str) -> None:
    """Make `import module` fail as if it were not installed."""
    import sys

    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)


def test_a_part_not_installed_is_a_note_from_source_and_a_failure_in_a_bundle(monkeypatch, capsys):
    import sys

    _without(monkeypatch, "mcp")
    assert _parts_ok()  # from source: a note naming the extra
    out = capsys.readouterr().out
    assert "tools (MCP): ok (not installed (mcp): pip install 'tandem-studio[mcp]')" in out, out
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert not _parts_ok()  # a bundle promises every part
    assert "tools (MCP): FAILED (not installed (mcp))" in capsys.readouterr().out


def test_a_broken_part_fails_in_one_line(monkeypatch, capsys):
    import engine.cli.parts as parts

    def broken() -> str:
        raise OSError("libpdfium.so: cannot open shared object file")

    monkeypatch.setattr(parts, "PARTS", (("pictures", broken, "vision"),) + parts.PARTS[2:])
    assert not _parts_ok()
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "  pictures: FAILED (broken: OSError: libpdfium.so: cannot open shared object file)", out
    assert all(": ok (" in line for line in out[1:]), out


def test_self_test_of_a_missing_model_says_so_in_one_line(tmp_path, capsys):
    missing = tmp_path / "nope.gguf"
    assert main(["--self-test", str(missing)]) == 1
    out = capsys.readouterr()
    assert out.out.strip().splitlines() == [f"self-test: FAILED (nope.gguf: {missing}: no such file)"]
    assert "Traceback" not in out.err
