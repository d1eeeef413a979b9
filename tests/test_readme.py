"""The README's Python example runs (on a tiny model standing in for the real pair)."""

from __future__ import annotations

import re

import pytest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_python_example_runs(pulled_default_pair, capsys):
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S)
    assert block, "the README has a Python example"
    code = block.group(1)
    assert "engine.generate(" in code and "draft_model=" in code and "lookahead=5" in code
    exec(compile(code, "README.md", "exec"), {})  # as written: file names, not paths
    out = capsys.readouterr().out
    assert out.strip(), "the example prints its results"


@pytest.fixture
def pulled_default_pair(monkeypatch, tiny_target, tiny_draft):
    """The tiny models stand in for the default pair's files after `tandem pull`: the store
    finds them where it would find the pulled files (the README's names are resolved for real)."""
    from engine.models import store

    files = {"qwen2.5-coder-1.5b-instruct-q4_k_m.gguf": tiny_target, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf": tiny_draft}
    monkeypatch.setattr(store, "find_file", lambda spec, verify=False: files.get(spec.filename))
    monkeypatch.chdir(tiny_target.parent.parent)  # no file of those names in the working folder
    return files


def test_models_are_named_by_path_catalog_id_or_file_name(pulled_default_pair, tiny_target):
    from engine import Engine
    from engine.errors import ModelFileError
    from engine.models import catalog
    from engine.models.resolve import model_file

    target_id = next(m.id for m in catalog.load().models.values()
                     if any(f.filename == "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" for f in m.files))
    assert model_file(target_id) == model_file("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf") == tiny_target
    assert model_file(str(tiny_target)) == tiny_target
    with pytest.raises(ModelFileError, match="not a model id in the catalog"):
        model_file("no-such-model")
    eng = Engine(target_id, metrics_log=False, calibration=False)
    try:
        out = eng.generate("the value", max_tokens=4, draft_model="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", lookahead=2)
        assert len(out.tokens) == 4 and eng.target.path == tiny_target
    finally:
        eng.close()


def test_readme_names_the_two_commands_and_ci_calls_the_test_one():
    text = (ROOT / "README.md").read_text()
    assert "bash packaging/run.sh" in text and "bash packaging/test.sh" in text
    assert "bash packaging/test.sh" in (ROOT / ".ci" / "run").read_text()
