"""Time to first token of a question about a long document: read cold, asked again after a
question about another document (with no draft, then with another draft choice), and asked
again after a restart (a new Engine on the same file, the prompt cache read from disk). The
same sequence with the prompt cache off is the baseline: before it, a request about another
document, or with another draft choice, made the next one re-read the whole document.

    python -m tools.prompt_cache_ttft --target T.gguf [--chars 6000] [--reps 3] [--ctx 4096]

The documents are this repository's docs/architecture.md and README.md, cut to `--chars`
characters, asked through the chat template. Each repetition starts from an empty cache folder
(a temporary TANDEM_HOME). Run it on an idle machine; medians of `--reps` are printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True, help="a GGUF file, a catalog id or a file name in the store")
    ap.add_argument("--chars", type=int, default=6000, help="each document's length in characters")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ctx", type=int, default=4096)
    args = ap.parse_args(argv)
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")[: args.chars]
    other = (ROOT / "README.md").read_text(encoding="utf-8")[: args.chars]
    runs: dict[str, list[float]] = {k: [] for k in KINDS}
    n = 0
    for rep in range(args.reps):
        t0 = time.perf_counter()
        got, n = one_round(args.target, doc, other, args.ctx)
        for k, v in got.items():
            runs[k].append(v)
        print(f"repetition {rep + 1}: {time.perf_counter() - t0:.0f} s", flush=True)
    cold = statistics.median(runs[KINDS[0]])
    print(f"prompt: {n} tokens; time to first token, median of {args.reps}:")
    for k, v in runs.items():
        m = statistics.median(v)
        print(f"  {k:42s} {m:8.3f} s  {m / cold:5.2f}x cold   ({', '.join(f'{x:.3f}' for x in v)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
