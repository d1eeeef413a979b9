"""`tandem ask QUESTION --folder DIR`: a question to a folder of documents, answered with
sources. The folder's index (engine/library/) is brought up to date first (only new and
changed files are read), the best passages that fit the context go into the prompt numbered,
the answer streams as generate's does and cites them as [1], [2], and the sources follow.

Speculation reads the sources: the default draft is the pair's with the free drafters beside
it under Auto, or with --target alone the suffix draft with prompt lookup, so an answer that
quotes a passage is drafted from it; which source the accepted draft tokens came from is
counted per source (`drafted_tokens`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .common import (UsageError, add_history_option, check_runtime_flags, coloured, install_sigint,
                     lookahead_arg, resolve_pair)
from .console import CONSOLE

MAX_TOP = 100
UNREADABLE_NAMED = 5  # unreadable files named on stderr; the rest counted


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ask", help="ask a folder of documents; the answer cites its sources")
    p.add_argument("question", help="the question; '-' reads stdin, '@FILE' reads a file")
    p.add_argument("--folder", required=True, help="the folder of documents (indexed in Tandem's data folder, "
                                                   "updated before each question; nothing leaves this machine)")
    p.add_argument("--embed-model", metavar="PATH|ID|none",
                   help="an embedding GGUF (a path or a catalog id) that ranks passages by meaning beside their "
                        "words; default: the catalog's embedding model when it is downloaded (`tandem pull "
                        "nomic-embed-text-v1.5-q8_0`); 'none': by words alone")
    p.add_argument("--top", type=int, default=6,
                   help=f"passages retrieved, best first (1..{MAX_TOP}; those that fit the context are used; default 6)")
    p.add_argument("--target", help="target GGUF path or catalog model id")
    p.add_argument("--draft", help="draft GGUF path or model id, 'lookup', 'suffix', 'mtp' or 'none' (default: the "
                                   "pair's draft with the free drafters, or 'suffix' with --target)")
    p.add_argument("--pair", help="a catalog pair id (instead of --target/--draft)")
    add_history_option(p)
    p.add_argument("--lookahead", type=lookahead_arg, default="auto",
                   help="tokens drafted per step, 0..16 or 'auto' (default: auto, which drafts from the sources)")
    p.add_argument("--max-tokens", type=int, default=384)
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--no-chat", action="store_true", help="a raw prompt instead of the model's chat template")
    p.add_argument("--ctx", type=int, default=4096, help="context size in tokens (sources fill what the answer leaves)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", action="store_true",
                   help='print one JSON object: {"text", "sources": [{"file", "page" or "section", "score"}], "stats"}')
    p.add_argument("--no-colour", "--no-color", action="store_true")
    from .rpc import add_rpc_option

    add_rpc_option(p)
    p.set_defaults(func=cmd_ask)


def cmd_ask(args: argparse.Namespace) -> int:
    from ..decoding.cancel import CancelToken
    from ..library import Library

    question = _question(args)
    check_runtime_flags(args)
    if not 1 <= args.top <= MAX_TOP:
        raise UsageError(f"--top must be in 1..{MAX_TOP}, got {args.top}")
    cancel = CancelToken()
    restore = install_sigint(cancel)
    embedder = None
    try:
        with Library(args.folder) as lib:
            models = resolve_pair(args)  # a model that is not there is said before the folder is read
            lib.embedder = embedder = open_embedder(args.embed_model, args.threads)
            report = lib.update(progress=IndexProgress(), cancelled=lambda: cancel.cancelled)
            if report.cancelled:
                print("tandem: interrupted (what was indexed is kept)", file=sys.stderr)
                return 130
            say_index(report, args.folder)
            hits = lib.search(question, args.top)
        if embedder is not None:
            embedder.close()
            embedder = None
        return _answer(args, models, question, hits, report, cancel)
    finally:
        if embedder is not None:
            embedder.close()
        restore()


def _question(args: argparse.Namespace) -> str:
    """The question as generate reads its prompt ('-' stdin, '@FILE' a file; undecodable bytes
    become U+FFFD with one warning), and the folder given."""
    from ..decoding.prompting.prompt_text import read_prompt

    got = read_prompt(args.question, sys.stdin.buffer if args.question == "-" and sys.stdin is not None else None)
    if got.warning():
        CONSOLE.warn(got.warning())
    if not got.text.strip():
        raise UsageError("the question is empty")
    if not args.folder.strip():
        raise UsageError("--folder is empty: name the folder of documents to ask")
    return got.text.strip()


def open_embedder(choice: str | None, threads: int | None = None) -> Any:
    """The Library's embedding model: the one --embed-model names (one that cannot be used is an
    error), or the catalog's when downloaded (one that cannot be used is a warning: by words alone)."""
    from ..errors import TandemError
    from ..llamacpp.text_embedder import library_embedder

    try:
        return library_embedder(choice, n_threads=threads)
    except TandemError as e:
        if choice is not None:
            raise
        CONSOLE.warn(f"{e}; passages are ranked by their words alone")
        return None


