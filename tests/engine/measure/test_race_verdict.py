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


def test_a_race_on_a_busy_machine_says_so_in_its_reason():
    """Two busy programs beside a race made the same target-alone run take 35 s once and 91 s
    the next: the verdict must not present such a figure as what speculation does."""
    base = _stats(mode="target", lookahead="0")
    spec = _stats(mode="lookup", lookahead="auto (k=0 x10, 4 x10)", drafted=40, accepted=30)
    spec.wall_s = 1.0
    quiet, _ = verdict(base, spec, others_cpu={"target": 0.05, "speculative": 0.10})
    busy, _ = verdict(base, spec, others_cpu={"target": 0.05, "speculative": 0.62})
    unknown, _ = verdict(base, spec, others_cpu={"target": None, "speculative": None})
    assert quiet == unknown == "2.00x faster (wall-clock)"
    assert busy.startswith("2.00x faster (wall-clock): the machine was busy (other programs took 5% of the CPU "
                           "during the target-alone run and 62% during the speculative run)")
    assert busy.endswith("race again when it is quiet")
    none, _ = verdict(base, _stats(mode="lookup", lookahead="4"), others_cpu={"speculative": 0.9})
    assert none.startswith("About the same: nothing was drafted — prompt lookup found nothing")
    assert "the machine was busy" in none


def test_other_programs_share_of_the_cpu():
    from engine.measure.cpu_share import CpuSample, others_share

    a = CpuSample(busy_s=100.0, own_s=10.0, at=50.0, cores=2)
    b = CpuSample(busy_s=104.0, own_s=12.0, at=52.0, cores=2)  # 4 s busy, 2 of them ours, in 2 s x 2 cores
    assert others_share(a, b) == 0.5
    assert others_share(a, CpuSample(101.0, 11.5, 52.0, 2)) == 0.0  # never below 0
    assert others_share(None, b) is None and others_share(a, a) is None


def test_the_race_measures_the_load_beside_each_side(monkeypatch):
    """race() samples the CPU around each side and hands the shares to the verdict."""
    from engine.measure import cpu_share, racing

    samples = iter([cpu_share.CpuSample(0.0, 0.0, 0.0, 2), cpu_share.CpuSample(1.0, 1.0, 1.0, 2),
                    cpu_share.CpuSample(1.0, 1.0, 1.0, 2), cpu_share.CpuSample(3.0, 1.5, 2.0, 2)])
    monkeypatch.setattr(cpu_share, "sample", lambda: next(samples))

    class Result:
        def __init__(self, stats):
            self.stats, self.text, self.tokens = stats, "x", [1, 2]

    class FakeEngine:
        def generate(self, req, cancel=None, on_event=None):
            if req.draft is None:
                return Result(_stats(mode="target", lookahead="0"))
            return Result(_stats(mode="lookup", lookahead="4", drafted=20, accepted=10))

        def tokens_for(self, prompt, chat, system):
            return [0]

        def forget_prompts(self):
            pass

    from engine.decoding.settings import GenerationRequest

    r = racing.race(FakeEngine(), GenerationRequest("p", draft="lookup", lookahead=4))
    assert r.others_cpu == {"target": 0.0, "speculative": 0.75}
    assert "(other programs took 0% of the CPU during the target-alone run and 75% during the speculative" in r.headline
    assert r.to_dict()["others_cpu"] == r.others_cpu


def test_both_sides_of_a_race_read_the_whole_prompt(tiny_target):
    """Each draft choice keeps its own target context: an answer the chat had just written
    with prompt lookup left the prompt cached on the speculative side only, and the race
    counted that against target alone (first token 2.37 s against 0.46 s in the app)."""
    from engine import Engine
    from engine.decoding.events import PrefillEvent
    from engine.decoding.settings import GenerationRequest
    from engine.measure.racing import race

    eng = Engine(tiny_target, n_ctx=512, metrics_log=False)
    try:
        prompt = "the same question, asked in the chat before it is raced " * 3
        eng.generate(prompt, draft_model="lookup", lookahead=4, max_tokens=4, temperature=0)  # cached for lookup
        read: dict[str, int] = {}
        race(eng, GenerationRequest(prompt, draft="lookup", lookahead=4, max_tokens=4),
             on_event=lambda side, ev: read.setdefault(side, ev.total) if isinstance(ev, PrefillEvent) else None)
        assert read["target"] == read["speculative"] > 10
    finally:
        eng.close()
