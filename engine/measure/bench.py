"""The benchmark: prompt suites x modes (target alone, fixed-k sweep, auto, prompt lookup),
warm-up, interleaved repetitions, medians and ratios measured in the same run, output
quality checks, the cost model's prediction beside the measurement, and reports.

Speed is only ever reported as measured here: speedup = tok/s / target-alone tok/s of the
same prompt in the same repetition, then the median over prompts and repetitions.
"""

from __future__ import annotations

import csv
import json
import statistics
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import Cancelled, TandemError
from ..decoding.cost_model import CostModel, expected_tokens
from ..decoding.lookahead import MAX_LOOKAHEAD
from ..resources import suites_dir

SUITES_DIR = suites_dir()


class BenchError(TandemError):
    pass


# -- suites ---------------------------------------------------------------------------------
@dataclass
class BenchPrompt:
    id: str
    prompt: Any  # str, or a list of chat messages
    chat: bool = True


@dataclass
class Suite:
    name: str
    prompts: list[BenchPrompt]


HELDOUT = "heldout"  # assets/suites/heldout/: never used to tune anything; reported apart


def builtin_suites(which: str = "all") -> list[str]:
    """Tuning suites by name ("chat"), held-out ones as "heldout/chat"; which: tuning|heldout|all."""
    tuning = sorted(p.stem for p in SUITES_DIR.glob("*.jsonl"))
    heldout = sorted(f"{HELDOUT}/{p.stem}" for p in (SUITES_DIR / HELDOUT).glob("*.jsonl"))
    if which == "tuning":
        return tuning
    if which == HELDOUT:
        return heldout
    if which != "all":
        raise BenchError(f"unknown suite set {which!r}: tuning, heldout or all")
    return tuning + heldout


def suite_set(name: str) -> str:
    """'heldout' for a held-out suite, else 'tuning'."""
    return HELDOUT if name.startswith(HELDOUT + "/") else "tuning"


def load_suite(name_or_path: str) -> Suite:
    """A built-in suite by name, or a file: one prompt per line (.txt), or JSON lines with
    {"prompt": ...} or {"messages": [...]} (optional "id", "chat")."""
    p = Path(name_or_path)
    name = p.stem
    builtin = SUITES_DIR / f"{name_or_path}.jsonl"
    if builtin.exists() and not name_or_path.endswith(".jsonl"):
        p = builtin
        name = name_or_path  # "chat" or "heldout/chat"
    elif not p.exists():
        raise BenchError(f"unknown suite {name_or_path!r}: not a file, and not one of {', '.join(builtin_suites())}")
    elif p.parent.name == HELDOUT:
        name = f"{HELDOUT}/{p.stem}"
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BenchError(f"{p}: cannot read suite ({e})") from None
    prompts: list[BenchPrompt] = []
    is_json = p.suffix in (".jsonl", ".json") or text.lstrip().startswith("{")
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        if is_json:
            try:
                obj = json.loads(line)
            except ValueError as e:
                raise BenchError(f"{p}:{i + 1}: not valid JSON ({e})") from None
            if "messages" in obj:
                msgs = obj["messages"]
                if not isinstance(msgs, list) or not all(isinstance(m, dict) and "role" in m and "content" in m for m in msgs):
                    raise BenchError(f"{p}:{i + 1}: 'messages' must be a list of {{role, content}}")
                prompts.append(BenchPrompt(str(obj.get("id", f"p{i + 1}")), msgs, True))
            elif "prompt" in obj:
                prompts.append(BenchPrompt(str(obj.get("id", f"p{i + 1}")), str(obj["prompt"]), bool(obj.get("chat", True))))
            else:
                raise BenchError(f"{p}:{i + 1}: needs 'prompt' or 'messages'")
        else:
            prompts.append(BenchPrompt(f"p{i + 1}", line.strip(), True))
    if not prompts:
        raise BenchError(f"{p}: the suite has no prompts")
    return Suite(name, prompts)


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
    is_lookup = isinstance(draft, str) and draft == "lookup"
    out = [Config("target", "target", None, 0)]
    if draft is not None:
        prefix = "lookup " if is_lookup else ""
        if "fixed" in modes:
            out += [Config(f"{prefix}k={k}", "fixed", draft, int(k)) for k in sweep]
        if "auto" in modes:
            out.append(Config(f"{prefix}auto", "auto", draft, "auto"))
    if "lookup" in modes and not is_lookup:
        out.append(Config("lookup", "lookup", "lookup", "auto"))
    return out


