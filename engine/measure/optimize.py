"""The draft optimiser: give a pair a draft file this backend runs faster, if it pays.

A model draft pays only when its step is cheap relative to the target's verify pass. On a
CPU the weight format decides much of that cost: llama.cpp repacks Q4_0 into its fastest
matrix kernels, while the Q4_K_M files most pairs ship fall back to Q5_0 for the 0.5B's
896-wide rows. So: obtain the draft in the backend's fastest type (the catalog's published
file when the Hub is reachable, else `llama_model_quantize` with requantisation allowed),
measure both drafts against the target on a short code suite (draft speed alone, draft
cost per step, acceptance at fixed k, the target's verify curve, all interleaved in one
run), predict the speedup of each with `engine.decoding.drafting.lookahead`'s cost model, and keep the
variant only if its predicted speedup is better. Output cannot change: the target decides
every token; only acceptance can move.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..models import draft_variants
from ..errors import Cancelled, TandemError
from ..decoding.drafting.cost_model import Costs, Prediction
from ..decoding.drafting.lookahead import MAX_LOOKAHEAD
from ..llamacpp import ggml_devices
from ..llamacpp.runtime import RuntimeParams

# The type each backend runs a small draft fastest in. CPU: measured on this project's
# machines (x86, llama.cpp 0.3.36: the 0.5B from ~52 to ~87 tok/s); other backends: Q4_0 as
# well until measured there, since the optimiser keeps a variant only when it pays.
FASTEST_TYPE = {"cpu": "q4_0"}
DEFAULT_TYPE = "q4_0"
VERIFY_SIZES = (1, 2, 3, 4, 5, 6, 8)

ProgressFn = Callable[[str, float], None]  # message, overall fraction 0..1


class OptimizeError(TandemError):
    """The draft cannot be optimised (already in the fastest type, incompatible, ...)."""


# -- types and tensors --------------------------------------------------------------------------
def fastest_type(backend: str) -> str:
    return FASTEST_TYPE.get(backend.lower(), DEFAULT_TYPE)


def file_type_name(header: Any) -> str:
    """"q4_k_m", "q4_0", ...: llama.cpp's name for a GGUF's `general.file_type`."""
    from ..llamacpp.quantize import quant_types

    ft = header.get("general.file_type")
    names = {v: k for k, v in quant_types().items()}
    return names.get(ft, "unknown") if isinstance(ft, int) else "unknown"


def _block_of(qtype: str) -> int:
    """Row-width multiple the type's main tensor format needs (32 for Q4_0, 256 for K-quants)."""
    import re

    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    name = qtype.upper()
    if "_K" in name:
        name = re.sub(r"_K_[SML]$", "_K", name)
    try:
        return GGML_QUANT_SIZES[GGMLQuantizationType[name]][0]
    except KeyError:
        return 1


def fallback_tensors(header: Any, qtype: str) -> list[str]:
    """Weight matrices whose rows do not fit `qtype`'s block: llama.cpp stores those in
    another type (Q4_K -> Q5_0, Q6_K -> Q8_0, ...), so they do not get the type's kernels."""
    block = _block_of(qtype)
    return [t.name for t in header.tensors if len(t.shape) >= 2 and t.shape[0] % block]


def weight_matrices(header: Any) -> int:
    return sum(1 for t in header.tensors if len(t.shape) >= 2)


# -- measurements -------------------------------------------------------------------------------
@dataclass
class DraftMeasure:
    """One draft file measured against the target."""

    path: str
    quant: str
    size_bytes: int
    alone_tokens_per_s: float  # the draft generating on its own (greedy)
    step_token_s: float  # seconds per drafted token inside speculative steps
    drafted: int
    accepted: int
    alpha: float  # per-token acceptance for the geometric model
    tokens_per_step: float
    identical: int  # speculative outputs equal to target alone
    compared: int
    measured_speedup_at_k: float = 0.0  # decode tok/s at the fixed k / target alone, median over prompts
    near_ties: int = 0  # outputs that parted from target alone where its top-two logits were a near-tie
    divergence_bugs: int = 0  # ... at a larger margin (a bug: never expected)
    best: Prediction | None = None  # Auto's k at these costs
    at_k: Prediction | None = None  # the fixed k measured

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0


