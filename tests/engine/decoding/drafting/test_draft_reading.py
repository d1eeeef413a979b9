"""Through the decoder: on a long prompt whose reading by the model draft costs more than
drafting saves, Auto never has the model read it, the output stays the target's, and the free
drafters beside the model are still offered (issue #47 item 1)."""

from __future__ import annotations

import pytest

from engine.decoding.decoder import Decoder
from engine.decoding.drafting.cost_model import CostModel
from engine.decoding.drafting.draft_context import DraftContext
from engine.decoding.drafting.drafters import Drafter, Proposal
from engine.decoding.drafting.lookup_drafter import PromptLookupDrafter
from engine.decoding.drafting.mixed_drafter import MixedDrafter
from engine.decoding.drafting.suffix_drafter import SuffixDrafter
from engine.decoding.events import DoneEvent
from engine.decoding.request import GenerationRequest
from engine.llamacpp.llama import Model
from engine.llamacpp.runtime import RuntimeParams


class Reader(Drafter):
    """A stand-in model draft that counts its prompt readings and proposals (always token 1)."""

    kind = "model"
    cost_class = "model"

    def __init__(self) -> None:
        self.reads = self.calls = 0
        self.seen = 0  # context tokens read

    def unread(self, context) -> int:
        return max(0, len(context) - 1 - self.seen)

    def read(self, context, limit=None, cancelled=lambda: False) -> int:
        self.reads += 1
        self.seen = len(context) - 1 if limit is None else min(len(context) - 1, self.seen + limit)
        return self.unread(context)

    def propose(self, context, k, sampler, rules=DraftContext()):
        self.calls += 1
        return Proposal([1] * k, [None] * k, [0.9] * k)


class Fixed(CostModel):
    """A CPU-like verify curve, a draft a tenth of the target, and `read_s` seconds per token
    for the draft's reading, whatever this machine measures."""

    def __init__(self, read_s: float) -> None:
        super().__init__(alpha_prior=0.8, prior_weight=1000.0)  # a draft that holds: drafting pays
        for n, t in {1: 1.0, 2: 1.1, 4: 1.3, 8: 1.8, 16: 3.0}.items():
            super().observe_verify(n, 0.03 * t)
        super().observe_draft(1, 0.003)
        super().observe_draft_read(1, read_s)

    def observe_verify(self, n: int, seconds: float) -> None:
        pass

    def observe_draft(self, drafted: int, seconds: float) -> None:
        pass

    def observe_draft_read(self, tokens: int, seconds: float) -> None:
        pass


@pytest.fixture(scope="module")
def target(tiny_target):
    m = Model(tiny_target)
    yield m
    m.close()


@pytest.mark.parametrize("read_s,reads", [(0.01, False), (1e-6, True)])
def test_auto_lets_the_model_draft_read_a_long_prompt_only_when_that_pays(target, read_s, reads):
    prompt = target.tokenize("the value of " * 60)  # ~180 tokens: 1.8 s to read at 0.01 s a token
    rt = RuntimeParams(n_ctx=512)
    base = Decoder(target, None, runtime=rt)
    want = [e for e in base.run(prompt, GenerationRequest(prompt, max_tokens=30)) if isinstance(e, DoneEvent)][0]
    base.close()
    model = Reader()
    mix = MixedDrafter(model, SuffixDrafter(with_lookup=False), PromptLookupDrafter())
    dec = Decoder(target, mix, runtime=rt, cost=Fixed(read_s))
    done = [e for e in dec.run(prompt, GenerationRequest(prompt, max_tokens=30, lookahead="auto"))
            if isinstance(e, DoneEvent)][0]
    dec.close()
    assert done.tokens == want.tokens  # exact whichever drafts
    assert (model.reads > 0) == reads and (model.calls > 0) == reads
    if not reads:
        assert done.stats.draft_sync_s == 0.0
        assert set(done.stats.accepted_by) <= {"lookup", "suffix:request", "suffix:history"}