# -- how long a run will take ---------------------------------------------------------------
@dataclass(frozen=True)
class Estimate:
    """What a benchmark will cost before it starts: generations and, given a speed, time."""

    generations: int  # measured runs: prompts x configurations x repetitions
    warmup: int  # one warm-up generation per configuration
    seconds: float | None  # None when no speed is known
    basis: str  # where the speed came from, in words

    def text(self) -> str:
        """"about 126 generations (+7 warm-up), ~13 min on this machine"."""
        head = f"about {self.generations} generation{'' if self.generations == 1 else 's'}" + (f" (+{self.warmup} warm-up)" if self.warmup else "")
        if self.seconds is None:
            return head
        m = self.seconds / 60
        when = f"~{self.seconds:.0f} s" if self.seconds < 90 else (f"~{m:.0f} min" if m < 90 else f"~{m / 60:.1f} h")
        return f"{head}, {when} on this machine"


def estimate(n_prompts: int, configs: Sequence[Config], *, repeat: int, max_tokens: int,
             token_s: float | None, basis: str = "", warmup: bool = True) -> Estimate:
    """Every generation at target-alone speed for the full `max_tokens` (the configurations
    that win are faster, the ones that lose are slower; runs that stop early take less)."""
    runs = n_prompts * len(configs) * repeat
    warm = len(configs) if warmup and n_prompts else 0
    seconds = (runs + warm) * max_tokens * token_s if token_s else None
    return Estimate(runs, warm, seconds, basis)


def _pace_key(engine: Any) -> str:
    return engine.calibration_key() + "|bench"  # beside Auto's costs for the same model and machine


def target_token_seconds(engine: Any) -> tuple[float, str] | None:
    """Seconds per generation token for a loaded engine, best source first: the pace of the
    last benchmark of this model on this machine (prefill, drafting and checks included),
    Auto's calibrated cost model (target alone), else the hardware bandwidth estimate."""
    from ..models import calibration, hardware

    vk = engine.calibration_key()  # the key Auto persists its measurements under
    pace = (calibration.load(_pace_key(engine)) or {}).get("s_per_token")
    if isinstance(pace, (int, float)) and pace > 0:
        return float(pace), "the pace of your last benchmark of this model here"
    t1 = ((calibration.load(vk) or {}).get("verify_s") or {}).get("1")
    if isinstance(t1, (int, float)) and t1 > 0:
        return float(t1), "calibrated cost model, target alone: speculative modes that lose here take longer"
    try:
        size = Path(engine.target.path).stat().st_size
    except OSError:
        return None
    bw = hardware.ram_bandwidth(hardware.probe())
    return 1.0 / hardware.expected_tok_s(size, bw), f"uncalibrated: hardware bandwidth estimate ({bw.basis})"


def record_pace(engine: Any, seconds: float, generations: int, max_tokens: int) -> None:
    """Keep what a benchmark really took per token of its budget, for the next estimate."""
    from ..models import calibration

    if generations > 0 and max_tokens > 0 and seconds > 0:
        calibration.save({_pace_key(engine): {"s_per_token": seconds / (generations * max_tokens)}})


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
    calibration_s: float = 0.0


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


