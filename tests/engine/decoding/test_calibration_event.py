"""The pause while Auto's first answer measures this machine is announced in the event stream
(with an estimate of its length), once, right after the first step, so a window or a client
can say what is happening instead of showing a counter stuck at one token."""

from __future__ import annotations

from engine import Engine
from engine.decoding.decoder import CALIBRATION_DECODES, Decoder
from engine.decoding.events import CalibrationEvent, StepEvent


def test_measuring_is_announced_after_the_first_step_with_an_estimate(tiny_target, tiny_draft, monkeypatch):
    e = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False)  # nothing stored: the first answer measures
    order: list[str] = []
    real = Decoder._calibrate
    monkeypatch.setattr(Decoder, "_calibrate", lambda self, tok: (order.append("measuring"), real(self, tok))[1])
    try:
        events = list(e.stream("the value of", draft_model=tiny_draft, lookahead="auto", max_tokens=12))
        kinds = [ev.kind for ev in events]
        cal = [ev for ev in events if isinstance(ev, CalibrationEvent)]
        assert len(cal) == 1 and order == ["measuring"]
        at = kinds.index("calibration")
        assert kinds[:at].count("step") == 1 and kinds[at - 1] == "step", kinds  # after the first step, before the next
        first = next(ev for ev in events if isinstance(ev, StepEvent))
        expected = CALIBRATION_DECODES * first.verify_ms / 1000.0  # the first step's single-token pass, x20
        assert cal[0].estimate_s > 0 and abs(cal[0].estimate_s - expected) < 1e-9
        # measured once per engine: the next answer does not pause, nor say it does
        again = list(e.stream("the value of", draft_model=tiny_draft, lookahead="auto", max_tokens=6))
        assert not any(isinstance(ev, CalibrationEvent) for ev in again) and order == ["measuring"]
    finally:
        e.close()


def test_a_fixed_lookahead_never_measures_nor_says_so(tiny_target, tiny_draft):
    e = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False)
    try:
        events = list(e.stream("the value of", draft_model=tiny_draft, lookahead=3, max_tokens=8))
        assert not any(isinstance(ev, CalibrationEvent) for ev in events)
    finally:
        e.close()
