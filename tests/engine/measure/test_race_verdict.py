"""A race where nothing was drafted says why in terms of what ran: prompt lookup's proposals
cost nothing to make, so "the draft costs more than it saves" would be false for it."""

from __future__ import annotations

from engine.decoding.events import RunStats
from engine.measure.racing import verdict


def _stats(**kw) -> RunStats:
    st = RunStats(generated_tokens=40, steps=40, wall_s=2.0, decode_s=1.8, **kw)
    return st.finalize()


def test_nothing_drafted_is_explained_for_the_drafter_that_ran():
    base = _stats(mode="target", lookahead="0")
    lookup, _ = verdict(base, _stats(mode="lookup", lookahead="auto (k=0 x40)"))
    model, _ = verdict(base, _stats(mode="model", lookahead="auto (k=0 x40)"))
    fixed, _ = verdict(base, _stats(mode="lookup", lookahead="4"))
    zero, _ = verdict(base, _stats(mode="model", lookahead="0"))
    assert lookup.startswith("About the same: nothing was drafted — Auto checked none of prompt lookup's proposals")
    assert "draft costs" not in lookup and "a fixed lookahead tries them" in lookup
    assert model.endswith("(the draft costs more than it saves)")
    assert fixed.endswith("prompt lookup found nothing in the prompt to copy") and zero.endswith("the lookahead was 0")
