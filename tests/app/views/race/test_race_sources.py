"""The race's side summary names the drafters that supplied the accepted tokens when several
took turns (a model draft with the free drafters beside it, under Auto), and a drafter Auto set
aside because its proposals were not accepted."""

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


def test_the_race_says_in_words_when_auto_set_a_draft_aside_and_why():
    st = RunStats(generated_tokens=120, steps=120, drafted=10, accepted=0,
                  set_aside={"mtp": "0 of 10 drafted tokens accepted (since step 4)"}).finalize()
    assert "mtp set aside: 0 of 10 drafted tokens accepted (since step 4)" in side_summary(st)
    assert "set aside" not in side_summary(RunStats(generated_tokens=4, steps=4).finalize())
