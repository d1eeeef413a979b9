"""The Library's quote-heavy suite timed (docs/benchmarks.md section 20): questions that ask to
quote a clause, list deliverables or action items and give a price table's rows, answered the
way `tandem ask` answers them, with the target alone (`none`), with prompt lookup (`lookup`)
and with the pair's draft model under Auto beside the free drafters (`auto`).

    python -m tools.library_quote_bench [--pair qwen2.5-coder-1.5b | --target T [--draft D]]
        [--set tuning|heldout|all] [--per-kind N] [--limit N] [--repeat 3] [--max-tokens 256] [--json OUT]

The suite's folder (tools/library_quote_suite/) is written to a temporary folder (or
`--folder`) and indexed once, ranked by words alone (no embedding model, so every machine
ranks alike). Each question's prompt is built as `tandem ask` builds it (the best passages
that fit the context, numbered) and answered greedily for `--max-tokens` at most under every
config; the configs run interleaved, their order rotated each repetition, and every run starts
cold: no read prompt kept (KV caches emptied, no prompt cache) and no past answer to draft
from (the data folder is a fresh temporary one and the suffix drafter's memory is cleared
before each run), so no run drafts from what an earlier one answered.

Per run: wall-clock from the request to the last token, time to first token, decode tok/s,
accepted draft tokens by drafter (RunStats.accepted_by) and by the source they were copied
from (asking.drafted_from, as `tandem ask` counts them), whether the expected file was among
the sources and whether the answer held the source's words. Greedy answers must be the same
under every config: each parting is printed with the target's top-two logit margin there
(engine.first_divergence, as tools/fim_bench.py does); one that is not a near-tie (llama.cpp's
batched-vs-single rounding on a quantized model) makes the exit status 1. Nothing here asserts
a speed; run it on a quiet machine and read the table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

SUITE = Path(__file__).with_name("library_quote_suite")
CONFIGS = ("none", "lookup", "auto")
KINDS = ("quote", "list", "table")


def load_questions(which: str, per_kind: int | None = None) -> list[dict[str, Any]]:
    """The suite's questions of `which` set ("all": tuning then held-out), at most `per_kind` of each kind per set."""
    out = []
    for name in (("tuning", "heldout") if which == "all" else (which,)):
        seen: Counter[str] = Counter()
        for line in (SUITE / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
            q = json.loads(line) if line.strip() else None
            if q and (per_kind is None or seen[q["kind"]] < per_kind):
                seen[q["kind"]] += 1
                out.append({**q, "set": name})
    return out


def holds(text: str, wanted: list[str]) -> bool:
    """Whether the answer holds each wanted piece of the source, case and spacing aside."""
    plain = " ".join(text.split()).lower()
    return all(" ".join(w.split()).lower() in plain for w in wanted)


def config_spec(config: str, draft: Any) -> tuple[Any, Any]:
    """(draft_model, lookahead) of a config; `auto` without a draft model is `tandem ask`'s own default, the suffix draft."""
    return {"none": ("none", 0), "lookup": ("lookup", "auto"),
            "auto": (draft if draft is not None else "suffix", "auto")}[config]


def run_once(eng: Any, ask: Any, q: dict[str, Any], config: str, draft: Any, max_tokens: int) -> dict[str, Any]:
    """One cold answer of `ask` (a fitted AskPrompt) under `config`, timed from the request to its last token."""
    from engine.decoding.events import DoneEvent, TokenEvent
    from engine.decoding.request import GenerationRequest
    from engine.library import DraftRuns, drafted_from

    eng.forget_prompts()
    eng.clear_draft_history()
    draft_model, lookahead = config_spec(config, draft)
    request = GenerationRequest.from_options(ask.text, draft_model=draft_model, lookahead=lookahead,
                                             max_tokens=max_tokens, temperature=0.0, seed=0, chat=True, tag="ask",
                                             prompt_cache=False)
    runs, done, first, last = DraftRuns(), None, None, None
    began = time.perf_counter()
    for ev in eng.stream(request):
        if isinstance(ev, TokenEvent):
            last = time.perf_counter()
            first = first or last
            runs.add(ev.text, ev.provenance)
        elif isinstance(ev, DoneEvent):
            done = ev
    assert done is not None
    st = done.stats
    by_source = drafted_from(runs.end(), ask.sources)
    files = [h.path for h in ask.sources]
    return {"id": q["id"], "set": q["set"], "kind": q["kind"], "config": config,
            "wall_s": round((last or time.perf_counter()) - began, 4),
            "ttft_s": round((first or time.perf_counter()) - began, 4), "engine_ttft_s": round(st.time_to_first_token_s, 4),
            "decode_tps": round(st.decode_tokens_per_s, 2), "prompt_tokens": st.prompt_tokens,
            "generated": st.generated_tokens, "drafted": st.drafted, "accepted": st.accepted,
            "accepted_by": dict(st.accepted_by), "lookahead": st.lookahead,
            "drafted_from_sources": {files[n - 1]: k for n, k in sorted(by_source.items())},
            "sources": files, "right_file": q["file"] in files, "answer_holds": holds(done.text, q["answer_has"]),
            "text": done.text, "tokens": list(done.tokens)}


def exactness(rows: list[dict[str, Any]], margin: Callable[[dict, dict], Any] | None = None) -> list[dict[str, Any]]:
    """Each difference between a question's greedy answers (every config and repetition against
    its first `none` run): where they part and, with `margin(base_row, row)` (the engine's
    first_divergence), the target's top-two logit margin there. A parting at a near-tie is
    llama.cpp's batched-vs-single rounding on a quantized model; any other is a bug."""
    ref: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r["config"] == "none":
            ref.setdefault(r["id"], r)
    out = []
    for r in rows:
        base = ref.get(r["id"])
        if base is None or r is base or (r["text"] == base["text"] and r.get("tokens") == base.get("tokens")):
            continue
        a, b = base["text"], r["text"]
        i = next((j for j in range(min(len(a), len(b))) if a[j] != b[j]), min(len(a), len(b)))
        div = margin(base, r) if margin is not None else None
        near = bool(div is not None and div.within_noise)
        where = (f"token {div.index}, the target's top-two margin there {div.margin:.3f}: "
                 + ("a near-tie" if near else "NOT a near-tie") if div is not None else "margin not measured")
        out.append({"id": r["id"], "rep": r["rep"], "config": r["config"], "character": i,
                    "token": div.index if div is not None else None, "margin": div.margin if div is not None else None,
                    "near_tie": near, "line": f"{r['id']} rep {r['rep']}: {r['config']} parted from none at character "
                                          f"{i} ({where}): {a[i:i + 40]!r} vs {b[i:i + 40]!r}"})
    return out


def _med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


def table(rows: list[dict[str, Any]]) -> str:
    """Per set and kind, per config: median wall-clock and its speed-up over `none` (the median of
    none's wall / the config's wall for the same question and repetition, with the range), TTFT,
    decode tok/s, accepted tokens by drafter and drafted from the sources, and the checks."""
    lines = ["| set | kind | config | runs | wall s (median) | vs none (range) | TTFT s | decode tok/s | "
             "accepted by drafter | drafted from sources | right file | answer holds |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    none_wall = {(r["id"], r["rep"]): r["wall_s"] for r in rows if r["config"] == "none"}
    for s in ("tuning", "heldout"):
        for kind in KINDS:
            for config in CONFIGS:
                rs = [r for r in rows if r["set"] == s and r["kind"] == kind and r["config"] == config]
                if not rs:
                    continue
                ratios = [none_wall[(r["id"], r["rep"])] / r["wall_s"] for r in rs
                          if (r["id"], r["rep"]) in none_wall and r["wall_s"] > 0]
                vs = f"{_med(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})" if ratios else "-"
                by: Counter[str] = Counter()
                for r in rs:
                    by.update(r["accepted_by"])
                drafter = ", ".join(f"{k} {v}" for k, v in by.most_common() if v) or "-"
                from_sources = sum(sum(r["drafted_from_sources"].values()) for r in rs)
                lines.append(f"| {s} | {kind} | {config} | {len(rs)} | {_med([r['wall_s'] for r in rs]):.2f} | {vs} | "
                             f"{_med([r['ttft_s'] for r in rs]):.2f} | {_med([r['decode_tps'] for r in rs]):.1f} | "
                             f"{drafter} | {from_sources} of {sum(r['accepted'] for r in rs)} accepted | "
                             f"{sum(r['right_file'] for r in rs)}/{len(rs)} | {sum(r['answer_holds'] for r in rs)}/{len(rs)} |")
    return "\n".join(lines)


def bench(args: argparse.Namespace, target: Any, draft: Any, folder: Path) -> tuple[list[dict[str, Any]], dict]:
    """Index `folder` once, then every question under every config, `args.repeat` times interleaved;
    the rows, and what the run was (its differences measured at their partings)."""
    from engine.cli.common import UsageError
    from engine.decoding.engine import Engine
    from engine.library import Library, fit_to_context
    from engine.llamacpp.runtime import RuntimeParams

    questions = load_questions(args.set, args.per_kind)[:args.limit]
    with Library(folder) as lib:
        report = lib.update()
        for name, why in report.unreadable:  # a reader missing here: its questions will say "file MISSING"
            print(f"library_quote_bench: warning: {name} could not be read ({why})", file=sys.stderr)
        hits = {q["id"]: lib.search(q["question"], args.top) for q in questions}
    eng = Engine(target, runtime=RuntimeParams(n_ctx=args.ctx, n_threads=args.threads), history_draft=False,
                 prompt_cache=False, metrics_log=False)
    rows: list[dict[str, Any]] = []
    try:
        asks = {}
        for q in questions:
            asks[q["id"]] = fit_to_context(lambda text, chat: len(eng.tokens_for(text, chat=chat)), q["question"],
                                           hits[q["id"]], True, eng.n_ctx - args.max_tokens)
            if asks[q["id"]] is None:
                raise UsageError(f"--ctx {eng.n_ctx} leaves no room for {q['id']} after --max-tokens {args.max_tokens}")
        for config in CONFIGS:  # warm-up: loads the draft model and calibrates Auto before any timed run
            run_once(eng, asks[questions[0]["id"]], questions[0], config, draft, 8)
        for rep in range(args.repeat):
            order = CONFIGS[rep % len(CONFIGS):] + CONFIGS[:rep % len(CONFIGS)]
            for q in questions:
                for config in order:
                    row = {**run_once(eng, asks[q["id"]], q, config, draft, args.max_tokens), "rep": rep}
                    rows.append(row)
                    print(f"rep {rep + 1}/{args.repeat} {row['id']:26s} {config:6s} {row['wall_s']:7.2f} s  TTFT "
                          f"{row['ttft_s']:.2f} s  {row['generated']:4d} tokens  accepted {row['accepted']:4d}  file "
                          f"{'ok' if row['right_file'] else 'MISSING'}  answer {'ok' if row['answer_holds'] else 'short'}",
                          file=sys.stderr, flush=True)
        prompts = {q["id"]: eng.tokens_for(asks[q["id"]].text, chat=True) for q in questions}
        differences = exactness(rows, lambda base, r: eng.first_divergence(prompts[r["id"]], base["tokens"], r["tokens"]))
    finally:
        eng.close()
    meta = {"target": Path(target).name, "draft": draft if draft is None or isinstance(draft, str) else Path(draft).name,
            "differences": differences,
            "repeat": args.repeat, "max_tokens": args.max_tokens, "ctx": args.ctx, "top": args.top,
            "threads": args.threads, "files": report.files, "passages": report.passages,
            "machine": {"cpu": platform.processor() or platform.machine(), "system": platform.platform()}}
    return rows, meta


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default=None, help="a catalog pair id (default: the catalog's default pair)")
    ap.add_argument("--target")
    ap.add_argument("--draft", help="the draft model of the `auto` config (default: the pair's; with --target "
                                    "alone, `tandem ask`'s default, the suffix draft)")
    ap.add_argument("--set", choices=("tuning", "heldout", "all"), default="all")
    ap.add_argument("--per-kind", type=int, default=None, metavar="N", help="at most N questions of each kind per set")
    ap.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N questions (a smoke run)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--top", type=int, default=6)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--folder", help="write the suite's documents here (default: a temporary folder)")
    ap.add_argument("--json", help="write every run's row here")
    args = ap.parse_args(argv)
    for name in ("repeat", "max_tokens", "top"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("per_kind", "limit"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    from engine.cli.common import resolve_pair
    from engine.errors import TandemError
    from tools.library_quote_suite.documents import write_folder

    args.rpc = None
    try:
        target, draft = resolve_pair(args)  # as `tandem ask` resolves it (a draft `tandem optimize-draft` kept, too)
    except TandemError as e:
        print(f"library_quote_bench: error: {e}", file=sys.stderr)
        return 2
    # then a fresh data folder: no calibration, draft history or index from earlier runs (removed after, as is
    # the temporary documents folder; the caller's TANDEM_HOME is put back)
    home, before = tempfile.mkdtemp(prefix="tandem-quote-bench-"), os.environ.get("TANDEM_HOME")
    os.environ["TANDEM_HOME"] = home
    folder = Path(args.folder) if args.folder else Path(tempfile.mkdtemp(prefix="tandem-quote-suite-"))
    try:
        write_folder(folder)
        rows, meta = bench(args, target, draft, folder)
    except (TandemError, OSError) as e:  # OSError: a --folder that cannot be written
        print(f"library_quote_bench: error: {e}", file=sys.stderr)
        return 2
    finally:
        if before is None:
            os.environ.pop("TANDEM_HOME", None)
        else:
            os.environ["TANDEM_HOME"] = before
        shutil.rmtree(home, ignore_errors=True)
        if not args.folder:
            shutil.rmtree(folder, ignore_errors=True)
    differences = meta["differences"]
    print(f"\n{meta['target']} + {meta['draft']}: {meta['files']} files, {meta['passages']} passages; median of "
          f"{args.repeat}, at most {args.max_tokens} tokens, greedy\n")
    print(table(rows))
    bugs = [d for d in differences if not d["near_tie"]]
    print("\nexactness: " + ("every config answered alike" if not differences else
                             f"{len(differences)} difference(s), {len(differences) - len(bugs)} at near-ties, "
                             f"{len(bugs)} NOT at a near-tie\n" + "\n".join(d["line"] for d in differences)))
    if args.json:
        Path(args.json).write_text(json.dumps({**meta, "rows": rows}, indent=1, ensure_ascii=False), encoding="utf-8")
    return 1 if bugs else 0


if __name__ == "__main__":
    sys.exit(main())
