"""`tandem optimize-draft`: give a pair's draft the file type this backend runs fastest,
measured before and after, kept only when the predicted speedup improves."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path

from ..errors import TandemError


class _Progress:
    """One line per stage on stderr (a rewritten line on a terminal)."""

    def __init__(self, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def __call__(self, message: str, fraction: float) -> None:
        line = f"[{'#' * int(20 * fraction):<20s}] {fraction:4.0%} {message}"
        if self.tty:
            self.stream.write("\r" + line[:150].ljust(150) + ("\n" if fraction >= 1.0 else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def _resolve(args: argparse.Namespace) -> tuple[Path, Path, object]:
    """(target, original draft, pair or None): --target/--draft, else PAIR or the default pair."""
    from ..models import catalog, store
    from .common import UsageError, resolve_model

    if args.target or args.draft:
        if not (args.target and args.draft):
            raise UsageError("give both --target and --draft, or a pair id")
        if args.pair:
            raise UsageError("give a pair id or --target/--draft, not both")
        return resolve_model(args.target, "target"), resolve_model(args.draft, "draft"), None
    cat = catalog.load()
    pair = cat.pair(args.pair) if args.pair else cat.default
    t, d = store.find_model(pair.target.id, cat), store.find_model(pair.draft.id, cat)
    if t is None or d is None:
        raise UsageError(f"pair {pair.id!r} is not downloaded yet: run `tandem pull {pair.id}`")
    return t, d, pair


def cmd_optimize_draft(args: argparse.Namespace) -> int:
    from ..models import draft_variants
    from ..measure import optimize
    from .common import check_runtime_flags

    check_runtime_flags(args)
    target, draft, pair = _resolve(args)
    if not draft.is_file():
        raise TandemError(f"{draft}: no such file")
    if args.forget:
        from ..llamacpp.ggml_devices import current_backend

        backend = current_backend()
        entry = draft_variants.forget(draft, backend)
        if entry is None:
            print(f"no optimised variant recorded for {draft.name} on {backend}")
        else:
            print(f"forgot {entry.get('variant') or 'the rejected variant'}; {draft.name} is used again")
        return 0
    cancel = threading.Event()
    try:
        res = optimize.optimize_draft(
            target, draft, pair=pair, qtype=args.type, source=args.source, prompts=args.prompts,
            max_tokens=args.max_tokens, k=args.k, n_threads=args.threads, progress=_Progress(), cancel=cancel,
        )
    except KeyboardInterrupt:
        cancel.set()
        print("\ntandem: optimisation interrupted; nothing was registered", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(res.to_dict(), default=lambda o: o.__dict__))
        return 0
    print_result(res)
    return 0


def print_result(res) -> None:
    from ..measure import optimize

    print(f"target  {res.target}")
    print(f"draft   {res.draft}")
    print(f"variant {res.qtype.upper()} for backend {res.backend}: {res.source}; "
          f"{res.matrices - res.fallbacks} of {res.matrices} weight matrices take {res.qtype.upper()}")
    print(f"target alone {res.target_tokens_per_s:.1f} tok/s; verify cost per batch size (x one token): "
          f"{optimize.verify_curve_line(res.verify_s)}")
    print()
    rows = [("", "original", "variant")] + optimize.result_table(res)
    w = [max(len(r[i]) for r in rows) for i in range(3)]
    for i, r in enumerate(rows):
        print(f"{r[0]:<{w[0]}}  {r[1]:>{w[1]}}  {r[2]:>{w[2]}}")
        if i == 0:
            print(f"{'-' * w[0]}  {'-' * w[1]}  {'-' * w[2]}")
    print()
    for line in optimize.break_even_lines(res.break_even):
        print(f"break-even: {line}")
    for n in res.notes:
        print(f"note: {n}")
    print()
    print(res.verdict + (f" — the pair now drafts with {res.variant}" if res.kept else ""))


def register(sub: argparse._SubParsersAction) -> None:
    o = sub.add_parser(
        "optimize-draft",
        help="requantise (or fetch) the draft in this backend's fastest type; keep it if it pays",
        description="Obtain the draft in the type this backend runs fastest (CPU: Q4_0), measure both drafts "
                    "against the target on the code-generation suite (draft speed, acceptance, verify cost), and "
                    "keep the variant only when the cost model predicts a better speedup. Output is unchanged: "
                    "the target decides every token.",
    )
    o.add_argument("pair", nargs="?", help="a catalog pair id (default: the default pair)")
    o.add_argument("--target", help="target GGUF path or model id (with --draft)")
    o.add_argument("--draft", help="draft GGUF path or model id (with --target)")
    o.add_argument("--type", help="quantisation type to try (default: this backend's fastest, CPU: q4_0)")
    o.add_argument("--source", choices=("auto", "hub", "requantize"), default="auto",
                   help="auto: the catalog's published file when the Hub answers, else requantise locally")
    o.add_argument("--prompts", type=int, default=4, help="code-generation prompts to measure on (default 4)")
    o.add_argument("--max-tokens", type=int, default=48, help="tokens per prompt (default 48)")
    o.add_argument("--k", type=int, default=4, help="fixed lookahead for the acceptance runs (default 4)")
    o.add_argument("--threads", type=int)
    o.add_argument("--json", action="store_true", help="print the result as one JSON object")
    o.add_argument("--forget", action="store_true", help="drop the recorded variant: the pair uses the original again")
    o.set_defaults(func=cmd_optimize_draft)