@dataclass
class BreakEven:
    """What a model draft would need on this machine to reach `goal` (decode, predicted)."""

    goal: float
    draft_cost_ratio: float  # measured draft token / target token
    alpha: float  # measured
    alpha_needed: float | None  # at the measured cost ratio (None: unreachable even at alpha -> 1)
    cost_ratio_needed: float | None  # at the measured alpha (None: unreachable even for a free draft)
    ceiling: float  # best speedup at the measured cost ratio with a perfect draft


@dataclass
class OptimizeResult:
    target: str
    draft: str
    backend: str
    qtype: str
    source: str  # "catalog (downloaded)", "catalog (cached)", "requantised", "requantised earlier"
    fallbacks: int  # weight matrices that cannot take qtype
    matrices: int
    verify_s: dict[int, float]
    target_tokens_per_s: float
    before: DraftMeasure
    after: DraftMeasure
    kept: bool
    variant: str | None  # the file the pair now uses, when kept
    break_even: BreakEven
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        b, a = self.before.best, self.after.best
        assert a is not None and b is not None
        how = "best k"
        if a.k == 0 and b.k == 0:  # neither pays: compared at the measured k (see _pays_more)
            b, a, how = self.before.at_k, self.after.at_k, f"k={self.after.at_k.k}"  # type: ignore[union-attr,assignment]
        assert a is not None and b is not None
        if self.kept:
            return f"kept {self.qtype.upper()}: predicted speedup ({how}) {b.speedup:.2f}x -> {a.speedup:.2f}x"
        return f"not kept: {self.qtype.upper()} predicts {a.speedup:.2f}x vs {b.speedup:.2f}x for the original ({how})"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["verify_s"] = {str(k): v for k, v in self.verify_s.items()}
        d["verdict"] = self.verdict
        return d


def alpha_of(steps: list[tuple[int, int]]) -> float:
    """accepted / (accepted + rejections) over (drafted, accepted) steps: the per-token
    acceptance the cost model's E(k) = (1 - a^(k+1)) / (1 - a) assumes."""
    acc = sum(a for d, a in steps if d > 0)
    rej = sum(1 for d, a in steps if d > 0 and a < d)
    return acc / (acc + rej) if acc + rej else 0.0


def costs_for(verify_s: dict[int, float], step_token_s: float, alpha: float) -> Costs:
    return Costs(sorted(verify_s.items()), step_token_s, 0.3, alpha)


def break_even(verify_s: dict[int, float], step_token_s: float, alpha: float, goal: float = 1.15) -> BreakEven:
    """Solve the cost model for the acceptance (at the measured draft cost) and the draft cost
    (at the measured acceptance) that would reach `goal`; both by bisection, since the best
    predicted speedup rises with alpha and falls with the draft's cost."""
    base = costs_for(verify_s, step_token_s, alpha)
    t1 = base.verify_time(1)
    ratio = step_token_s / t1

    def speed(a: float, c: float) -> float:
        return costs_for(verify_s, c * t1, a).best(MAX_LOOKAHEAD).speedup

    ceiling = speed(1.0, ratio)
    a_needed: float | None = None
    if ceiling >= goal:
        lo, hi = 0.0, 0.999
        for _ in range(30):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if speed(mid, ratio) >= goal else (mid, hi)
        a_needed = hi
    c_needed: float | None = None
    if speed(alpha, 0.0) >= goal:
        lo, hi = 0.0, 2.0
        for _ in range(30):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if speed(alpha, mid) >= goal else (lo, mid)
        c_needed = lo
    return BreakEven(goal, ratio, alpha, a_needed, c_needed, ceiling)


def measure_verify_curve(model: Any, prompt: list[int], sizes: tuple[int, ...] = VERIFY_SIZES, reps: int = 5,
                         n_threads: int | None = None) -> dict[int, float]:
    """Seconds for one target pass over n tokens (logits for every row, as a verify step),
    sizes interleaved within each repetition so load changes hit them all; medians."""
    from ..llamacpp.context import Context

    ctx = Context(model, RuntimeParams(n_ctx=max(512, len(prompt) + max(sizes) + 8), n_threads=n_threads))
    try:
        for _ in ctx.feed(prompt):
            pass
        base = ctx.n_past
        probe = prompt[-1]
        samples: dict[int, list[float]] = {n: [] for n in sizes}
        for _ in range(reps):
            for n in sizes:
                t = time.perf_counter()
                ctx.decode([probe] * n, logits="all")
                samples[n].append(time.perf_counter() - t)
                ctx.truncate(base)
        return {n: statistics.median(v) for n, v in samples.items()}
    finally:
        ctx.close()