ProgressCb = Callable[[int, int, str], None]


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
    interleaved per prompt, so machine drift affects all configurations alike."""
    from ..decoding.events import DoneEvent, StepEvent
    from .racing import compare
    from ..decoding.settings import GenerationRequest

    if not configs or configs[0].mode != "target":
        raise BenchError("the first configuration must be target alone (the reference)")
    if repeat < 1:
        raise BenchError("repeat must be >= 1")
    work = [(s, p) for s in suites for p in (s.prompts[:limit] if limit else s.prompts)]
    total = len(work) * len(configs) * repeat + (len(configs) if warmup else 0)
    done = 0
    t_start = time.time()

    def tick(label: str) -> None:
        nonlocal done
        done += 1
        if progress:
            progress(done, total, label)

    def check() -> None:
        if cancel is not None and cancel.is_set():
            raise Cancelled("benchmark cancelled")

    def one(prompt: BenchPrompt, cfg: Config, s: int) -> tuple[Any, list[StepEvent]]:
        steps: list[StepEvent] = []
        result = None
        # Every run reads its whole prompt: configurations that share a decoder (fixed k and
        # Auto with one draft) would otherwise reuse the prompt the one before them read,
        # and their wall-clock would beat target alone by a prefill they never paid.
        forget = getattr(engine, "forget_prompts", None)
        if forget is not None:
            forget()
        req = GenerationRequest.from_options(prompt.prompt, draft_model=cfg.draft, lookahead=cfg.lookahead,
                                             max_tokens=max_tokens, temperature=temperature, seed=s, chat=prompt.chat,
                                             tag="bench")
        for ev in engine.stream(req):
            if isinstance(ev, StepEvent):
                steps.append(ev)
            elif isinstance(ev, DoneEvent):
                result = ev
        return result, steps

    if warmup and work:
        for cfg in configs:
            check()
            one(work[0][1], cfg, seed)  # loads models, fills caches, calibrates Auto
            tick(f"warm-up {cfg.name}")

    runs: list[Run] = []
    for rep in range(repeat):
        for suite, prompt in work:
            reference: Run | None = None
            for cfg in configs:
                check()
                ev, steps = one(prompt, cfg, seed + rep)
                st = ev.stats
                run = Run(
                    suite.name, prompt.id, cfg.name, cfg.mode, cfg.lookahead, rep, st.generated_tokens,
                    st.time_to_first_token_s, st.decode_tokens_per_s, st.acceptance_rate, st.mean_tokens_per_step,
                    st.steps, st.drafted, st.accepted, st.finish_reason, ev.text, list(ev.tokens),
                    [x.k for x in steps], [x.drafted for x in steps], [x.accepted for x in steps],
                    [round(x.draft_ms, 3) for x in steps], [round(x.verify_ms, 3) for x in steps],
                    wall_s=st.wall_s, calibration_s=st.calibration_s,
                )
                if cfg.mode == "target":
                    reference = run
                elif reference is not None and temperature <= 0 and check_quality:
                    toks = engine.tokens_for(prompt.prompt, chat=prompt.chat)
                    cmp = compare(engine, toks, reference.tokens, run.tokens, greedy=True)
                    run.identical = cmp.identical
                    if cmp.divergence is not None:
                        div = cmp.divergence
                        run.divergence_index, run.divergence_margin = div.index, div.margin
                        run.divergence_bug = not div.within_noise
                runs.append(run)
                tick(f"{suite.name}/{prompt.id} {cfg.name} (rep {rep + 1}/{repeat})")
    seconds = time.time() - t_start
    if engine.calibration:
        record_pace(engine, seconds, total, max_tokens)
    cost = measured_costs(runs)
    cluster = getattr(engine, "rpc", None)
    if cluster is not None:
        cost.update(network_costs(cost, engine.calibration_key()))
    rows = summarize(runs, cost)
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
    if cluster is not None:
        meta["rpc"] = {"endpoints": list(cluster.endpoints), "split": cluster.describe()}
    try:
        from ..models.hardware import probe

        meta["hardware"] = probe().summary()
    except Exception:  # pragma: no cover - informational only
        pass
    return BenchResult(runs, rows, meta, cost)


def _draft_name(configs: Sequence[Config]) -> str | None:
    for c in configs:
        if c.draft is not None and c.draft != "lookup":
            return Path(str(c.draft)).name
    return "lookup" if any(c.draft == "lookup" for c in configs) else None


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


def measured_costs(runs: Sequence[Run]) -> dict[str, Any]:
    """Verify time per batch size (ms, medians) and draft time per token by drafter."""
    by_n: dict[int, list[float]] = {}
    draft: dict[str, list[float]] = {}
    for r in runs:
        for d, v, dm in zip(r.step_drafted, r.step_verify_ms, r.step_draft_ms):
            by_n.setdefault(d + 1, []).append(v)
            if d > 0:
                kind = "lookup" if r.mode == "lookup" or str(r.config).startswith("lookup") else "model"
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


def predicted_speedup(cost: dict[str, Any], k: int, alpha: float, kind: str) -> float | None:
    """The cost model's speedup for drafting k tokens at acceptance alpha, from measured costs."""
    cm = CostModel()
    for n, ms in cost["verify_ms"].items():
        cm.observe_verify(int(n), ms / 1000.0)
    per = cost["draft_ms_per_token"].get(kind)
    if 1 not in cost["verify_ms"] or (k > 0 and per is None):
        return None
    if per is not None:
        cm.observe_draft(1, per / 1000.0)
    return cm.predict(k, alpha).speedup


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
        kind = "lookup" if first.mode == "lookup" or config.startswith("lookup") else "model"
        if first.mode == "target":
            pred: float | None = 1.0
        elif isinstance(first.lookahead, int):
            pred = predicted_speedup(cost, first.lookahead, a, kind)
        else:  # auto: the model's best k at this alpha
            ks = [k for r in rs for k in r.step_k]
            k_typ = int(round(_median(ks))) if ks else 0
            pred = predicted_speedup(cost, k_typ, a, kind)
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
        ))
    return rows


