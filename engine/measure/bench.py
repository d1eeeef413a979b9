"""The benchmark: prompt suites x modes (target alone, fixed-k sweep, auto, prompt lookup),
warm-up, interleaved repetitions, medians and ratios measured in the same run, output
quality checks, the cost model's prediction beside the measurement, and reports.

Speed is only ever reported as measured here: speedup = tok/s / target-alone tok/s of the
same prompt in the same repetition, then the median over prompts and repetitions.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import Cancelled
from ..decoding.drafting.cost_model import CostModel
from .bench_history import BenchHistories, run_groups
from .bench_long import by_kind
from .bench_requests import by_request
from .bench_pace import Estimate, estimate, record_pace, target_token_seconds  # noqa: F401 (the bench's API)
from .suites import BenchError, BenchPrompt, Suite, fitting_prompts, with_fim_tokens

# -- configurations -------------------------------------------------------------------------
@dataclass(frozen=True)
class Config:
    name: str  # "target", "k=4", "auto", "lookup", "lookup k=4"
    mode: str  # target | fixed | auto | lookup
    draft: Any  # None | path | "lookup"
    lookahead: Any  # int | "auto"

    @property
    def k(self) -> int | None:
        return self.lookahead if isinstance(self.lookahead, int) else None


MODES = ("target", "fixed", "auto", "lookup")


def plan_configs(draft: Any, modes: Sequence[str] = MODES, sweep: Sequence[int] = (1, 2, 4, 8)) -> list[Config]:
    """Target alone first (the reference), then the draft's fixed-k sweep, auto, lookup."""
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise BenchError(f"unknown mode(s) {bad}; choose from {', '.join(MODES)}")
    from ..decoding.drafting.choice import DraftChoice, DraftKind

    keyword = DraftChoice.parse(draft).keyword if draft is not None else None  # "lookup", "mtp": no file
    is_lookup = keyword == DraftKind.LOOKUP.value
    out = [Config("target", "target", None, 0)]
    if draft is not None:
        prefix = f"{keyword} " if keyword else ""
        if "fixed" in modes:
            out += [Config(f"{prefix}k={k}", "fixed", draft, int(k)) for k in sweep]
        if "auto" in modes:
            out.append(Config(f"{prefix}auto", "auto", draft, "auto"))
    if "lookup" in modes and not is_lookup:
        out.append(Config("lookup", "lookup", "lookup", "auto"))
    return out


# -- runs -----------------------------------------------------------------------------------
@dataclass
class Run:
    suite: str
    prompt_id: str
    config: str
    mode: str
    lookahead: Any
    rep: int
    generated_tokens: int
    time_to_first_token_s: float
    decode_tokens_per_s: float
    acceptance_rate: float
    mean_tokens_per_step: float
    steps: int
    drafted: int
    accepted: int
    finish_reason: str
    text: str
    tokens: list[int]
    step_k: list[int] = field(default_factory=list)
    step_drafted: list[int] = field(default_factory=list)
    step_accepted: list[int] = field(default_factory=list)
    step_draft_ms: list[float] = field(default_factory=list)
    step_verify_ms: list[float] = field(default_factory=list)
    identical: bool | None = None  # vs target alone, same prompt and repetition (greedy)
    divergence_index: int | None = None
    divergence_margin: float | None = None
    divergence_bug: bool = False
    wall_s: float = 0.0  # prompt in, last token out (what the user waited)
    run_id: str | None = None  # the run of several requests this one belongs to
    request: int = 1  # its place in that run, from 1
    accepted_by: dict[str, int] = field(default_factory=dict)  # accepted draft tokens per drafter that proposed them
    kind: str | None = None  # quote | extract | summary: a question about a document (the long-prompt suites)
    prompt_tokens: int = 0
    draft_sync_s: float = 0.0  # a model draft reading the prompt (inside the wall-clock)


