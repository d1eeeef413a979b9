"""Time to first token of a question about a long document: read cold, asked again after a
question about another document (with no draft, then with another draft choice), and asked
again after a restart (a new Engine on the same file, the prompt cache read from disk). The
same sequence with the prompt cache off is the baseline: before it, a request about another
document, or with another draft choice, made the next one re-read the whole document.

    python -m tools.prompt_cache_ttft --target T.gguf [--chars 6000] [--reps 3] [--ctx 4096]

The documents are this repository's docs/architecture.md and README.md, cut to `--chars`
characters, asked through the chat template. Each repetition starts from an empty cache folder
(a temporary TANDEM_HOME). Run it on an idle machine; medians of `--reps` are printed.

`--serve` measures the same as a client of `tandem serve` sees it (issue #47's check: again after
another document at most 0.25x of the cold read, after a restart at most 0.35x): the server in its
own process with its defaults (`--parallel auto`: the slots) and `--no-history-draft`, the first
document of the long documents suite (`--suite`) asked its three questions, another document
between, a question with another draft choice (prompt lookup, as another tool would ask), then a
new server on the same data folder asked the first question again. Time to first token is the
client's: the request sent to its first streamed token.

    python -m tools.prompt_cache_ttft --serve --pair qwen2.5-coder-1.5b --reps 3 [--suite heldout/long_documents]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("cold", "again after another document", "again, another draft choice", "after a restart",
         "cache off: again after another document")


def _ask(eng, doc: str, question: str, draft: str | None = None) -> tuple[float, int]:
    messages = [{"role": "user", "content": f"{doc}\n\nQuestion: {question}"}]
    r = eng.generate(messages, chat=True, max_tokens=4, draft_model=draft, lookahead="auto" if draft else 0)
    return r.stats.time_to_first_token_s, r.stats.prompt_tokens


def one_round(target: str, doc: str, other: str, ctx: int) -> tuple[dict[str, float], int]:
    """One repetition in a fresh cache folder: each kind's time to first token, and the prompt's tokens."""
    from engine import Engine

    os.environ["TANDEM_HOME"] = tempfile.mkdtemp(prefix="tandem-prompt-cache-")
    t: dict[str, float] = {}
    eng = Engine(target, n_ctx=ctx, metrics_log=False)
    t[KINDS[0]], n = _ask(eng, doc, "What is the first room?")
    _ask(eng, other, "What does it do?")
    t[KINDS[1]], _ = _ask(eng, doc, "Which room imports llama_cpp?")
    _ask(eng, other, "How is it installed?")
    t[KINDS[2]], _ = _ask(eng, doc, "What is a wing?", draft="lookup")
    eng.close()  # its cache files are written before it returns
    eng = Engine(target, n_ctx=ctx, metrics_log=False)
    t[KINDS[3]], _ = _ask(eng, doc, "What does the engine never import?")
    eng.close()
    base = Engine(target, n_ctx=ctx, metrics_log=False, prompt_cache=False)
    _ask(base, doc, "What is the first room?")
    _ask(base, other, "What does it do?")
    t[KINDS[4]], _ = _ask(base, doc, "Which room imports llama_cpp?")
    base.close()
    return t, n


SERVED = ("cold", "again after another document", "again, another draft choice (lookup)",
          "after a restart (the first question again)")


def served_round(where: Sequence[str], questions: Sequence[str], other: str, max_tokens: int,
                 cached: dict[str, list[str]] | None = None) -> dict[str, float]:
    """One repetition through `tandem serve` (options `where`) in a fresh data folder: each kind's
    time to first token as the client sees it (`cached`: each kind's "N of M" prompt tokens
    the server's usage said came from its cache, appended)."""
    import httpx

    from tools.load_test import stream_one
    from tools.serve_process import served

    os.environ["TANDEM_HOME"] = tempfile.mkdtemp(prefix="tandem-prompt-cache-")
    t: dict[str, float] = {}

    def ttft(http: Any, base: str, prompt: str, draft: str | None = None, kind: str | None = None) -> float:
        sent = stream_one(http, base, "m", prompt, max_tokens, draft, 0)
        if sent.error or sent.ttft is None:
            raise SystemExit(f"a request failed: {sent.error or 'no token came back'}")
        if kind is not None:
            t[kind] = sent.ttft
            if cached is not None:
                cached.setdefault(kind, []).append(f"{sent.cached} of {sent.prompt_tokens}")
        return sent.ttft

    with httpx.Client(timeout=None) as http:
        with served(*where, "--no-history-draft", "--any-model-name") as base:
            ttft(http, base, questions[0], kind=SERVED[0])
            ttft(http, base, other)
            ttft(http, base, questions[1], kind=SERVED[1])
            ttft(http, base, other)
            ttft(http, base, questions[2], "lookup", kind=SERVED[2])
        with served(*where, "--no-history-draft", "--any-model-name") as base:
            ttft(http, base, questions[0], kind=SERVED[3])
    return t


def _suite_documents(suite: str) -> tuple[list[str], str]:
    """The suite's first document's three questions, and a question about its second document."""
    from engine.measure.suites import load_suite

    prompts = [p.prompt for p in load_suite(suite).prompts if isinstance(p.prompt, str)]
    first = prompts[0].split("```")[1]
    mine = [p for p in prompts if p.split("```")[1] == first]
    other = next((p for p in prompts if p.split("```")[1] != first), None)
    if len(mine) < 3 or other is None:
        raise SystemExit(f"{suite}: needs a document asked three ways and another document")
    return mine[:3], other


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--target", help="a GGUF file, a catalog id or a file name in the store")
    which.add_argument("--pair", help="with --serve: a catalog pair, its draft model served as the app serves it")
    ap.add_argument("--chars", type=int, default=6000, help="each document's length in characters")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--serve", action="store_true", help="through `tandem serve` in its own process")
    ap.add_argument("--suite", default="long_documents", help="with --serve: the documents' suite")
    ap.add_argument("--max-tokens", type=int, default=8, help="with --serve: each answer's length")
    ap.add_argument("--out", type=Path, help="a folder for results.json")
    args = ap.parse_args(argv)
    if args.pair and not args.serve:
        ap.error("--pair needs --serve (the engine's sequence takes --target)")
    if args.reps < 1:
        ap.error("--reps must be at least 1")
    n: int | str = 0
    if args.serve:
        kinds = SERVED
        questions, other = _suite_documents(args.suite)
        where = (["--pair", args.pair] if args.pair else ["--target", args.target]) + ["--ctx", str(args.ctx)]
        n = f"the {args.suite} suite's first document"
    else:
        kinds = KINDS
        doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")[: args.chars]
        other = (ROOT / "README.md").read_text(encoding="utf-8")[: args.chars]
    runs: dict[str, list[float]] = {k: [] for k in kinds}
    cached: dict[str, list[str]] = {}
    for rep in range(args.reps):
        t0 = time.perf_counter()
        if args.serve:
            got = served_round(where, questions, other, args.max_tokens, cached)
        else:
            got, n = one_round(args.target, doc, other, args.ctx)
        for k, v in got.items():
            runs[k].append(v)
        print(f"repetition {rep + 1}: {time.perf_counter() - t0:.0f} s", flush=True)
    cold = statistics.median(runs[kinds[0]])
    print(f"prompt: {n}{'' if isinstance(n, str) else ' tokens'}; time to first token, median of {args.reps}:")
    for k, v in runs.items():
        m = statistics.median(v)
        ratios = [x / c for x, c in zip(v, runs[kinds[0]])]  # each repetition against its own cold read
        print(f"  {k:42s} {m:8.3f} s  {statistics.median(ratios):5.2f}x cold ({min(ratios):.2f}-{max(ratios):.2f})"
              f"   ({', '.join(f'{x:.3f}' for x in v)})" + (f"; cached: {', '.join(cached[k])}" if k in cached else ""))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps({"argv": list(argv or sys.argv[1:]), "prompt": n, "ttft_s": runs,
                                                               "cached_tokens": cached}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
