"""The benchmark's reports: runs.jsonl, results.csv/json, summary.md, plots, and the cost
model's prediction beside each measured row."""

from __future__ import annotations

import csv
import json
from dataclasses import asdict
from pathlib import Path

from ..decoding.drafting.cost_model import expected_tokens
from ..decoding.drafting.lookahead import MAX_LOOKAHEAD
from .bench import BenchResult, draft_kind, predicted_speedup
from .bench_long import long_markdown
from .bench_requests import requests_markdown, sources_text
from .suites import HELDOUT, suite_set



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
        kind = draft_kind(row.config, row.mode)
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
    p.write_text(json.dumps({"meta": result.meta, "cost": result.cost, "rows": [asdict(r) for r in result.rows],
                             "by_request": [asdict(r) for r in result.by_request],
                             "by_kind": [asdict(r) for r in result.by_kind]}, indent=1))
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
    lines += long_markdown(result.by_kind)
    lines += requests_markdown(result.by_request)
    lines += sources_markdown(result)
    if m.get("skipped"):
        lines += ["", "## Skipped prompts", "", "These prompts were not run (a prompt longer than the context, or a FIM "
                  "prompt for a target without FIM tokens):", ""]
        lines += [f"- {x['suite']}/{x['prompt']}: {x['reason']}" for x in m["skipped"]]
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


def sources_markdown(result: BenchResult) -> list[str]:
    """Which drafter supplied the accepted tokens, per suite and configuration: shown when a
    configuration drew on more than one (the suffix draft: this request, past answers, lookup)."""
    if not any(len(r.accepted_by) > 1 for r in result.rows):
        return []
    lines = ["", "### Who drafted the accepted tokens", "", "| suite | config | accepted from |", "|---|---|---|"]
    lines += [f"| {r.suite} | {r.config} | {sources_text(r.accepted_by)} |" for r in result.rows if r.accepted_by]
    return lines


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
