"""How many tokens to draft next step: a fixed k (the slider) or `Auto` (the cost model's
choice, including k = 0, plain target decoding, when speculation does not pay), and the live
handle a slider changes mid-generation. The cost model itself is in cost_model.py.
"""

from __future__ import annotations

import threading
from typing import Callable

from .cost_model import MAX_LOOKAHEAD, CostModel, Costs, Prediction, TextAcceptance
from .set_aside import MAIN, SetAside
from .source_choice import SourceChooser

class Lookahead:
    """A lookahead policy. The decoder asks it, each step, how many tokens to draft
    (`choose`), how a model draft should stop early (`draft_gate`), and how many of the
    proposed tokens to verify (`verify_count`); before the first step, whether the drafter
    must read the prompt now (`drafts_from_start`)."""

    label: str = ""
    trims_proposals = False  # True: the drafter may propose more than `choose` and this policy cuts
    chooses_sources = False  # True: a drafter with several sources picks one per step (`source_chooser`)
    first_step_plain = False  # True: the first step verifies no drafts (the first token comes as soon as alone)

    def choose(self, room: int, cost: CostModel, unread: int = 0) -> int:  # pragma: no cover - interface
        """Tokens to draft this step, at most `room`; `unread`: tokens a model draft must read
        before it can draft (its prompt, deferred until the first draft, then read in chunks
        between plain steps)."""
        raise NotImplementedError

    def feedback(self, drafted: int, accepted: int, source: str = "", beside: bool = False) -> None:
        """Told after each step how the verified proposal held: `source` names what drafted it,
        `beside` says it was a free proposal chosen by `source_chooser`, not the step's own draft
        (Auto sets aside what is not accepted)."""

    def set_aside(self) -> dict[str, str]:
        """The sources this policy stopped drafting with, by name: why, in words."""
        return {}

    @property
    def drafts_from_start(self) -> bool:
        """Will the first step surely draft? Then a model drafter reads the prompt with the target."""
        return False

    def draft_gate(self, cost: CostModel) -> "Callable[[int, float], tuple[bool, bool]] | None":
        """A rule that stops a model draft early by its confidence (None: draft all k)."""
        return None

    def verify_count(self, proposal: "object", k: int, cost: CostModel, text: "TextAcceptance | None") -> int:
        """How many of the proposed tokens (asked for `k`) the target verifies."""
        return k

    def source_chooser(self, cost: CostModel, room: int) -> SourceChooser | None:
        """How a drafter with several sources picks one this step (None: its model drafts alone)."""
        return None

    def fresh(self) -> "Lookahead":  # pragma: no cover - interface
        """A new policy with the same settings and no run state (one per generation)."""
        raise NotImplementedError


class Fixed(Lookahead):
    """Draft exactly k tokens per step (fewer if the drafter has less). Thread-safe setter:
    a slider may change k while a generation runs; it applies from the next step."""

    def __init__(self, k: int):
        self._k = _clamp(k)

    @property
    def k(self) -> int:
        return self._k

    def set(self, k: int) -> None:
        self._k = _clamp(k)

    @property
    def label(self) -> str:  # type: ignore[override]
        return str(self._k)

    def choose(self, room: int, cost: CostModel, unread: int = 0) -> int:
        return max(0, min(self._k, room))

    @property
    def drafts_from_start(self) -> bool:
        return self._k > 0

    def fresh(self) -> "Fixed":
        return Fixed(self._k)