def cost_model_report(result: BenchResult) -> str:
    """The cost model, printed: measured inputs, E(k), best k and predicted vs measured."""
    c = result.cost
    lines = ["Cost model (measured on this machine):"]
    v = c["verify_ms"]
    if 1 in v:
        lines.append("  target pass over n tokens: " + ", ".join(f"n={n}: {ms:.1f} ms ({ms / v[1]:.2f}x)" for n, ms in v.items()))
    for kind, ms in c["draft_ms_per_token"].items():
        lines.append(f"  draft time per proposed token ({kind}): {ms:.2f} ms" + (f" = {ms / v[1]:.2f}x a target step" if 1 in v else ""))
    lines.append("  expected tokens per step E(k) = (1 - alpha^(k+1)) / (1 - alpha)")
    for row in result.rows:
        if row.mode == "target":
            continue
        kind = "lookup" if row.mode == "lookup" or row.config.startswith("lookup") else "model"
        best_k, best_s = 0, 1.0
        for k in range(1, MAX_LOOKAHEAD + 1):
            s = predicted_speedup(c, k, row.alpha, kind)
            if s is not None and s > best_s:
                best_k, best_s = k, s
        k_here = row.lookahead if isinstance(row.lookahead, int) else None
        e = expected_tokens(k_here, row.alpha) if k_here else None
        pred = f"{row.predicted_speedup:.2f}x" if row.predicted_speedup is not None else "n/a"
        lines.append(
            f"  {row.suite:16s} {row.config:12s} alpha={row.alpha:.2f}"
            + (f" E(k)={e:.2f}" if e is not None else "")
            + f"  predicted {pred}, measured {row.speedup_median:.2f}x;  best k={best_k} (predicted {best_s:.2f}x)"
        )
    return "\n".join(lines)