@dataclass
class Row:
    """Summary of one suite x configuration: medians (min, max) over prompts and repetitions."""

    suite: str
    config: str
    mode: str
    lookahead: Any
    runs: int
    tok_s_median: float
    tok_s_min: float
    tok_s_max: float
    speedup_median: float  # decode tok/s ratio
    speedup_min: float
    speedup_max: float
    wall_speedup_median: float  # target wall-clock / this wall-clock (the headline)
    wall_speedup_min: float
    wall_speedup_max: float
    ttft_median: float
    acceptance_median: float
    tokens_per_step_median: float
    alpha: float  # per-token acceptance estimate for the cost model
    predicted_speedup: float | None
    identical: int  # runs with output identical to target alone
    compared: int
    bugs: int  # divergences where the target's margin was not a near-tie
    speedup_by_rep: list[float] = field(default_factory=list)  # median decode ratio of each repetition
    network_ms_per_token: float | None = None  # RPC: network time per generated token, where known
    accepted_by: dict[str, int] = field(default_factory=dict)  # accepted draft tokens per source, all runs

    def speedup_verdict(self) -> tuple[str | None, str]:
        """("gain" | "loss" | None, why): a gain or loss only when every repetition's median
        ratio lies on the same side of 1.00x, so run-to-run noise cannot explain it."""
        reps = self.speedup_by_rep
        if self.mode == "target":
            return None, "the reference: every ratio is measured against this row"
        if len(reps) < 2:
            return None, "one repetition: no noise estimate"
        lo, hi = min(reps), max(reps)
        spread = f"{len(reps)} repetitions ranged {lo:.2f}–{hi:.2f}x"
        if lo > 1.0:
            return "gain", f"faster in every repetition ({spread})"
        if hi < 1.0:
            return "loss", f"slower in every repetition ({spread})"
        return None, f"within the noise: {spread}"


@dataclass
class BenchResult:
    runs: list[Run]
    rows: list[Row]
    meta: dict[str, Any]
    cost: dict[str, Any]
    by_request: list[Any] = field(default_factory=list)  # runs of several requests: bench_requests.RequestRow
    by_kind: list[Any] = field(default_factory=list)  # the long-prompt suites: bench_long.LongRow


ProgressCb = Callable[[int, int, str], None]


@dataclass
class _Plan:
    """What one benchmark run does, and its progress so far."""

    engine: Any
    configs: Sequence[Config]
    max_tokens: int
    temperature: float
    check_quality: bool
    total: int
    repeat: int
    progress: ProgressCb | None
    cancel: threading.Event | None
    histories: BenchHistories
    done: int = 0

    def tick(self, label: str) -> None:
        self.done += 1
        if self.progress:
            self.progress(self.done, self.total, label)

    def check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled("benchmark cancelled")

    def generate(self, prompt: BenchPrompt, cfg: Config, seed: int) -> tuple[Any, list[Any]]:
        """One generation: its DoneEvent and its StepEvents."""
        from ..decoding.events import DoneEvent, StepEvent
        from ..decoding.request import GenerationRequest

        # Every run reads its whole prompt: configurations that share a decoder (fixed k and
        # Auto with one draft) would otherwise reuse the prompt the one before them read,
        # and their wall-clock would beat target alone by a prefill they never paid; the
        # engine's prompt cache likewise (prompt_cache=False).
        self.engine.forget_prompts()
        draft = self.histories.draft_for(cfg.name, cfg.draft)
        req = GenerationRequest.from_options(prompt.prompt, draft_model=draft, lookahead=cfg.lookahead,
                                             max_tokens=self.max_tokens, temperature=self.temperature, seed=seed,
                                             chat=prompt.chat, tag="bench", prompt_cache=False)
        steps: list[StepEvent] = []
        result = None
        for ev in self.engine.stream(req):
            if isinstance(ev, StepEvent):
                steps.append(ev)
            elif isinstance(ev, DoneEvent):
                result = ev
        return result, steps

    def run(self, suite: Suite, prompt: BenchPrompt, cfg: Config, rep: int, seed: int) -> Run:
        """One measured run of a prompt in a configuration."""
        ev, steps = self.generate(prompt, cfg, seed)
        st = ev.stats
        return Run(
            suite.name, prompt.id, cfg.name, cfg.mode, cfg.lookahead, rep, st.generated_tokens,
            st.time_to_first_token_s, st.decode_tokens_per_s, st.acceptance_rate, st.mean_tokens_per_step,
            st.steps, st.drafted, st.accepted, st.finish_reason, ev.text, list(ev.tokens),
            [x.k for x in steps], [x.drafted for x in steps], [x.accepted for x in steps],
            [round(x.draft_ms, 3) for x in steps], [round(x.verify_ms, 3) for x in steps],
            wall_s=st.wall_s, run_id=prompt.run, request=prompt.request,
            accepted_by=dict(st.accepted_by), kind=prompt.kind, prompt_tokens=st.prompt_tokens,
            draft_sync_s=st.draft_sync_s,
        )

    def compare(self, prompt: BenchPrompt, reference: Run, run: Run) -> None:
        """Greedy runs must write what target alone wrote; say where they part, and whether
        that is a near-tie of the target's own logits (noise) or a bug."""
        from .racing import compare

        toks = self.engine.tokens_for(prompt.prompt, chat=prompt.chat)
        cmp = compare(self.engine, toks, reference.tokens, run.tokens, greedy=True)
        run.identical = cmp.identical
        if cmp.divergence is not None:
            div = cmp.divergence
            run.divergence_index, run.divergence_margin = div.index, div.margin
            run.divergence_bug = not div.within_noise

    def prompt_in_every_config(self, suite: Suite, prompt: BenchPrompt, rep: int, seed: int) -> list[Run]:
        runs: list[Run] = []
        reference: Run | None = None
        for cfg in self.configs:
            self.check()
            run = self.run(suite, prompt, cfg, rep, seed)
            if cfg.mode == "target":
                reference = run
            elif reference is not None and self.temperature <= 0 and self.check_quality:
                self.compare(prompt, reference, run)
            runs.append(run)
            self.tick(f"{suite.name}/{prompt.id} {cfg.name} (rep {rep + 1}/{self.repeat})")
        return runs


