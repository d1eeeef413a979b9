"""tools/prompt_cache_ttft.py runs its sequence end to end on a tiny model and prints each kind."""

from __future__ import annotations

from tools import prompt_cache_ttft


def test_it_prints_every_kind_with_its_ratio(tiny_target, capsys):
    assert prompt_cache_ttft.main(["--target", str(tiny_target), "--chars", "400", "--reps", "1", "--ctx", "1024"]) == 0
    out = capsys.readouterr().out
    for kind in prompt_cache_ttft.KINDS:
        assert kind in out
    assert "1.00x cold" in out