class Auto(Lookahead):
    """Pick the k with the best predicted tokens/s from measured costs, k = 0 included.

    A source whose proposals are not accepted is set aside within a few steps and retried
    rarely (set_aside.py): the measured alpha keeps a prior that, on a nearly flat verify
    curve, would keep predicting a gain from a draft that never holds.

    When k = 0 wins only because alpha is low (not because drafting can never pay on this
    hardware), probe now and then with a small k so alpha can recover when the text
    changes. A probe costs a draft catch-up and a wider verify, so it is only worth it when
    the upside is real (a predicted gain of PROBE_GAIN at an optimistic alpha), and probes
    back off exponentially while they do not change the decision.
    """

    label = "auto"
    trims_proposals = True
    chooses_sources = True
    # The first token comes as soon as the target alone's (issue #47): a first pass widened by
    # drafts delays it, and at most one step's accepted drafts are given up.
    first_step_plain = True
    REFRESH_EVERY = 64  # while speculating, one plain step at least this often (steps)...
    REFRESH_S = 5.0  # ...or seconds, re-measures plain decoding under the current load
    FIRST_PROBE = 8  # steps of plain decoding before the first probe
    MAX_PROBE_INTERVAL = 128
    PROBE_GAIN = 1.10
    HOPEFUL_ALPHA = 0.9  # the acceptance a probe hopes for, whatever the last probes found
    ANSWER_TOKENS = 256  # what a draft's reading of the prompt is paid back over, at most (a chat answer)

    def __init__(self, max_k: int = MAX_LOOKAHEAD, min_gain: float = 1.02):
        self.max_k = _clamp(max_k)
        self.min_gain = min_gain  # demand a predicted 2% gain before speculating
        self._probe_interval = self.FIRST_PROBE
        self._since_probe = 0
        self._since_plain = 0
        self.last_prediction: Prediction | None = None
        self.standing = SetAside()

    def choose(self, room: int, cost: CostModel, unread: int = 0) -> int:
        self.standing.tick()  # one call per step: the clock of retries
        cap = max(0, min(self.max_k, room))
        if cap == 0 or not self.standing.allows(MAIN):
            return 0
        if cost.free_drafter:
            return cap  # a proposal costs nothing: `trim` keeps what its confidence pays for
        costs = cost.snapshot()
        best = costs.best(cap)
        self.last_prediction = best
        if best.k > 0 and best.speedup >= self.min_gain:
            if not self._reading_pays(costs, best, unread, room, cost.draft_load_s):
                return 0  # the free drafters (which read nothing) may still draft: `source_chooser`
            self._since_probe = 0
            self._probe_interval = self.FIRST_PROBE  # if it stops paying, look again soon
            self._since_plain += 1
            if self._since_plain >= self.REFRESH_EVERY or (self._since_plain > 4 and cost.age_of_plain() > self.REFRESH_S):
                self._since_plain = 0
                return 0
            return best.k
        self._since_plain = 0
        # Could drafting pay clearly if the draft were right more often? Asked at an alpha
        # no lower than HOPEFUL_ALPHA: a few failed probes (a chat reply's first words) must
        # not rule drafting out for good, since alpha only moves when a probe drafts.
        hopeful = costs.best(cap, alpha=max(self.HOPEFUL_ALPHA, min(0.95, costs.alpha + 0.3)))
        if hopeful.k == 0 or hopeful.speedup < self.PROBE_GAIN or \
                not self._reading_pays(costs, hopeful, unread, room, cost.draft_load_s):
            return 0  # timing alone rules speculation out: do not waste probes
        self._since_probe += 1
        if self._since_probe >= self._probe_interval:
            self._since_probe = 0
            self._probe_interval = min(self._probe_interval * 2, self.MAX_PROBE_INTERVAL)
            return min(cap, max(1, min(hopeful.k, 2)))
        return 0

    def _reading_pays(self, costs: "Costs", p: Prediction, unread: int, room: int, load_s: float = 0.0) -> bool:
        """Would drafting as `p` predicts save more, over the rest of the answer (at most
        ANSWER_TOKENS) once the draft has read, than the draft's reading of `unread` tokens
        (and its model's load first, `load_s`: a draft loaded when needed) costs? It reads in
        chunks between plain steps (one a step, `Costs.read_chunk`), so the tokens of those
        steps are written undrafted. On a long prompt (a document) a model draft's prefill can
        cost more than all it would save."""
        if unread <= 0 and load_s <= 0:
            return True
        saved_per_token = costs.verify_time(1) - p.seconds_per_step / p.tokens_per_step
        after = min(room, self.ANSWER_TOKENS) - costs.catch_up_steps(unread)
        return after * saved_per_token > costs.draft_read_time(unread) + load_s

    def feedback(self, drafted: int, accepted: int, source: str = "", beside: bool = False) -> None:
        self.standing.observe(source if beside else MAIN, source or "draft", drafted, accepted)

    def set_aside(self) -> dict[str, str]:
        return self.standing.reasons()

    def fresh(self) -> "Auto":
        return Auto(self.max_k, self.min_gain)

    def draft_gate(self, cost: CostModel) -> "Callable[[int, float], tuple[bool, bool]]":
        return self.gate(cost)

    def source_chooser(self, cost: CostModel, room: int) -> SourceChooser:
        """Each step, the model draft (at the k `choose` gave), a free proposal or none, by
        expected accepted tokens per second from measured acceptance and costs; a free source
        set aside is not offered (unless its retry is due)."""
        return SourceChooser(cost.snapshot(), room, self.min_gain, self.standing.allows)

    def verify_count(self, proposal: "object", k: int, cost: CostModel, text: "TextAcceptance | None") -> int:
        return self.trim(proposal, cost, text)

    def trim(self, proposal: "object", cost: CostModel, text: TextAcceptance | None = None) -> int:
        """How many of a free drafter's proposed tokens to verify: the k with the best expected
        tokens per second from each token's confidence (calibrated, and lowered where this text
        has proved worse: `text`) and the measured verify curve. In a pass shared with other
        slots (`CostModel.load`) the rate is the whole pass's: a draft must pay for what it adds
        to everyone's pass, so the fuller the batch, the fewer tokens are verified. Never more
        than twice the widest pass measured (at least MAX_LOOKAHEAD): confidences are not
        independent, and a pass wider than any measured is priced by extrapolation (measured: a
        suffix draft's 238 tokens verified at once on a CPU, 13 accepted, 2 s of a 3 s answer)."""
        tokens = getattr(proposal, "tokens")
        if not tokens:
            return 0
        if not cost.free_drafter:
            return len(tokens)  # a model draft was gated while it was drafted (see `gate`)
        costs = cost.snapshot()
        conf = getattr(proposal, "confidence", None) or [costs.alpha] * len(tokens)
        plain = costs.rate(1.0, costs.pass_time(1))  # the pass's tokens per second with no draft here
        best_k, best_rate, best_expect = 0, self.min_gain * plain, 1.0
        cum, expect = 1.0, 1.0
        trust = text.confidence if text is not None else cost.calibrated_confidence
        widest = max((n for n, _ in costs.verify_pts), default=0)
        for i, c in enumerate(conf[: min(len(tokens), max(MAX_LOOKAHEAD, 2 * widest))], 1):
            cum *= trust(c)
            expect += cum
            rate = costs.rate(expect, costs.pass_time(i + 1))
            if rate > best_rate:
                best_k, best_rate, best_expect = i, rate, expect
        self.last_prediction = Prediction(best_k, best_expect, costs.pass_time(best_k + 1), best_rate / plain)
        return best_k

    def gate(self, cost: CostModel) -> "Callable[[int, float], tuple[bool, bool]]":
        """A stop rule for a model draft: keep token i while its chance of being accepted
        (cumulative, calibrated by measured acceptance) is worth its extra verify cost, and draft
        another only while the expected gain beats a draft step. Learned, unlike a fixed p-min."""
        costs = cost.snapshot()
        v1 = costs.verify_time(1)
        d = costs.draft_time(1)
        alpha = costs.alpha
        state = {"cum": 1.0}

        def gate(i: int, conf: float) -> tuple[bool, bool]:
            if i == 1:
                state["cum"] = 1.0
            state["cum"] *= cost.calibrated_confidence(conf)
            cum = state["cum"]
            keep = cum * v1 >= costs.verify_time(i + 1) - costs.verify_time(i)
            more = keep and cum * alpha * v1 >= d + costs.verify_time(i + 2) - costs.verify_time(i + 1)
            return keep, more

        return gate


