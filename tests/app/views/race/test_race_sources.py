"""The race's side summary names the drafters that supplied the accepted tokens when several
took turns (a model draft with the free drafters beside it, under Auto)."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from app.views.race.verdict import side_summary  # noqa: E402
from engine.decoding.events import RunStats  # noqa: E402


def test_the_race_says_which_drafter_supplied_the_accepted_tokens():
    mixed = RunStats(generated_tokens=40, steps=12, drafted=30, accepted=20,
                     accepted_by={"model": 12, "suffix:history": 8}).finalize()
    assert "drafted by model 12, suffix:history 8" in side_summary(mixed)
    alone = RunStats(generated_tokens=40, steps=12, drafted=30, accepted=20, accepted_by={"model": 20}).finalize()
    assert "drafted by" not in side_summary(alone)  # one drafter: nothing to tell apart