# -- reports --------------------------------------------------------------------------------
def write_reports(result: BenchResult, out: str | Path) -> list[Path]:
    """runs.jsonl (every run), results.csv, summary.md, results.json and PNG plots."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    p = out / "runs.jsonl"
    with open(p, "w", encoding="utf-8") as f:
        for r in result.runs:
            f.write(json.dumps(asdict(r), ensure_ascii=False) + "\n")
    files.append(p)
    p = out / "results.csv"
    with open(p, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(asdict(result.rows[0]).keys()) if result.rows else ["suite"])
        w.writeheader()
        for row in result.rows:
            w.writerow(asdict(row))
    files.append(p)
    p = out / "results.json"
    p.write_text(json.dumps({"meta": result.meta, "cost": result.cost, "rows": [asdict(r) for r in result.rows]}, indent=1))
    files.append(p)
    p = out / "summary.md"
    p.write_text(summary_markdown(result), encoding="utf-8")
    files.append(p)
    files += write_plots(result, out)
    return files


def summary_markdown(result: BenchResult) -> str:
    m = result.meta
    lines = [
        f"# Benchmark: {m.get('target')} + {m.get('draft')}",
        "",
        f"{m.get('started')} · {m.get('hardware', '')} · {m.get('threads')} threads · "
        f"{m.get('max_tokens')} tokens per run · median of {m.get('repeat')} repetitions · "
        f"temperature {m.get('temperature')} · {m.get('seconds')} s",
        "",
        "Wall-clock = target-alone wall time / this wall time (prompt in, last token out: what the user "
        "waited, calibration and draft prefill included; every run starts with empty caches, so it reads its whole "
        "prompt); decode = tok/s / target-alone tok/s. Both for the "
        "same prompt and repetition, then the median over prompts and repetitions (min–max in brackets). "
        "Held-out suites (heldout/...) were written before tuning and never used to tune. "
        "Identical = outputs equal to target alone.",
    ]
    for which in ("tuning", HELDOUT):
        rows = [r for r in result.rows if suite_set(r.suite) == which]
        if not rows:
            continue
        lines += [
            "",
            f"### {'Tuning suites' if which == 'tuning' else 'Held-out suites (never tuned on)'}",
            "",
            "| suite | config | wall-clock | decode | tok/s | predicted | acceptance | tokens/step | TTFT s | identical |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            pred = f"{r.predicted_speedup:.2f}x" if r.predicted_speedup is not None else "–"
            ident = f"{r.identical}/{r.compared}" if r.compared else "–"
            if r.bugs:
                ident += f" **{r.bugs} NOT near-ties**"
            lines.append(
                f"| {r.suite} | {r.config} | **{r.wall_speedup_median:.2f}x** ({r.wall_speedup_min:.2f}–{r.wall_speedup_max:.2f}) "
                f"| {r.speedup_median:.2f}x ({r.speedup_min:.2f}–{r.speedup_max:.2f}) | {r.tok_s_median:.1f} "
                f"| {pred} | {r.acceptance_median:.0%} | {r.tokens_per_step_median:.2f} | {r.ttft_median:.2f} | {ident} |"
            )
    bugs = [r for r in result.runs if r.divergence_bug]
    lines += ["", "## Output quality", ""]
    divs = [r for r in result.runs if r.identical is False]
    if not divs:
        lines.append("Every speculative run wrote exactly what target alone wrote.")
    else:
        for r in divs:
            flag = " — **a larger gap than numeric noise: a bug**" if r.divergence_bug else " (near-tie: batched vs single-token rounding)"
            lines.append(f"- {r.suite}/{r.prompt_id} {r.config} rep {r.rep}: parts at token {r.divergence_index}, "
                         f"target margin {r.divergence_margin:.3f}{flag}")
    if bugs:
        lines += ["", f"**WARNING: {len(bugs)} divergence(s) were not near-ties.**"]
    if m.get("rpc"):
        lines += ["", *network_markdown(result)]
    lines += ["", "## Cost model", "", "```", cost_model_report(result), "```", ""]
    return "\n".join(lines)


def network_markdown(result: BenchResult) -> list[str]:
    """The RPC section: what a target pass costs over the workers and here alone, the
    network's share, and the network time per generated token of each configuration."""
    rpc = result.meta["rpc"]
    c = result.cost
    lines = ["## Network (RPC workers)", "",
             f"Target split over {', '.join(rpc['endpoints'])}: {rpc['split']}."]
    local = c.get("local_verify_ms") or {}
    if not local:
        return lines + ["", "Network share unknown: this model has not been measured on this machine without "
                            "workers yet. Run the same `tandem bench` once without `--rpc` (or any Auto generation), "
                            "then again with it."]
    lines += ["", "| target pass over n tokens | over RPC | here alone | network share |", "|---|---|---|---|"]
    for n, ms in c["verify_ms"].items():
        if n in local:
            net = c["network_ms"][n]
            lines.append(f"| n={n} | {ms:.1f} ms | {local[n]:.1f} ms | {net:.1f} ms ({net / ms:.0%}) |" if ms > 0
                         else f"| n={n} | {ms:.1f} ms | {local[n]:.1f} ms | – |")
    lines += ["", "Over a real network every pass pays its round trips once, however many tokens it verifies, so "
                  "the network time per generated token falls as more drafted tokens are accepted per pass. Workers "
                  "on this same machine share its cores: then the difference grows with the batch as well.", "",
              "| suite | config | tokens/step | network per token |", "|---|---|---|---|"]
    for r in result.rows:
        per = f"{r.network_ms_per_token:.1f} ms" if r.network_ms_per_token is not None else "–"
        lines.append(f"| {r.suite} | {r.config} | {r.tokens_per_step_median:.2f} | {per} |")
    return lines


