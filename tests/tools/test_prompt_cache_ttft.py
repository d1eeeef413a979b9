"""tools/prompt_cache_ttft.py runs its sequence end to end on a tiny model and prints each kind."""

from __future__ import annotations

from tools import prompt_cache_ttft


def test_it_prints_every_kind_with_its_ratio(tiny_target, capsys):
    assert prompt_cache_ttft.main(["--target", str(tiny_target), "--chars", "400", "--reps", "1", "--ctx", "1024"]) == 0
    out = capsys.readouterr().out
    for kind in prompt_cache_ttft.KINDS:
        assert kind in out
    assert "1.00x cold" in out


def test_served_it_asks_a_real_server_and_says_what_came_from_its_cache(tiny_target, tmp_path, capsys):
    """Through `tandem serve` children on the tiny model (the default slots): the first question
    reads its document whole; again after another document, with another draft choice and after a
    restart, the server's usage says the document came from its prompt cache."""
    import json

    doc, other = "the value of the list " * 30, "import data for the class " * 30
    suite = tmp_path / "docs.jsonl"
    lines = [{"id": f"a{i}", "prompt": f"Attached file `a.txt`:\n\n```\n{doc}\n```\n\n{q}"}
             for i, q in enumerate(["Quote it.", "List it.", "Sum it up."])]
    lines.append({"id": "b", "prompt": f"Attached file `b.txt`:\n\n```\n{other}\n```\n\nQuote it."})
    suite.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert prompt_cache_ttft.main(["--serve", "--target", str(tiny_target), "--suite", str(suite), "--reps", "1",
                                   "--ctx", "1024", "--max-tokens", "2", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    got = json.loads((tmp_path / "out" / "results.json").read_text())["cached_tokens"]
    assert set(got) == set(prompt_cache_ttft.SERVED) and all(k in out for k in prompt_cache_ttft.SERVED)
    cold = got[prompt_cache_ttft.SERVED[0]][0].split(" of ")
    assert int(cold[0]) == 0 and int(cold[1]) > 200
    for kind in prompt_cache_ttft.SERVED[1:]:
        n, total = (int(x) for x in got[kind][0].split(" of "))
        assert n > 200 and total - n < 40, (kind, got)  # the document and the template before it


def test_pair_without_serve_is_refused_in_one_line(capsys):
    import pytest

    with pytest.raises(SystemExit):
        prompt_cache_ttft.main(["--pair", "qwen2.5-coder-1.5b"])
    assert "--pair needs --serve" in capsys.readouterr().err
