"""`tandem demo` (run.sh's command without a display): the first race is chosen by the machine,
an edit with prompt lookup on a CPU, new code with the draft model on a GPU."""

from __future__ import annotations

import json

import pytest

from engine.cli import demo as cli_demo
from engine.cli.main import main
from engine.measure.demo import GENERATE_PROMPT, first_demo


def test_a_cpu_shows_an_edit_with_prompt_lookup_and_a_gpu_new_code_with_the_draft_model():
    cpu, gpu = first_demo(has_gpu=False), first_demo(has_gpu=True)
    assert cpu.draft == "lookup" and cpu.prompt.startswith("Rename the attribute `balance`") and "```python" in cpu.prompt
    assert gpu.draft == "model" and gpu.prompt == GENERATE_PROMPT


@pytest.mark.parametrize("gpu", [False, True])
def test_the_demo_command_races_what_this_machine_shows_best(capsys, monkeypatch, tiny_target, gpu):
    monkeypatch.setattr(cli_demo, "has_gpu", lambda: gpu)
    argv = ["demo", "--target", str(tiny_target), "--max-tokens", "6", "--json"]
    assert main(argv + (["--draft", str(tiny_target)] if gpu else [])) == 0
    race = json.loads(capsys.readouterr().out)
    assert race["speculative"]["stats"]["mode"] == ("model" if gpu else "lookup")
