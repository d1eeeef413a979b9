"""The `tandem` command: generate, race, ask, models, pull, check, import, bench, stats, doctor, app.

Every user error prints one line `tandem: error: ...` and exits with code 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Sequence

from ..errors import TandemError
from .console import CONSOLE, WarningLines
from .common import (COLOURS, RESET, coloured, UsageError, add_history_option, check_runtime_flags, install_sigint as _install_sigint,
                     lookahead_arg, resolve_pair)



# -- generate ---------------------------------------------------------------------------------
def _runtime(args: argparse.Namespace):
    from ..llamacpp.runtime import RuntimeParams

    return RuntimeParams(n_ctx=args.ctx, n_threads=args.threads)


def _engine(target: Path, args: argparse.Namespace):
    from .rpc import engine_for  # with --rpc: a child process, so a lost worker is an error line

    return engine_for(target, _runtime(args), args, one_shot=True)


def _request(args: argparse.Namespace, prompt: str, draft: object):
    """The one GenerationRequest a generate/race command line describes."""
    from ..decoding.request import GenerationRequest

    return GenerationRequest.from_options(
        prompt,
        draft_model=draft,
        lookahead=args.lookahead,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        min_p=args.min_p,
        seed=args.seed,
        chat=args.chat,
        system=args.system,
        stop=args.stop or (),
        tag=getattr(args, "tag", None),
        grammar=getattr(args, "grammar", None),  # compiled by _validated_inputs
        images=getattr(args, "images", ()),  # read and checked by _validated_inputs
    )


def cmd_generate(args: argparse.Namespace) -> int:
    from ..decoding.events import DoneEvent, TokenEvent
    from ..decoding.cancel import CancelToken

    prompt = _validated_inputs(args)  # before loading anything: a bad prompt costs no model load
    target, draft = resolve_pair(args)
    _projector(target, args)
    if args.mcp:  # the tool loop: servers first (a bad one costs no model load), then the model
        from .tooluse import generate_with_tools

        return generate_with_tools(args, _request(args, prompt, draft), lambda: _engine(target, args),
                                   _install_sigint, _stats_line)
    eng = _engine(target, args)
    request = _request(args, prompt, draft)
    colour = sys.stdout.isatty() and not args.no_colour and not args.json
    cancel = CancelToken()
    restore = _install_sigint(cancel)
    done = None
    try:
        for ev in eng.stream(request, cancel=cancel):
            if isinstance(ev, TokenEvent) and not args.json:
                CONSOLE.answer(coloured(ev.text, ev.provenance, colour))
            elif isinstance(ev, DoneEvent):
                done = ev
    finally:
        restore()
    assert done is not None
    if args.json:
        print(json.dumps({"text": done.text, "tokens": done.tokens, "stats": done.stats.to_dict()}, ensure_ascii=False))
    else:
        CONSOLE.end_answer()  # then the warnings that came while its last line was open
        print(_stats_line(done.stats), file=sys.stderr)
        if colour and done.stats.drafted:
            print(f"colours: {COLOURS['draft']}accepted draft{RESET} {COLOURS['target']}target correction{RESET} "
                  f"{COLOURS['bonus']}bonus{RESET}", file=sys.stderr)
    eng.close()
    if cancel.cancelled:  # Ctrl+C: the partial result is out; tell the shell it was interrupted
        print("tandem: interrupted", file=sys.stderr)
        return 130
    return 0


def _projector(target: Path, args: argparse.Namespace) -> None:
    """With --image: the projector that reads the pictures, given or beside the target."""
    if args.images:
        from .images import projector_for

        args.projector = projector_for(target, args, needed=True)


def _prompt_arg(value: str) -> str:
    """The prompt text; undecodable bytes become U+FFFD with one warning line on stderr."""
    from ..decoding.prompting.prompt_text import read_prompt

    stdin = sys.stdin.buffer if value == "-" and sys.stdin is not None else None
    got = read_prompt(value, stdin)
    if got.warning():
        _warn(got.warning())
    return got.text


def _warn(line: str) -> None:
    CONSOLE.warn(line)


def _validated_inputs(args: argparse.Namespace) -> str:
    """Read the prompt and check every generation option, before any model is loaded.

    Text options are made encodable (lone surrogates from the shell -> U+FFFD); numbers
    get one line naming the option. Returns the prompt text."""
    from ..decoding.prompting.prompt_text import clean

    prompt = _prompt_arg(args.prompt)
    if not prompt.strip():
        raise UsageError("the prompt is empty")
    if getattr(args, "attach", None):
        prompt = _with_attachments(prompt, args.attach)
    for name in ("system", "tag"):
        value = getattr(args, name, None)
        if value is not None:
            text, n = clean(value)
            if n:
                _warn(f"--{name}: {n} undecodable byte sequence(s) replaced with U+FFFD")
            setattr(args, name, text)
    if args.stop:
        args.stop = [clean(s)[0] for s in args.stop]
    check_runtime_flags(args)
    from .constraint import constraint_grammar

    args.grammar = constraint_grammar(args)
    from .images import read_images

    args.images = read_images(args)
    if hasattr(args, "mcp"):  # generate's tool flags (race has none)
        from .tooluse import check_tool_flags

        check_tool_flags(args)
    return prompt


def _with_attachments(prompt: str, paths: list[str]) -> str:
    """The prompt with each --attach file's text after it, in the app's block format; files
    without text (a scanned PDF, an image) are refused together in one line."""
    from ..documents import attachment_block, read_documents
    from ..documents.blocks import with_attachments

    docs = read_documents(list(paths))
    return with_attachments(prompt, [attachment_block(d.name, d.text) for d in docs])


def _stats_line(s) -> str:
    from ..measure.report import stats_line

    return stats_line(s)


# -- race -------------------------------------------------------------------------------------
def cmd_race(args: argparse.Namespace) -> int:
    from ..decoding.drafting.choice import DraftChoice
    from ..measure.racing import race

    prompt = _validated_inputs(args)
    target, draft = resolve_pair(args)
    if draft is None:
        raise UsageError("race needs a draft: --draft PATH, --draft lookup, --draft suffix or --draft mtp")
    choice = DraftChoice.parse(draft)
    _projector(target, args)
    eng = _engine(target, args)
    request = _request(args, prompt, draft)

    def announce(side: str, ev: object) -> None:
        from ..decoding.events import PrefillEvent

        if not args.json and isinstance(ev, PrefillEvent) and ev.done == 0:
            what = f"{target.name}" if side == "target" else \
                f"{target.name} + {draft if choice.keyword is not None else Path(str(draft)).name}"
            print(f"{'target alone' if side == 'target' else 'speculative'}: {what} ...", file=sys.stderr)

    r = race(eng, request, on_event=announce)
    assert r is not None
    b, s = r.target.stats, r.speculative.stats
    if args.json:
        print(json.dumps(r.to_dict(), ensure_ascii=False))
    else:
        width = max(40, shutil.get_terminal_size((120, 40)).columns)
        _side_by_side("TARGET ALONE", r.target.text, "TARGET + " + (choice.keyword or "draft").upper(),
                      r.speculative.text, width)
        print()
        print(f"target alone : {_stats_line(b)}")
        print(f"speculative  : {_stats_line(s)}")
        if s.accepted_by:
            print("drafted by   : " + ", ".join(f"{src} {n}" for src, n in sorted(s.accepted_by.items(), key=lambda kv: -kv[1]))
                  + " accepted tokens")
        print(f"result       : {r.headline}")
        print(f"               {r.detail} (same prompt and settings, one run each)")
        if r.identical:
            print("outputs      : identical")
        elif r.divergence is not None:
            print(f"outputs      : differ — {r.divergence.describe(eng.target)}")
        else:
            print("outputs      : differ (sampling: equal in distribution, not token by token)")
    eng.close()
    return 0


def _side_by_side(ha: str, a: str, hb: str, b: str, width: int) -> None:
    col = (width - 3) // 2

    def lines(t: str) -> list[str]:
        out: list[str] = []
        for para in t.split("\n"):
            out += textwrap.wrap(para, col, replace_whitespace=False, drop_whitespace=False) or [""]
        return out

    la, lb = lines(a), lines(b)
    print(f"{ha:<{col}} | {hb}")
    print(f"{'-' * col}-+-{'-' * col}")
    for i in range(max(len(la), len(lb))):
        x = la[i] if i < len(la) else ""
        y = lb[i] if i < len(lb) else ""
        print(f"{x:<{col}} | {y}")


# -- bench and stats --------------------------------------------------------------------------
def cmd_bench(args: argparse.Namespace) -> int:
    from ..measure import bench, bench_report
    from ..measure import suites as bench_suites

    if args.list:
        print("\n".join(bench_suites.listing()))
        return 0
    sweep = _sweep(args.sweep) if args.sweep else [1, 2, 4, 8]
    for name in ("repeat", "limit"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name} must be >= 1, got {value}")
    check_runtime_flags(args)
    target, draft = resolve_pair(args)
    suites = [bench_suites.load_suite(s) for s in (args.suite or bench_suites.builtin_suites(args.set))]
    modes = [m.strip() for m in args.modes.split(",")] if args.modes else list(bench.MODES)
    configs = bench.plan_configs(draft, modes, sweep)
    from .rpc import engine_for

    eng = engine_for(target, _runtime(args), args)
    tty = sys.stderr.isatty()

    def progress(done: int, total: int, label: str) -> None:
        from ..measure.report import progress_line

        line = progress_line(done, total, label)
        if tty:
            sys.stderr.write("\r" + line[:150].ljust(150))
            if done == total:
                sys.stderr.write("\n")
        elif done == total or done % 10 == 0:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    res = bench.run_bench(eng, suites, configs, repeat=args.repeat, max_tokens=args.max_tokens,
                          temperature=args.temperature, warmup=not args.no_warmup, limit=args.limit, progress=progress)
    for x in res.meta.get("skipped", ()):
        print(f"tandem: skipped {x['suite']}/{x['prompt']}: {x['reason']}", file=sys.stderr)
    print(bench_report.summary_markdown(res))
    if args.out:
        files = bench_report.write_reports(res, args.out)
        print(f"wrote {', '.join(str(f) for f in files)}", file=sys.stderr)
    eng.close()
    bugs = sum(r.bugs for r in res.rows)
    if bugs:
        print(f"tandem: {bugs} speculative output(s) parted from target alone at a margin larger than numeric noise",
              file=sys.stderr)
        return 1
    return 0


def _sweep(value: str) -> list[int]:
    try:
        ks = [int(x) for x in value.split(",") if x.strip()]
    except ValueError:
        ks = []
    if not ks or not all(1 <= k <= 16 for k in ks):
        raise UsageError(f"--lookahead for bench is a comma list of integers 1..16, got {value!r}")
    return ks


def cmd_stats(args: argparse.Namespace) -> int:
    from ..decoding import metrics

    log = metrics.read_log(args.log)
    print(metrics.format_table(metrics.summarize(log.records)))
    if log.skipped:
        _warn(f"skipped {log.skipped} unreadable line(s) in the metrics log (torn, not UTF-8 or not JSON)")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from . import doctor
    from .parts import part_checks

    checks = doctor.run_checks() + part_checks()
    print(doctor.report(checks))
    return 0 if all(c.ok for c in checks) else 1


# -- parser -----------------------------------------------------------------------------------
def _add_gen_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("prompt", help="the prompt; '-' reads stdin, '@FILE' reads a file")
    p.add_argument("--target", help="target GGUF path or catalog model id")
    p.add_argument("--draft", help="draft GGUF path or model id, 'lookup', 'mtp' (a target with MTP layers), 'suffix' or 'none'")
    p.add_argument("--pair", help="a catalog pair id (instead of --target/--draft)")
    add_history_option(p)
    p.add_argument("--lookahead", type=lookahead_arg, default=5, help="tokens drafted per step, 0..16 or 'auto' (default 5)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--min-p", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--stop", action="append", help="stop string (repeatable); not included in the output")
    p.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    p.add_argument("--system", help="system prompt (with --chat)")
    p.add_argument("--attach", action="append", metavar="FILE",
                   help="a document after the prompt, as the app attaches it (repeatable): PDF, DOCX, XLSX, ODS, "
                        "PPTX, HTML, EPUB, RTF or text; use --chat with an instruct model")
    from .constraint import add_constraint_options

    add_constraint_options(p)
    p.add_argument("--ctx", type=int, default=4096, help="context size in tokens")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of streaming")
    p.add_argument("--tag", default=None, help="task label for the metrics log (code, chat, ...)")
    from .rpc import add_rpc_option

    add_rpc_option(p)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tandem", description="Local speculative decoding with llama.cpp.")
    sub = parser.add_subparsers(dest="command", required=True)

    g = sub.add_parser("generate", help="generate text, streaming, with an optional draft")
    _add_gen_options(g)
    g.add_argument("--no-colour", "--no-color", action="store_true")
    from . import tooluse as cli_tooluse  # --mcp: the tool loop; `tandem tools`

    cli_tooluse.add_tool_options(g)
    from .images import add_image_options

    add_image_options(g)
    g.set_defaults(func=cmd_generate)

    r = sub.add_parser("race", help="target alone vs speculative, same prompt and settings")
    _add_gen_options(r)
    add_image_options(r)
    r.set_defaults(func=cmd_race)

    b = sub.add_parser("bench", help="benchmark suites across modes; medians and measured speedups")
    b.add_argument("--target", help="target GGUF path or model id")
    b.add_argument("--draft", help="draft GGUF path or model id, 'lookup' or 'mtp'")
    b.add_argument("--pair", help="a catalog pair id")
    b.add_argument("--suite", action="append", help="built-in suite name (chat, heldout/chat, long_documents, ...) or a file "
                                                    "(repeatable); --list shows them")
    b.add_argument("--set", choices=("tuning", "heldout", "all", "long"), default="all",
                   help="without --suite: the tuning suites, the held-out ones (never tuned on), both (default), or the "
                        "long-prompt suites (long_*, tuning and held-out: ~1,500-2,500-token documents, repositories and "
                        "agent histories; slow on a CPU, so not in the default set)")
    b.add_argument("--list", action="store_true", help="list the built-in suites and exit")
    b.add_argument("--modes", help="comma list of target,fixed,auto,lookup (default: all)")
    b.add_argument("--lookahead", dest="sweep", help="k sweep for fixed mode, e.g. 1,2,4,8")
    b.add_argument("--repeat", type=int, default=3)
    b.add_argument("--max-tokens", type=int, default=128)
    b.add_argument("--limit", type=int, help="at most this many prompts per suite")
    b.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default); >0 samples with fixed seeds")
    b.add_argument("--ctx", type=int, default=4096)
    b.add_argument("--threads", type=int)
    b.add_argument("--no-warmup", action="store_true")
    b.add_argument("--out", help="folder for runs.jsonl, results.csv, summary.md and plots")
    from .rpc import add_rpc_option

    add_rpc_option(b)
    b.set_defaults(func=cmd_bench)

    st = sub.add_parser("stats", help="sum up the metrics log by pair and task")
    st.add_argument("--log", help="metrics log path (default: the user data folder)")
    st.set_defaults(func=cmd_stats)

    dr = sub.add_parser("doctor", help="versions, backend and devices, model store, default pair: what to fix")
    dr.set_defaults(func=cmd_doctor)

    sub.add_parser("app", help="start the desktop app (tandem app --help for its options)")

    from . import models as cli_models

    cli_models.register(sub)
    from . import serve as cli_serve

    cli_serve.register(sub)
    from . import rpc as cli_rpc  # llama.cpp RPC: `tandem worker`

    cli_rpc.register(sub)

    from . import ask as cli_ask  # a folder of documents asked, answered with sources

    cli_ask.register(sub)
    from . import optimize as cli_optimize

    cli_optimize.register(sub)
    cli_tooluse.register(sub)
    from . import demo as cli_demo

    cli_demo.register(sub, r)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["app"]:  # everything after `app` belongs to the app's own parser
        return _run_gui(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    previous_showwarning, warnings.showwarning = warnings.showwarning, _show_warning
    CONSOLE.reset()
    lines = WarningLines(CONSOLE)  # the engine's logged warnings, as `tandem: warning:` lines
    logging.getLogger().addHandler(lines)
    try:
        return int(args.func(args) or 0)
    except TandemError as e:
        CONSOLE.close()
        print(f"tandem: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ntandem: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `tandem ... | head`
        return 0
    finally:
        CONSOLE.close()
        logging.getLogger().removeHandler(lines)
        warnings.showwarning = previous_showwarning


def _run_gui(argv: list[str]) -> int:
    """Start the desktop app through the `tandem.gui` entry point that app/ registers (the
    engine never imports app; a wheel installed without the GUI says so in one line)."""
    from importlib.metadata import entry_points

    found = list(entry_points(group="tandem.gui"))
    if not found:
        print("tandem: error: the desktop app is not installed: pip install 'tandem-studio[gui]'", file=sys.stderr)
        return 2
    return int(found[0].load()(argv) or 0)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings (a broken chat template, ...) as one `tandem: warning:` line, no source dump."""
    _warn(str(message))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
