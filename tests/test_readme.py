"""The README's Python example runs (on a tiny model standing in for the real pair)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_python_example_runs(tiny_target, tiny_draft, capsys):
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S)
    assert block, "the README has a Python example"
    code = block.group(1)
    assert "engine.generate(" in code and "draft_model=" in code and "lookahead=5" in code
    code = code.replace("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", str(tiny_target))
    code = code.replace("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", str(tiny_draft))
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.strip(), "the example prints its results"


def test_readme_names_the_two_commands_and_ci_calls_the_test_one():
    text = (ROOT / "README.md").read_text()
    assert "bash packaging/run.sh" in text and "bash packaging/test.sh" in text
    assert "bash packaging/test.sh" in (ROOT / ".ci" / "run").read_text()
