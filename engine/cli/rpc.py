"""`tandem worker` (serve this host's devices to another Tandem over llama.cpp RPC) and the
`--rpc HOST:PORT[,...]` option the generating commands share."""

from __future__ import annotations

import argparse
import signal
import sys

from ..llamacpp import rpc_backend as rpc
from .common import UsageError


def rpc_endpoints(value: str) -> list[str]:
    """argparse type for --rpc: a clear usage error for a malformed list."""
    try:
        return rpc.parse_endpoints(value)
    except rpc.RpcError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def split_weights(value: str) -> list[float]:
    try:
        return [float(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--rpc-split expects numbers like 1,2,2, not {value!r}") from None


def _seconds(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        x = -1.0
    if not 0 < x < 86400:
        raise argparse.ArgumentTypeError(f"--rpc-timeout expects seconds > 0, like 30, not {value!r}")
    return x


def engine_for(target, runtime, args: argparse.Namespace, *, one_shot: bool = False):
    """The engine a generating command uses: in this process without --rpc; with --rpc,
    in a child process (engine/serving/remote_engine.py), so a worker that dies or hangs mid-answer
    is one `tandem: error:` line naming it, after at most --rpc-timeout seconds. `args.projector`
    (set by the image flags): the target's vision projector, loaded with it. `one_shot` (a command
    that answers once and exits): a draft model loads only if Auto drafts with it."""
    eps = getattr(args, "rpc", None)
    mmproj = getattr(args, "projector", None)
    if not eps:
        from ..decoding.engine import Engine

        return Engine(target, runtime=runtime, history_draft=not getattr(args, "no_history_draft", False), mmproj=mmproj,
                      draft_when_needed=one_shot)
    if mmproj is not None:
        raise UsageError("images are not read with --rpc yet: run the target in this process to send images")
    from ..serving.remote_engine import DEFAULT_HANG_TIMEOUT_S, RemoteEngine

    return RemoteEngine(target, rpc=eps, weights=getattr(args, "rpc_split", None), runtime=runtime,
                        hang_timeout=getattr(args, "rpc_timeout", None) or DEFAULT_HANG_TIMEOUT_S,
                        history_draft=not getattr(args, "no_history_draft", False))


def add_rpc_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rpc", type=rpc_endpoints, default=None, metavar="HOST:PORT[,...]",
                   help="split the target over these `tandem worker`s (the draft stays local)")
    p.add_argument("--rpc-split", type=split_weights, default=None, metavar="W,W,...",
                   help="layer share per device instead of free memory: local first, then each worker")
    p.add_argument("--rpc-timeout", type=_seconds, default=None, metavar="SECONDS",
                   help="a worker that sends nothing back for this long counts as lost (default 30)")


def cmd_worker(args: argparse.Namespace) -> int:
    from ..llamacpp.ggml_devices import supports_rpc
    from .common import check_runtime_flags

    check_runtime_flags(args)
    if not supports_rpc():
        raise rpc.RpcError("this llama.cpp build has no RPC backend: rebuild it with packaging/install_llama_cpp.sh "
                           "(it adds -DGGML_RPC=ON)")
    endpoint = rpc.parse_endpoint(f"{args.host}:{args.port}")
    rpc.check_port_free(args.host, args.port)
    devices = rpc.pick_devices(args.device)
    if not rpc.is_loopback(args.host):
        print(rpc.SECURITY_WARNING.format(endpoint=endpoint), file=sys.stderr)
    print(f"tandem worker: RPC protocol {'.'.join(map(str, rpc.PROTO))}, endpoint {endpoint}")
    for _h, name, desc, kind, free, total in devices:
        print(f"  device {name} ({kind}, {desc}): {free / rpc.GB:.1f} of {total / rpc.GB:.1f} GB free")
    if args.cache:
        print(f"  tensor cache: {args.cache}")
    sys.stdout.flush()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    def ready() -> None:
        print(f"listening on {endpoint} (Ctrl+C stops)", flush=True)

    try:
        rpc.serve_forever(endpoint, [d[0] for d in devices], cache_dir=args.cache, n_threads=args.threads, ready=ready)
    except KeyboardInterrupt:
        print("\ntandem worker: stopped", file=sys.stderr)
        return 0
    return 0


def register(sub) -> None:
    w = sub.add_parser("worker", help="serve this host's devices to another Tandem over llama.cpp RPC")
    w.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; others are unauthenticated!)")
    w.add_argument("--port", type=int, default=rpc.DEFAULT_PORT, help=f"TCP port (default {rpc.DEFAULT_PORT})")
    w.add_argument("--device", action="append", help="device to serve, e.g. CUDA0 or CPU (repeatable; default: every GPU, else the CPU)")
    w.add_argument("--cache", help="folder where the worker caches large tensors between loads")
    w.add_argument("--threads", type=int, default=None, help="CPU threads for the served devices")
    w.set_defaults(func=cmd_worker)
