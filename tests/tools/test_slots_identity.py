"""tools/slots_identity.py (why a text in the slots differs from its text alone) on the tiny
target: the texts alone and at once compared token by token, a difference named with the
target's margin where the two part, and the switch that loads weights unrepacked."""

from __future__ import annotations

import pytest

from engine import Engine
from tools import slots_identity


@pytest.fixture(scope="module")
def eng(tiny_target):
    e = Engine(tiny_target, n_ctx=256, metrics_log=False, prompt_cache=False)
    yield e
    e.close()


def test_the_tiny_targets_texts_at_once_are_its_texts_alone(eng):
    prompts = [eng.tokens_for(p) for p in ("the value of", "return total and", "while item is not", "class with value")]
    rows = slots_identity.compare(eng, prompts, 4, 24)
    assert [r.prompt for r in rows] == [0, 1, 2, 3]
    assert all(r.identical and r.index is None for r in rows), rows
    assert all(r.tokens > 0 for r in rows)
    assert "4 of 4 identical." in slots_identity.table(rows)


def test_a_difference_is_named_with_the_margin_where_the_texts_part(eng, monkeypatch):
    """Made to differ on purpose (the at-once run of prompt 1 writes one token fewer and then
    another): the row says where, with the target's own margin and verdict there."""
    from engine.decoding.slots.scheduler import SlotScheduler

    prompt = eng.tokens_for("the value of")
    alone = slots_identity.compare(eng, [prompt], 1, 12)[0]
    assert alone.identical
    real = SlotScheduler.stream
    calls = {"n": 0}

    def stream(self, *a, **kw):
        calls["n"] += 1
        for ev in real(self, *a, **kw):
            if calls["n"] == 2 and hasattr(ev, "tokens") and ev.__class__.__name__ == "DoneEvent":
                ev.tokens[5] = (ev.tokens[5] + 1) % eng.target.n_vocab
            yield ev

    monkeypatch.setattr(SlotScheduler, "stream", stream)
    row = slots_identity.compare(eng, [prompt], 1, 12)[0]
    assert not row.identical and row.index == 5 and row.margin is not None and row.margin > 0
    text = slots_identity.table([row])
    assert "0 of 1 identical." in text and "| no | 5 |" in text


def test_no_repack_loads_the_target_unrepacked(tiny_target, monkeypatch, capsys):
    """`--no-repack` reaches the load: the target is loaded with `repack=False` (a patched
    llama.cpp default did not, since `Model` sets `use_extra_bufts` itself)."""
    from engine.llamacpp import llama

    asked = []
    real = llama.Model.__init__

    def init(self, *a, **kw):
        asked.append(kw.get("repack", True))
        real(self, *a, **kw)

    monkeypatch.setattr(llama.Model, "__init__", init)
    assert slots_identity.main(["--target", str(tiny_target), "--no-repack", "--slots", "2", "--max-tokens", "4",
                                "--n-ctx", "128"]) == 0
    assert asked and asked[0] is False
    out = capsys.readouterr()
    assert "of 2 identical." in out.out and "weights repacked: 0 tensors" in out.err


def test_bad_arguments_are_one_line(capsys):
    with pytest.raises(SystemExit):
        slots_identity.main(["--target", "x.gguf", "--slots", "0"])
    assert "--slots and --max-tokens must be at least 1" in capsys.readouterr().err
