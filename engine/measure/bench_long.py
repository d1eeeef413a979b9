"""The long-prompt suites' report: on a prompt of a document, a repository or an agent's
history the wait is mostly reading, so beside decode speed it gives the time to the first
token and the wall-clock, in seconds and against target alone, per question kind (quote,
extract, summary) for the documents: speculation may pay on a quote and lose on a summary."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .suites import KINDS, is_long

ALL = "all"  # the kind of a suite whose prompts say none (FIM, agent sessions)


@dataclass
class LongRow:
    """One long suite x question kind x configuration: medians over prompts and repetitions."""

    suite: str
    kind: str  # quote | extract | summary | all
    config: str
    runs: int
    prompt_tokens: int
    ttft_s: float
    wall_s: float
    decode_tok_s: float
    draft_read_s: float  # a model draft reading the prompt (0 when it never did)
    ttft_vs_target: float | None  # this first token's time / target alone's: at most 1.00 is no later
    wall_vs_target: float | None  # target alone's wall-clock / this one's: above 1.00 is faster
    decode_vs_target: float | None


def _median(xs: Sequence[float]) -> float | None:
    return float(statistics.median(xs)) if xs else None


def _ratios(rs: Sequence[Any], ref: dict, f: Callable[[Any, Any], float | None]) -> list[float]:
    out = []
    for r in rs:
        base = ref.get((r.suite, r.prompt_id, r.rep))
        x = f(r, base) if base is not None else None
        if x is not None:
            out.append(x)
    return out


def by_kind(runs: Sequence[Any]) -> list[LongRow]:
    """LongRows for the runs of long-prompt suites (none without them), in suite, kind and
    configuration order; every ratio is per prompt and repetition against target alone."""
    long_runs = [r for r in runs if is_long(r.suite)]
    ref = {(r.suite, r.prompt_id, r.rep): r for r in long_runs if r.mode == "target"}
    suites = list(dict.fromkeys(r.suite for r in long_runs))
    configs = list(dict.fromkeys(r.config for r in long_runs))
    groups: dict[tuple[str, str, str], list[Any]] = {}
    for r in long_runs:
        groups.setdefault((r.suite, r.kind or ALL, r.config), []).append(r)
    order = list(KINDS) + [ALL]
    rows = []
    for key in sorted(groups, key=lambda k: (suites.index(k[0]), order.index(k[1]) if k[1] in order else len(order),
                                             configs.index(k[2]))):
        rs = groups[key]
        target = rs[0].mode == "target"
        ttft = _ratios(rs, ref, lambda r, b: r.time_to_first_token_s / b.time_to_first_token_s
                       if b.time_to_first_token_s > 0 else None)
        wall = _ratios(rs, ref, lambda r, b: b.wall_s / r.wall_s if r.wall_s > 0 else None)
        decode = _ratios(rs, ref, lambda r, b: r.decode_tokens_per_s / b.decode_tokens_per_s
                         if b.decode_tokens_per_s > 0 else None)
        rows.append(LongRow(
            *key, len(rs), int(_median([r.prompt_tokens for r in rs]) or 0),
            _median([r.time_to_first_token_s for r in rs]) or 0.0, _median([r.wall_s for r in rs]) or 0.0,
            _median([r.decode_tokens_per_s for r in rs]) or 0.0, _median([r.draft_sync_s for r in rs]) or 0.0,
            None if target else _median(ttft), None if target else _median(wall), None if target else _median(decode),
        ))
    return rows


def _x(v: float | None, bold: bool = False) -> str:
    if v is None:
        return "–"
    return f"**{v:.2f}x**" if bold else f"{v:.2f}x"


def long_markdown(rows: Sequence[LongRow]) -> list[str]:
    """The summary's section for the long-prompt suites (empty when none ran)."""
    if not rows:
        return []
    lines = [
        "", "### Long prompts: first token and wall-clock", "",
        "Documents asked about (by question kind), fill-in-the-middle with repository context, agent sessions. "
        "Seconds are medians over prompts and repetitions; every run reads its whole prompt. TTFT = time to the first "
        "token (mostly reading the prompt); first token vs target = this TTFT / target alone's (at most 1.00x: no "
        "later); wall-clock vs target = target alone's wall time / this one (above 1.00x: faster); decode likewise in "
        "tokens/s; all three per prompt and repetition, then the median. Draft read = seconds a model draft spent "
        "reading the prompt (0: it never read it).", "",
        "| suite | kind | config | n | prompt tokens | TTFT s | first token vs target | wall s | wall-clock vs target "
        "| decode tok/s | decode vs target | draft read s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r.suite} | {r.kind} | {r.config} | {r.runs} | {r.prompt_tokens} | {r.ttft_s:.2f} "
                     f"| {_x(r.ttft_vs_target)} | {r.wall_s:.2f} | {_x(r.wall_vs_target, True)} | {r.decode_tok_s:.1f} "
                     f"| {_x(r.decode_vs_target)} | {r.draft_read_s:.2f} |")
    return lines