def write_plots(result: BenchResult, out: Path) -> list[Path]:
    """tok/s and acceptance vs lookahead per suite; predicted vs measured speedup."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    suites = list(dict.fromkeys(r.suite for r in result.rows))
    fig, axes = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for suite in suites:
        rows = [r for r in result.rows if r.suite == suite]
        fixed = sorted((r for r in rows if isinstance(r.lookahead, int) and r.mode == "fixed"), key=lambda r: r.lookahead)
        line = axes[0].plot([r.lookahead for r in fixed], [r.tok_s_median for r in fixed], marker="o", label=suite)[0]
        axes[1].plot([r.lookahead for r in fixed], [r.acceptance_median for r in fixed], marker="o", color=line.get_color(), label=suite)
        for r in rows:
            if r.mode == "target":
                axes[0].axhline(r.tok_s_median, color=line.get_color(), linestyle=":", linewidth=1)
            if r.mode == "auto":
                axes[0].scatter([0], [r.tok_s_median], marker="*", s=90, color=line.get_color())
    axes[0].set_ylabel("decode tok/s (median)")
    axes[0].set_title("tok/s vs lookahead (dotted: target alone; star: auto)")
    axes[1].set_ylabel("acceptance rate")
    axes[1].set_xlabel("lookahead k")
    axes[1].set_ylim(0, 1.05)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    p = out / "lookahead.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    files.append(p)

    fig, ax = plt.subplots(figsize=(6, 6))
    pts = [(r.predicted_speedup, r.speedup_median, f"{r.suite}:{r.config}") for r in result.rows
           if r.mode != "target" and r.predicted_speedup is not None]
    if pts:
        xs, ys, labels = zip(*pts)
        ax.scatter(xs, ys)
        for x, y, lab in pts:
            ax.annotate(lab, (x, y), fontsize=6, alpha=0.7)
        lo, hi = min(xs + ys + (1.0,)) * 0.9, max(xs + ys + (1.0,)) * 1.1
        ax.plot([lo, hi], [lo, hi], linestyle="--", color="grey")
    ax.axhline(1.0, color="red", linewidth=0.8)
    ax.set_xlabel("predicted speedup (cost model)")
    ax.set_ylabel("measured speedup")
    ax.set_title("Predicted vs measured speedup")
    fig.tight_layout()
    p = out / "predicted_vs_measured.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    files.append(p)
    return files
