"""Helpers every `tandem` sub-command shares: resolving models and pairs, and the lookahead flag.

Sub-command modules import these from here, never from main.py, so nothing in engine/cli
imports back up.
"""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path
from typing import Callable

from ..errors import TandemError


class UsageError(TandemError):
    pass


def read_option_file(path: str, option: str, limit: int, too_big: Callable[[int], str]) -> bytes:
    """The bytes of a file an option names, at most `limit` of them; else one `OPTION PATH: why`
    line (a folder, too big as `too_big(size)` words it, missing, unreadable)."""
    p = Path(path)
    try:
        if p.is_dir():
            raise UsageError(f"{option} {path}: is a folder, not a file")
        size = p.stat().st_size
        if size > limit:
            raise UsageError(f"{option} {path}: {too_big(size)}")
        return p.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{option} {path}: no such file") from None
    except OSError as e:
        raise UsageError(f"{option} {path}: {e.strerror or e}") from None


# An answer's tokens on a terminal, by provenance (generate and ask).
COLOURS = {"draft": "\033[32m", "bonus": "\033[36m", "target": "\033[33m", "plain": ""}
RESET = "\033[0m"


def coloured(text: str, provenance: str, colour: bool) -> str:
    """A streamed piece of the answer in its provenance's colour (as is without colour)."""
    c = COLOURS.get(provenance, "") if colour else ""
    return f"{c}{text}{RESET}" if c else text


def install_sigint(cancel) -> Callable[[], None]:
    """First Ctrl+C cancels the generation (partial output kept); a second one quits."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum, frame):
        if cancel.cancelled:
            signal.signal(signal.SIGINT, previous)
            raise KeyboardInterrupt
        cancel.cancel()

    signal.signal(signal.SIGINT, handler)
    return lambda: signal.signal(signal.SIGINT, previous)


# -- runtime flags ----------------------------------------------------------------------------
MAX_THREADS = 512  # llama.cpp's GGML_MAX_N_THREADS: more threads overrun its fixed arrays (a crash)
MAX_CTX = 1 << 20
MIN_CTX = 16  # RuntimeParams' floor


def check_runtime_flags(args: argparse.Namespace) -> None:
    """Check the flags that say how models run and sample, the same way for every command
    that has them (generate, race, bench, serve, worker, optimize-draft), before anything
    loads: one line naming the flag instead of a crash or a failure on every request later."""
    from ..decoding.sampling.sampler import SamplingParams

    ctx = getattr(args, "ctx", None)
    if ctx is not None and not MIN_CTX <= ctx <= MAX_CTX:
        raise UsageError(f"--ctx (the context size) must be in {MIN_CTX}..{MAX_CTX} tokens, got {ctx}")
    threads = getattr(args, "threads", None)
    if threads is not None and not 1 <= threads <= MAX_THREADS:
        raise UsageError(f"--threads must be in 1..{MAX_THREADS}, got {threads}")
    max_tokens = getattr(args, "max_tokens", None)
    if max_tokens is not None and max_tokens < 1:
        raise UsageError(f"--max-tokens must be >= 1, got {max_tokens}")
    sampling = {name: getattr(args, name) for name in ("temperature", "top_k", "top_p", "min_p", "seed")
                if getattr(args, name, None) is not None}
    if sampling:
        SamplingParams(**sampling)  # SamplingParamError (a TandemError) names the flag


# -- resolving models -------------------------------------------------------------------------
def resolve_model(value: str, role: str) -> Path:
    """A path, a catalog model id or a store file name (engine/models/resolve.py)."""
    from ..errors import ModelFileError
    from ..models.resolve import model_file

    try:
        return model_file(value, role)
    except ModelFileError as e:
        raise UsageError(str(e)) from None


def resolve_pair(args: argparse.Namespace) -> tuple[Path, str | Path | None]:
    """--pair, or --target/--draft; with neither, the catalog's default pair if downloaded."""
    from ..llamacpp.ggml_devices import current_backend
    from ..models import catalog, draft_variants, store
    from ..models.compat import require_target

    draft: str | Path | None
    if getattr(args, "pair", None) or not args.target:
        cat = catalog.load()
        pair = cat.pair(args.pair) if getattr(args, "pair", None) else cat.default
        t = store.find_model(pair.target.id, cat)
        d = store.find_model(pair.draft.id, cat)
        if t is None or d is None:
            raise UsageError(f"pair {pair.id!r} is not downloaded yet: run `tandem pull {pair.id}`")
        # the faster file `tandem optimize-draft` kept, if any; "mtp" for a pair drafting with its target's head
        draft = pair.draft_spec(draft_variants.preferred(d, current_backend))
        if args.draft is not None:
            draft = draft_arg(args.draft)
        return t, draft
    target = resolve_model(args.target, "target")
    require_target(target, f" (--draft {args.target})")  # before any load: Gemma 4's assistant is a draft
    return target, draft_arg(args.draft) if args.draft is not None else None


def draft_arg(value: str) -> str | Path | None:
    """--draft: a keyword ("lookup", "mtp", "suffix", "none") or a draft model (a path or a catalog id)."""
    from ..decoding.drafting.choice import DraftChoice

    v = value.strip()
    choice = DraftChoice.parse(v) if v else None
    if choice is not None and choice.keyword is not None:
        return choice.spec  # type: ignore[return-value]
    return resolve_model(v, "draft")


def add_history_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-history-draft", action="store_true",
                   help="the suffix draft keeps past answers in memory only (default: also in a file per "
                        "target in Tandem's data folder, on this machine only)")


def lookahead_arg(value: str) -> int | str:
    from ..decoding.drafting.lookahead import MAX_LOOKAHEAD

    v = value.strip().lower()
    if v == "auto":
        return "auto"
    try:
        k = int(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"lookahead must be an integer 0..{MAX_LOOKAHEAD} or 'auto', not {value!r}")
    if not 0 <= k <= MAX_LOOKAHEAD:
        raise argparse.ArgumentTypeError(f"lookahead must be in 0..{MAX_LOOKAHEAD}, not {k}")
    return k