def run_bench(
    engine: Any,
    suites: Sequence[Suite],
    configs: Sequence[Config],
    *,
    repeat: int = 3,
    max_tokens: int = 128,
    temperature: float = 0.0,
    seed: int = 1234,
    warmup: bool = True,
    limit: int | None = None,
    progress: ProgressCb | None = None,
    cancel: threading.Event | None = None,
    check_quality: bool = True,
) -> BenchResult:
    """Run every prompt in every configuration; repetitions outermost, configurations
    interleaved per prompt, so machine drift affects all configurations alike. The requests
    of a run go in order; the suffix draft's memory of past answers starts empty at each
    repetition of a run, for each configuration apart (bench_history.py)."""
    if not configs or configs[0].mode != "target":
        raise BenchError("the first configuration must be target alone (the reference)")
    if repeat < 1:
        raise BenchError("repeat must be >= 1")
    work, no_fim = with_fim_tokens(engine, [(s, p) for s in suites for group in s.runs(limit) for p in group], max_tokens)
    if no_fim and not work:
        raise BenchError(f"no prompt of these suites can run: {no_fim[0]['reason']}")
    work, skipped = fitting_prompts(engine, work)
    skipped = no_fim + skipped
    total = len(work) * len(configs) * repeat + (len(configs) if warmup else 0)
    histories = BenchHistories(engine)
    plan = _Plan(engine, configs, max_tokens, temperature, check_quality, total, repeat, progress, cancel, histories)
    t_start = time.time()
    runs: list[Run] = []
    try:
        if warmup and work:
            for cfg in configs:
                plan.check()
                plan.generate(work[0][1], cfg, seed)  # loads models, fills caches, calibrates Auto
                plan.tick(f"warm-up {cfg.name}")
        for rep in range(repeat):
            for group in run_groups(work):
                histories.start_run()
                for suite, prompt in group:
                    runs += plan.prompt_in_every_config(suite, prompt, rep, seed + rep)
    finally:
        histories.close()
    seconds = time.time() - t_start
    if engine.calibration:
        record_pace(engine, seconds, total, max_tokens)
    cost = measured_costs(runs)
    if engine.rpc is not None:
        cost.update(network_costs(cost, engine.calibration_key()))
    meta = _meta(engine, suites, configs, repeat=repeat, max_tokens=max_tokens, temperature=temperature,
                 t_start=t_start, seconds=seconds)
    meta["skipped"] = skipped
    return BenchResult(runs, summarize(runs, cost), meta, cost, by_request(runs), by_kind(runs))