def say_index(report: Any, folder: str) -> None:
    """What an update did, on stderr (new, changed and removed files; the unreadable ones named);
    a folder with no document read is a UsageError. `tandem serve --library` says it too."""
    if not report.files:
        raise UsageError(f"{folder}: no document Tandem reads in it ({_supported()})"
                         + (f"; {len(report.unreadable)} could not be read" if report.unreadable else ""))
    if report.added or report.changed or report.removed:
        print(f"tandem: indexed {folder}: {report.added} new, {report.changed} changed, {report.removed} removed; "
              f"{report.files} files, {report.passages} passages", file=sys.stderr)
    if report.embedded or report.vectors_left_out:
        print(f"tandem: {report.embedded} passages embedded; {report.vectors} ranked by meaning too"
              + (f", {report.vectors_left_out} past the limit by their words alone" if report.vectors_left_out
                 else ""), file=sys.stderr)
    if report.unreadable:
        named = "; ".join(f"{f} ({why})" for f, why in report.unreadable[:UNREADABLE_NAMED])
        more = len(report.unreadable) - UNREADABLE_NAMED
        CONSOLE.warn(f"{len(report.unreadable)} file(s) in the folder could not be read: {named}"
                     + (f"; and {more} more" if more > 0 else ""))


def _supported() -> str:
    from ..documents import SUPPORTED

    return SUPPORTED


class IndexProgress:
    """Indexing progress on stderr, on a terminal only, rewritten in place."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()

    def __call__(self, done: int, total: int, name: str) -> None:
        if not self.tty or total < 20:
            return
        from ..measure.report import progress_line

        sys.stderr.write("\r" + progress_line(done, total, f"indexing {name}")[:150].ljust(150)
                         + ("\n" if done == total else ""))
        sys.stderr.flush()


def _answer(args: argparse.Namespace, models: tuple, question: str, hits: list, report: Any, cancel: Any) -> int:
    from ..decoding.request import GenerationRequest
    from ..library import fit_to_context
    from ..llamacpp.runtime import RuntimeParams
    from .rpc import engine_for

    target, draft = models
    if draft is None and args.draft is None:
        draft = "suffix"  # the free drafters read the sources in the prompt
    chat = not args.no_chat
    eng = engine_for(target, RuntimeParams(n_ctx=args.ctx, n_threads=args.threads), args, one_shot=True)
    try:
        ask = fit_to_context(lambda text, as_chat: len(eng.tokens_for(text, chat=as_chat)), question, hits, chat,
                             eng.n_ctx - args.max_tokens)
        if ask is None:
            raise UsageError(f"--ctx {eng.n_ctx} leaves no room for the question after --max-tokens {args.max_tokens}")
        if hits and not ask.sources:
            CONSOLE.warn(f"none of the {len(hits)} passages found fits --ctx {eng.n_ctx} beside --max-tokens "
                         f"{args.max_tokens}: answering without sources")
        elif not hits:
            CONSOLE.warn("no passage in the folder shares a word with the question")
        request = GenerationRequest.from_options(ask.text, draft_model=draft, lookahead=args.lookahead,
                                                 max_tokens=args.max_tokens, temperature=args.temperature,
                                                 seed=args.seed, chat=chat, tag="ask")
        done, runs = _stream(eng, request, cancel, colour=sys.stdout.isatty() and not args.no_colour and not args.json,
                             quiet=args.json)
    finally:
        eng.close()
    _print_result(args, done, ask.sources, runs, report)
    if cancel.cancelled:
        print("tandem: interrupted", file=sys.stderr)
        return 130
    return 0


def _stream(eng: Any, request: Any, cancel: Any, *, colour: bool, quiet: bool) -> tuple[Any, list[tuple[str, int]]]:
    """Stream the answer (unless `quiet`); the DoneEvent and the runs of accepted draft tokens."""
    from ..decoding.events import DoneEvent, TokenEvent
    from ..library import DraftRuns

    done = None
    runs = DraftRuns()
    for ev in eng.stream(request, cancel=cancel):
        if isinstance(ev, TokenEvent):
            runs.add(ev.text, ev.provenance)
            if not quiet:
                CONSOLE.answer(coloured(ev.text, ev.provenance, colour))
        elif isinstance(ev, DoneEvent):
            done = ev
    assert done is not None
    return done, runs.end()


def _print_result(args: argparse.Namespace, done: Any, sources: tuple, runs: list, report: Any) -> None:
    from ..library import drafted_from, source_entry, sources_lines
    from ..measure.report import stats_line

    by_source = drafted_from(runs, sources)
    if args.json:
        entries = [{**source_entry(i + 1, h), "drafted_tokens": by_source.get(i + 1, 0)} for i, h in enumerate(sources)]
        print(json.dumps({"text": done.text, "sources": entries, "stats": done.stats.to_dict(),
                          "library": report.to_dict()}, ensure_ascii=False))
        return
    CONSOLE.end_answer()
    print("\nSources:" if sources else "\nSources: none")
    for line in sources_lines(sources):
        print(line)
    sys.stdout.flush()  # the sources before the stats line where both go to one terminal
    print(stats_line(done.stats), file=sys.stderr)
    if by_source:
        print("drafted from the sources: " + ", ".join(f"[{n}] {k} tokens" for n, k in sorted(by_source.items()))
              + f" of {done.stats.accepted} accepted", file=sys.stderr)
