"""`accepted` (the server's `draft_n_accepted`) counts the drafts the answer used: a draft that
agrees with the target keeps drafting past the end of the answer (its EOS, a stop string), and
those drafts, though the target would have accepted them, are not output. (The token limit
needs no check: the decoder never drafts past it.)"""

from __future__ import annotations

import pytest

from engine import Engine
from scripted_models import write_scripted_pair

SCRIPT = ["<s1>", "<s2>", "<s3>"]  # then <|im_end|>


@pytest.fixture(scope="module")
def caller(tmp_path_factory):
    target, _ = write_scripted_pair(tmp_path_factory.mktemp("accepted"), SCRIPT, name="accepted")
    with Engine(target, n_ctx=256, metrics_log=False) as eng:
        yield eng, target


@pytest.mark.parametrize("stop", [(), ("<s2>",)], ids=["eos", "stop"])
def test_drafts_after_the_end_are_not_counted_as_accepted(caller, stop):
    eng, target = caller
    base = eng.generate("x\n", max_tokens=40, stop=stop)
    # the target drafting for itself: every draft is accepted, also those after the end
    fast = eng.generate("x\n", draft_model=target, lookahead=8, max_tokens=40, stop=stop)
    assert fast.tokens == base.tokens and fast.text == base.text
    s = fast.stats
    assert s.drafted >= 8  # it did draft past the end
    used = s.provenance_counts["draft"]
    # the drafts output, plus at most the one that ended the answer (a drafted EOS was a right guess)
    assert used <= s.accepted <= used + 1, (s.accepted, s.provenance_counts)
    assert s.accepted <= s.generated_tokens + 1