# -- the optimiser ------------------------------------------------------------------------------
@dataclass
class _Variant:
    path: Path
    source: str
    requantised: bool


def _obtain_variant(draft: Path, qtype: str, preferred: Any, source: str, progress: ProgressFn,
                    cancel: threading.Event, notes: list[str]) -> _Variant:
    """The catalog's published file (cache, else the Hub) or a requantised copy of `draft`."""
    from ..models import store

    if preferred is not None and source in ("auto", "hub"):
        spec = preferred.files[0]
        found = store.find_model(preferred.id)
        if found is not None:
            return _Variant(found, f"catalog {preferred.id} (cached)", False)
        from ..models import download

        progress(f"downloading {spec.filename} from {spec.repo}", 0.02)
        try:
            path = download.obtain(spec, source="hub", cancel=cancel)
            return _Variant(path, f"catalog {preferred.id} (downloaded)", False)
        except Cancelled:
            raise
        except TandemError as e:
            if source == "hub":
                raise OptimizeError(f"{spec.repo}/{spec.filename}: {e}") from None
            notes.append(f"published {preferred.quant} file not fetched ({e}); requantised locally instead")
    from ..llamacpp.quantize import quantize

    out = draft_variants.variants_dir() / f"{draft.stem}.{qtype}.gguf"
    if out.is_file() and out.stat().st_mtime >= draft.stat().st_mtime:
        return _Variant(out, "requantised earlier", True)
    store.check_free_space(out.parent, draft.stat().st_size)  # about the source's size for 4-6-bit types
    progress(f"requantising {draft.name} to {qtype.upper()} with llama_model_quantize", 0.03)
    quantize(draft, out, qtype, allow_requantize=True)
    return _Variant(out, "requantised", True)


def optimize_draft(
    target: str | Path,
    draft: str | Path,
    *,
    pair: Any = None,
    qtype: str | None = None,
    source: str = "auto",
    prompts: int = 4,
    max_tokens: int = 48,
    k: int = 4,
    repeats: int = 2,
    min_gain: float = 1.01,
    goal: float = 1.15,
    n_threads: int | None = None,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
) -> OptimizeResult:
    """Obtain `draft` in this backend's fastest type, measure it against the original on
    the code-generation suite, keep and register it only if the predicted speedup improves
    by `min_gain`. `source`: "auto" (the catalog's published file when `pair` names one and
    the Hub answers, else requantise), "hub" (published file or fail) or "requantize"."""
    from ..decoding.engine import Engine
    from ..models.compat import require_compatible
    from ..models.gguf_header import read_header
    from . import suites as bench_suites
    from .draft_trial import DraftTrial

    say: ProgressFn = progress or (lambda _m, _f: None)
    stop = cancel or threading.Event()
    _check_options(source, k, prompts, max_tokens)

    def check() -> None:
        if stop.is_set():
            raise Cancelled("optimisation cancelled")

    target_p, draft_p = Path(target), Path(draft)
    require_compatible(read_header(target_p, with_tensors=False), draft_p)
    header = read_header(draft_p)
    backend = ggml_devices.current_backend()
    qtype, fallbacks, notes, preferred = _plan_variant(draft_p, header, backend, qtype, pair, source)
    say("preparing the variant", 0.0)
    variant = _obtain_variant(draft_p, qtype, preferred, source, say, stop, notes)
    check()
    suite = bench_suites.load_suite("code_generation").prompts[:prompts]
    trial = DraftTrial({"before": draft_p, "after": variant.path}, k, max_tokens, say, check,
                       total=len(suite) * 3 + repeats * 2)
    eng = Engine(target_p, n_ctx=2048, n_threads=n_threads, metrics_log=False)
    try:
        for p in trial.files.values():
            eng.load_draft(p)
        say("measuring the target's verify cost per batch size", 0.1)
        first = eng.tokens_for(suite[0].prompt, chat=suite[0].chat)
        verify_s = measure_verify_curve(eng.target, first, n_threads=n_threads)
        check()
        trial.against_target(eng, suite)
        trial.alone(eng, suite[0], repeats, n_threads)
    finally:
        eng.close()
    before, after = (_measure(trial, role, verify_s, len(suite)) for role in ("before", "after"))
    kept = _pays_more(after, before, min_gain)
    better = after if kept else before
    be = break_even(verify_s, better.step_token_s, better.alpha, goal)
    result = OptimizeResult(str(target_p), str(draft_p), backend, qtype, variant.source, len(fallbacks),
                            weight_matrices(header), verify_s, statistics.median(trial.target_tps), before, after, kept,
                            str(variant.path) if kept else None, be, notes)
    if not kept and variant.requantised:
        variant.path.unlink(missing_ok=True)  # a losing requantised copy is not worth its disk space
    draft_variants.record(draft_p, backend, {
        "kept": kept, "variant": str(variant.path) if kept else None, "qtype": qtype, "source": variant.source,
        "target": str(target_p), "before": _summary(before), "after": _summary(after),
    })
    say(result.verdict, 1.0)
    return result