def _meta(engine: Any, suites: Sequence[Suite], configs: Sequence[Config], *, repeat: int, max_tokens: int,
          temperature: float, t_start: float, seconds: float) -> dict[str, Any]:
    """What was run, on what, for the reports."""
    meta = {
        "target": engine.target.path.name,
        "draft": _draft_name(configs),
        "repeat": repeat,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "threads": getattr(engine, "n_threads", None),
        "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t_start)),
        "seconds": round(seconds, 1),
        "suites": [s.name for s in suites],
        "configs": [c.name for c in configs],
    }
    if engine.rpc is not None:
        meta["rpc"] = {"endpoints": list(engine.rpc.endpoints), "split": engine.rpc.describe()}
    try:
        from ..llamacpp.ggml_devices import probe

        meta["hardware"] = probe().summary()
    except Exception:  # pragma: no cover - informational only
        pass
    return meta


def _draft_name(configs: Sequence[Config]) -> str | None:
    from ..decoding.drafting.choice import DraftChoice, DraftKind

    choices = [DraftChoice.parse(c.draft) for c in configs if c.draft is not None]
    for choice in choices:
        if choice.keyword is None:
            return Path(str(choice.source)).name
    # a drafter without a file ("mtp") names the run before the lookup every run adds
    keywords = [c.keyword for c in choices if c.keyword and c.kind is not DraftKind.LOOKUP]
    return keywords[0] if keywords else ("lookup" if choices else None)


# -- analysis -------------------------------------------------------------------------------
def _median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs)) if xs else 0.0


def _median_or_none(xs: Sequence[float | None]) -> float | None:
    known = [x for x in xs if x is not None]
    return _median(known) if known else None


def alpha_of(runs: Sequence[Run]) -> float:
    """Per-token acceptance for the geometric model: accepted / (accepted + rejections)."""
    acc = sum(sum(r.step_accepted) for r in runs)
    rej = sum(sum(1 for a, d in zip(r.step_accepted, r.step_drafted) if d > 0 and a < d) for r in runs)
    return acc / (acc + rej) if acc + rej else 0.0


def draft_kind(config: str, mode: str) -> str:
    """Whose draft cost a configuration pays: "lookup", "suffix" (no model) or "model"."""
    if mode == "lookup" or config.startswith("lookup"):
        return "lookup"
    return "suffix" if config.startswith("suffix") else "model"


def accepted_sources(runs: Sequence[Run]) -> dict[str, int]:
    """Accepted draft tokens per source over these runs, most first."""
    total: dict[str, int] = {}
    for r in runs:
        for src, n in r.accepted_by.items():
            total[src] = total.get(src, 0) + n
    return dict(sorted(total.items(), key=lambda kv: -kv[1]))


def measured_costs(runs: Sequence[Run]) -> dict[str, Any]:
    """Verify time per batch size (ms, medians) and draft time per token by drafter."""
    by_n: dict[int, list[float]] = {}
    draft: dict[str, list[float]] = {}
    for r in runs:
        for d, v, dm in zip(r.step_drafted, r.step_verify_ms, r.step_draft_ms):
            by_n.setdefault(d + 1, []).append(v)
            if d > 0:
                kind = draft_kind(r.config, r.mode)
                draft.setdefault(kind, []).append(dm / d)
    return {
        "verify_ms": {n: _median(v) for n, v in sorted(by_n.items())},
        "draft_ms_per_token": {k: _median(v) for k, v in draft.items()},
    }


def network_costs(cost: dict[str, Any], rpc_key: str) -> dict[str, Any]:
    """A target split over RPC workers: the same passes measured with the model loaded here
    (stored by earlier local runs, engine/models/calibration.py), and the difference, the network's
    share of each pass. Empty figures when this model was never measured here alone."""
    from ..models import calibration

    local = {int(n): s * 1000.0 for n, s in calibration.local_verify_s(rpc_key).items() if str(n).isdigit()}
    network = {n: max(0.0, ms - local[n]) for n, ms in cost["verify_ms"].items() if n in local}
    return {"local_verify_ms": local, "network_ms": network}