class LiveLookahead:
    """The lookahead of one running generation: changeable from another thread (a slider,
    the Auto switch) and applied from the next step. Records the k used at each step, so the
    run's statistics report what was actually used, not the setting at the start."""

    def __init__(self, initial: "Lookahead | int | str" = 0):
        self._lock = threading.Lock()
        self._current = parse_lookahead(initial)
        self.k_counts: dict[int, int] = {}

    @property
    def current(self) -> Lookahead:
        return self._current

    @property
    def label(self) -> str:
        return self._current.label

    def set(self, value: "Lookahead | int | str") -> None:
        """Thread-safe: a Fixed k changes in place; anything else replaces the policy."""
        new = parse_lookahead(value)
        with self._lock:
            cur = self._current
            if isinstance(cur, Fixed) and isinstance(new, Fixed) and not isinstance(value, Lookahead):
                cur.set(new.k)
            else:
                self._current = new

    def choose(self, room: int, cost: "CostModel", unread: int = 0) -> int:
        return self._current.choose(room, cost, unread)

    def feedback(self, drafted: int, accepted: int, source: str = "", beside: bool = False) -> None:
        self._current.feedback(drafted, accepted, source, beside)

    def set_aside(self) -> dict[str, str]:
        return self._current.set_aside()

    def record(self, k: int) -> None:
        self.k_counts[k] = self.k_counts.get(k, 0) + 1

    def summary(self) -> str:
        """The last slider value ("5"), or for Auto the ks it drafted: "auto (k=0 x40, 3 x12)".
        The full distribution is in `k_counts` either way."""
        label = self.label
        used = sorted(self.k_counts.items())
        if label != "auto" or not used:
            return label
        return f"{label} (k=" + ", ".join(f"{k} x{n}" for k, n in used) + ")"


def _clamp(k: int) -> int:
    if not isinstance(k, int) or isinstance(k, bool):
        raise TypeError(f"lookahead must be an int, got {k!r}")
    return max(0, min(int(k), MAX_LOOKAHEAD))


def parse_lookahead(value: "int | str | Lookahead") -> Lookahead:
    """`5` -> Fixed(5); `"auto"` -> Auto(); a Lookahead passes through."""
    if isinstance(value, Lookahead):
        return value
    if isinstance(value, str):
        v = value.strip().lower()
        if v == "auto":
            return Auto()
        if v.lstrip("-").isdigit():
            value = int(v)
        else:
            raise ValueError(f"lookahead must be an integer 0..{MAX_LOOKAHEAD} or 'auto', got {value!r}")
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value <= MAX_LOOKAHEAD:
            raise ValueError(f"lookahead must be in 0..{MAX_LOOKAHEAD}, got {value}")
        return Fixed(value)
    raise ValueError(f"lookahead must be an integer or 'auto', got {value!r}")


__all__ = ["Lookahead", "Fixed", "Auto", "parse_lookahead", "MAX_LOOKAHEAD", "LiveLookahead"]