def _measure(trial: Any, role: str, verify_s: dict[int, float], n_prompts: int) -> DraftMeasure:
    """One draft's `DraftMeasure` from its trial, with the cost model's best k and its
    prediction at the trial's k."""
    from ..models.gguf_header import read_header

    p = trial.files[role]
    st = trial.steps[role]
    per = statistics.median(trial.step_s[role]) if trial.step_s[role] else float("inf")
    a = alpha_of(st)
    drafted, accepted = sum(d for d, _ in st), sum(x for _, x in st)
    m = DraftMeasure(str(p), file_type_name(read_header(p, with_tensors=False, arrays=False)), p.stat().st_size,
                     statistics.median(trial.alone_tps[role]), per, drafted, accepted, a,
                     (accepted + len(st)) / len(st) if st else 1.0, trial.same[role], n_prompts,
                     statistics.median(trial.ratios[role]) if trial.ratios[role] else 0.0,
                     sum(trial.parted[role]), sum(1 for w in trial.parted[role] if not w))
    c = costs_for(verify_s, per, a)
    m.best, m.at_k = c.best(MAX_LOOKAHEAD), c.predict(trial.k)
    return m


def _check_options(source: str, k: int, prompts: int, max_tokens: int) -> None:
    if source not in ("auto", "hub", "requantize"):
        raise OptimizeError(f"unknown source {source!r}; use auto, hub or requantize")
    if not 1 <= k <= MAX_LOOKAHEAD:
        raise OptimizeError(f"k must be in 1..{MAX_LOOKAHEAD}, got {k}")
    if prompts < 1 or max_tokens < 8:
        raise OptimizeError("need at least one prompt and 8 tokens per prompt to measure acceptance")


def _plan_variant(draft_p: Path, header: Any, backend: str, qtype: str | None, pair: Any,
                  source: str) -> tuple[str, list[str], list[str], Any]:
    """The type to aim for, the tensors that cannot take it, notes, and the catalog's
    published file of that type (None: requantise)."""
    from ..llamacpp.quantize import quant_types

    qtype = (qtype or fastest_type(backend)).lower()
    if qtype not in quant_types():
        raise OptimizeError(f"unknown quantisation type {qtype!r}; for a CPU try q4_0, q8_0 or q4_k_m")
    if file_type_name(header) == qtype:
        raise OptimizeError(f"{draft_p.name} is already {qtype.upper()}, the type this backend ({backend}) runs fastest")
    notes: list[str] = []
    fallbacks = fallback_tensors(header, qtype)
    if fallbacks:
        notes.append(f"{len(fallbacks)} of {weight_matrices(header)} weight matrices have rows that do not fit "
                     f"{qtype.upper()}'s block; llama.cpp stores those in another type")
    preferred = pair.preferred_draft(backend) if pair is not None and source != "requantize" else None
    if preferred is not None and preferred.quant.lower() != qtype:
        preferred = None
    if source == "hub" and preferred is None:
        raise OptimizeError(f"the catalog names no published {qtype.upper()} draft for this pair on {backend}")
    return qtype, fallbacks, notes, preferred


def _pays_more(after: DraftMeasure, before: DraftMeasure, min_gain: float) -> bool:
    """Auto's best predicted speedup decides; when neither draft pays at any k (both best at
    k = 0, i.e. 1.0x), the one that loses less at the measured k does, since Auto still
    drafts where acceptance rises (copy-heavy text)."""
    assert after.best and before.best and after.at_k and before.at_k
    if after.best.k == 0 and before.best.k == 0:
        return after.at_k.speedup > before.at_k.speedup * min_gain
    return after.best.speedup > before.best.speedup * min_gain