def network_per_token(run: Run, network_ms: dict[int, float]) -> float | None:
    """Network time per generated token, from each step's batch size. Over a real network a
    pass pays its round trips once however many tokens it verifies, so this falls as more
    tokens are accepted per pass. A batch size measured only over RPC takes the network
    time of the nearest size measured both ways."""
    if not network_ms or run.generated_tokens <= 0 or not run.step_drafted:
        return None
    sizes = sorted(network_ms)
    total = 0.0
    for d in run.step_drafted:
        n = d + 1
        total += network_ms[n] if n in network_ms else network_ms[min(sizes, key=lambda m: abs(m - n))]
    return total / run.generated_tokens


def predicted_speedup(cost: dict[str, Any], k: int | Sequence[int], alpha: float, kind: str) -> float | None:
    """The cost model's speedup for drafting k tokens at acceptance alpha, from measured costs;
    for a run whose k changed (Auto), `k` is the tokens verified at each step and the speedup
    is that mix's (tokens over time, summed over its steps)."""
    ks = [k] if isinstance(k, int) else list(k)
    cm = CostModel()
    for n, ms in cost["verify_ms"].items():
        cm.observe_verify(int(n), ms / 1000.0)
    per = cost["draft_ms_per_token"].get(kind)
    if 1 not in cost["verify_ms"] or (any(ks) and per is None) or not ks:
        return None
    if per is not None:
        cm.observe_draft(1, per / 1000.0)
    costs = cm.snapshot()
    preds = {d: costs.predict(d, alpha) for d in set(ks)}
    tokens = sum(preds[d].tokens_per_step for d in ks)
    seconds = sum(preds[d].seconds_per_step for d in ks)
    return (tokens / seconds) * costs.verify_time(1) if seconds > 0 else None


def summarize(runs: Sequence[Run], cost: dict[str, Any] | None = None) -> list[Row]:
    cost = cost or measured_costs(runs)
    ref = {(r.suite, r.prompt_id, r.rep): r for r in runs if r.mode == "target"}
    rows: list[Row] = []
    keys: list[tuple[str, str]] = []
    for r in runs:
        if (r.suite, r.config) not in keys:
            keys.append((r.suite, r.config))
    for suite, config in keys:
        rs = [r for r in runs if r.suite == suite and r.config == config]
        tps = [r.decode_tokens_per_s for r in rs]
        ratios = [r.decode_tokens_per_s / ref[(r.suite, r.prompt_id, r.rep)].decode_tokens_per_s
                  for r in rs if (r.suite, r.prompt_id, r.rep) in ref and ref[(r.suite, r.prompt_id, r.rep)].decode_tokens_per_s > 0]
        walls = [ref[(r.suite, r.prompt_id, r.rep)].wall_s / r.wall_s
                 for r in rs if (r.suite, r.prompt_id, r.rep) in ref and r.wall_s > 0]
        a = alpha_of(rs)
        first = rs[0]
        kind = draft_kind(config, first.mode)
        if first.mode == "target":
            pred: float | None = 1.0
        elif isinstance(first.lookahead, int):
            pred = predicted_speedup(cost, first.lookahead, a, kind)
        else:  # auto: the mix of what it verified, step by step (a free drafter's k is only a cap:
            # lookup's 16 proposed at 0% acceptance read "0.13x" for a run that verified nothing)
            pred = predicted_speedup(cost, [d for r in rs for d in r.step_drafted], a, kind)
        compared = [r for r in rs if r.identical is not None]
        by_rep: dict[int, list[float]] = {}
        for r in rs:
            base = ref.get((r.suite, r.prompt_id, r.rep))
            if base is not None and base.decode_tokens_per_s > 0:
                by_rep.setdefault(r.rep, []).append(r.decode_tokens_per_s / base.decode_tokens_per_s)
        rows.append(Row(
            suite, config, first.mode, first.lookahead, len(rs), _median(tps), min(tps), max(tps),
            _median(ratios), min(ratios, default=0.0), max(ratios, default=0.0),
            _median(walls), min(walls, default=0.0), max(walls, default=0.0),
            _median([r.time_to_first_token_s for r in rs]), _median([r.acceptance_rate for r in rs]),
            _median([r.mean_tokens_per_step for r in rs]), a, pred,
            sum(1 for r in compared if r.identical), len(compared), sum(1 for r in rs if r.divergence_bug),
            [_median(v) for _, v in sorted(by_rep.items())],
            _median_or_none([network_per_token(r, cost.get("network_ms") or {}) for r in rs]),
            accepted_sources(rs),
        ))
    return rows
