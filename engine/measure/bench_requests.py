"""Runs of several requests, reported by the request's place in its run (1, 2, 3+): each
configuration's wall-clock and decode speed against target alone and against prompt lookup
on the same request of the same repetition, and which drafter supplied the accepted tokens.
A drafter that learns from earlier answers (suffix) can only gain from the second request on."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

BUCKETS = ("1", "2", "3+")


def bucket(request: int) -> str:
    """The report's group for a request's place in its run."""
    return BUCKETS[min(request, 3) - 1]


@dataclass
class RequestRow:
    """One suite x configuration x request group: medians of per-request ratios."""

    suite: str
    config: str
    request: str  # "1", "2" or "3+"
    runs: int  # requests measured (runs x repetitions)
    wall_vs_target: float  # target wall-clock / this wall-clock
    decode_vs_target: float  # this decode tok/s / target's
    wall_vs_lookup: float | None  # the same against prompt lookup; None without a lookup configuration
    decode_vs_lookup: float | None
    accepted_by: dict[str, int] = field(default_factory=dict)  # accepted draft tokens per source


def _median(xs: Sequence[float]) -> float | None:
    return float(statistics.median(xs)) if xs else None


def _ratios(rs: Sequence[Any], ref: dict, num: Callable[[Any, Any], float | None]) -> list[float]:
    out = []
    for r in rs:
        base = ref.get((r.suite, r.run_id, r.request, r.rep))
        x = num(r, base) if base is not None else None
        if x is not None:
            out.append(x)
    return out


def _wall(r: Any, base: Any) -> float | None:
    return base.wall_s / r.wall_s if r.wall_s > 0 else None


def _decode(r: Any, base: Any) -> float | None:
    return r.decode_tokens_per_s / base.decode_tokens_per_s if base.decode_tokens_per_s > 0 else None


def by_request(runs: Sequence[Any]) -> list[RequestRow]:
    """RequestRows for the runs that belong to runs of several requests (none otherwise)."""
    multi = [r for r in runs if r.run_id is not None]
    target = {(r.suite, r.run_id, r.request, r.rep): r for r in multi if r.mode == "target"}
    lookup = {(r.suite, r.run_id, r.request, r.rep): r for r in multi if r.mode == "lookup"}
    suites = list(dict.fromkeys(r.suite for r in multi))
    configs = list(dict.fromkeys(r.config for r in multi))
    groups: dict[tuple[str, str, str], list[Any]] = {}
    for r in multi:
        groups.setdefault((r.suite, r.config, bucket(r.request)), []).append(r)
    rows = []
    for key in sorted(groups, key=lambda k: (suites.index(k[0]), configs.index(k[1]), BUCKETS.index(k[2]))):
        rs = groups[key]
        sources: dict[str, int] = {}
        for r in rs:
            for src, n in r.accepted_by.items():
                sources[src] = sources.get(src, 0) + n
        rows.append(RequestRow(
            *key, len(rs), _median(_ratios(rs, target, _wall)) or 0.0, _median(_ratios(rs, target, _decode)) or 0.0,
            _median(_ratios(rs, lookup, _wall)) if lookup else None, _median(_ratios(rs, lookup, _decode)) if lookup else None,
            dict(sorted(sources.items(), key=lambda kv: -kv[1])),
        ))
    return rows


def sources_text(accepted_by: dict[str, int]) -> str:
    """"suffix:history 40, suffix:request 12, lookup 3" (most first), or "–"."""
    return ", ".join(f"{src} {n}" for src, n in sorted(accepted_by.items(), key=lambda kv: -kv[1])) or "–"


def requests_markdown(rows: Sequence[RequestRow]) -> list[str]:
    """The summary's section for runs of several requests (empty when there are none)."""
    if not rows:
        return []
    lines = [
        "", "### Runs of several requests, by request", "",
        "Each request of a run is compared with the same request of the same repetition, sent as target alone "
        "and with prompt lookup; medians over runs and repetitions (n requests). The suffix draft's memory of past answers "
        "starts empty at every repetition of a run and learns from each request of the run in turn, so requests 2 "
        "and 3+ show what it learnt. Accepted from = accepted draft tokens per drafter that proposed them.", "",
        "| suite | config | request | n | wall-clock vs target | decode vs target | wall-clock vs lookup "
        "| decode vs lookup | accepted from |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.config == "target":  # the reference: 1.00x against itself
            continue
        wl = f"{r.wall_vs_lookup:.2f}x" if r.wall_vs_lookup is not None else "–"
        dl = f"{r.decode_vs_lookup:.2f}x" if r.decode_vs_lookup is not None else "–"
        lines.append(f"| {r.suite} | {r.config} | {r.request} | {r.runs} | **{r.wall_vs_target:.2f}x** "
                     f"| {r.decode_vs_target:.2f}x | {wl} | {dl} | {sources_text(r.accepted_by)} |")
    return lines