def _summary(m: DraftMeasure) -> dict[str, Any]:
    return {"quant": m.quant, "alone_tokens_per_s": round(m.alone_tokens_per_s, 2),
            "step_ms": round(m.step_token_s * 1000, 3), "alpha": round(m.alpha, 4),
            "predicted_speedup": round(m.best.speedup, 4) if m.best else None, "best_k": m.best.k if m.best else None}


def result_table(r: OptimizeResult) -> list[tuple[str, str, str]]:
    """(measure, original, variant) rows for the CLI and the app."""
    b, a = r.before, r.after

    def mib(n: int) -> str:
        return f"{n / 2**20:.0f} MiB"

    t1 = r.verify_s.get(1, 0.0)
    return [
        ("file type", b.quant.upper(), a.quant.upper()),
        ("file size", mib(b.size_bytes), mib(a.size_bytes)),
        ("draft alone, tok/s", f"{b.alone_tokens_per_s:.1f}", f"{a.alone_tokens_per_s:.1f}"),
        ("draft step, ms/token", f"{b.step_token_s * 1000:.1f}", f"{a.step_token_s * 1000:.1f}"),
        ("cost ratio c (draft/target)", f"{b.step_token_s / t1:.2f}" if t1 else "-", f"{a.step_token_s / t1:.2f}" if t1 else "-"),
        ("acceptance (accepted/drafted)", f"{b.acceptance_rate:.0%} ({b.accepted}/{b.drafted})",
         f"{a.acceptance_rate:.0%} ({a.accepted}/{a.drafted})"),
        ("alpha (per token)", f"{b.alpha:.2f}", f"{a.alpha:.2f}"),
        ("outputs = target alone", _same(b), _same(a)),
        ("measured speedup at k (decode)", f"{b.measured_speedup_at_k:.2f}x", f"{a.measured_speedup_at_k:.2f}x"),
        ("predicted speedup at measured k", f"{b.at_k.speedup:.2f}x (k={b.at_k.k})" if b.at_k else "-",
         f"{a.at_k.speedup:.2f}x (k={a.at_k.k})" if a.at_k else "-"),
        ("predicted speedup, best k", f"{b.best.speedup:.2f}x (k={b.best.k})" if b.best else "-",
         f"{a.best.speedup:.2f}x (k={a.best.k})" if a.best else "-"),
    ]


def _same(m: DraftMeasure) -> str:
    out = f"{m.identical}/{m.compared}"
    if m.near_ties:
        out += f" ({m.near_ties} near-tie)"
    if m.divergence_bugs:
        out += f" ({m.divergence_bugs} NOT near-tie)"
    return out


def verify_curve_line(verify_s: dict[int, float]) -> str:
    t1 = verify_s.get(1)
    if not t1:
        return ""
    return ", ".join(f"{n}: {t / t1:.2f}x" for n, t in sorted(verify_s.items()))


def break_even_lines(be: BreakEven) -> list[str]:
    out = [f"at the measured cost ratio c = {be.draft_cost_ratio:.2f}, a perfect draft would reach {be.ceiling:.2f}x"]
    if be.alpha_needed is None:
        out.append(f"{be.goal:.2f}x cannot be reached at c = {be.draft_cost_ratio:.2f}, whatever the acceptance")
    else:
        out.append(f"{be.goal:.2f}x needs per-token acceptance alpha >= {be.alpha_needed:.2f} at c = {be.draft_cost_ratio:.2f} "
                   f"(measured {be.alpha:.2f})")
    if be.cost_ratio_needed is None:
        out.append(f"{be.goal:.2f}x cannot be reached at alpha = {be.alpha:.2f}, even with a free draft")
    else:
        out.append(f"{be.goal:.2f}x needs a draft cost ratio c <= {be.cost_ratio_needed:.2f} at alpha = {be.alpha:.2f} "
                   f"(measured {be.draft_cost_ratio:.2f})")
    return out


__all__ = ["optimize_draft", "OptimizeResult", "DraftMeasure", "BreakEven", "OptimizeError", "break_even",
           "fallback_tensors", "fastest_type", "measure_verify_curve", "result_table", "verify_curve_line",
           "break_even_lines", "alpha_of"]
