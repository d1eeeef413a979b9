"""`tandem serve`: the OpenAI-compatible local server on a pair, a target alone, or lookup."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ..errors import TandemError
from ..units import parse_bytes


class ServerExtraMissing(TandemError):
    pass


def _require_server_extra() -> None:
    try:
        import fastapi  # noqa: F401
        import sse_starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as e:
        raise ServerExtraMissing(f"the server needs the 'server' extra ({e.name} is missing): "
                                 "pip install 'tandem-studio[server]'") from None


def served_id(args: argparse.Namespace, target: Path) -> str:
    """The model id clients use: the pair's id, or the target file's stem."""
    from ..models import catalog

    if getattr(args, "pair", None):
        return args.pair
    if not args.target:
        return catalog.load().default.id
    return target.stem


def catalog_id_of(target: Path) -> str | None:
    """The catalog model id whose file is `target` (a name clients may use), or None."""
    from ..models import catalog, store

    try:
        for spec in catalog.load().models.values():
            found = store.locate_model(spec)
            if found is not None and found.resolve() == target.resolve():
                return spec.id
    except Exception:  # a name is a courtesy: a broken catalog or store must not stop the server
        return None
    return None


def _api_key(args: argparse.Namespace) -> str | None:
    """--api-key (or TANDEM_API_KEY), refused unless an HTTP header can carry it: clients
    (the openai SDK among them) send headers as ASCII, so a key with other characters,
    spaces or control characters could never be sent."""
    from_flag = bool(args.api_key)
    key = args.api_key or os.environ.get("TANDEM_API_KEY") or None
    if key is not None and not all("!" <= c <= "~" for c in key):
        bad = next(c for c in key if not "!" <= c <= "~")
        where = "--api-key" if from_flag else "TANDEM_API_KEY"
        raise TandemError(f"{where} holds {bad!r} (U+{ord(bad):04X}): a key must be printable ASCII without spaces, "
                          "since clients send it in an HTTP header")
    return key


def allowed_hosts(args: argparse.Namespace) -> tuple[str, ...]:
    """The Host names the server answers beyond localhost and the bound address: --allow-host,
    the listening name itself, and on a network address this machine's own names (what a
    user types to reach it from another machine; see serving/server/hosts.py)."""
    from ..serving.server import is_loopback
    from ..serving.server.doors.hosts import ANY_HOST, machine_names

    names = []
    for name in args.allow_host or ():
        if name != ANY_HOST and (not name.strip() or any(c in name for c in "/ \t@")):
            raise TandemError(f"--allow-host {name!r}: give a host name such as myserver.lan (no scheme, path "
                              "or port), or '*' for any")
        names.append(name.strip())
    try:
        import ipaddress

        ipaddress.ip_address(args.host.strip("[]"))
    except ValueError:
        names.append(args.host)  # --host myserver.lan: clients use that name
    if not is_loopback(args.host):
        names += machine_names()
    return tuple(dict.fromkeys(names))


def aliases_and_any(args: argparse.Namespace) -> tuple[tuple[str, ...], bool]:
    """(the --alias names, whether every model name is answered): `--alias '*'` is
    --any-model-name, for tools that send a name of their own choosing."""
    names: list[str] = []
    for name in args.alias or ():
        if not name.strip():
            raise TandemError("--alias: give a model name clients send (or '*' for any name), got an empty one")
        names.append(name.strip())
    return tuple(dict.fromkeys(n for n in names if n != "*")), "*" in names or args.any_model_name


def _checked_options(args: argparse.Namespace) -> tuple[str | None, tuple[str, ...], int]:
    """Every option checked before anything loads (one line each): (API key, CORS origins, max body)."""
    from .common import check_runtime_flags
    from ..serving.server.config import check_cors, check_parallel

    check_runtime_flags(args)
    api_key = _api_key(args)
    if args.queue < 0:
        raise TandemError(f"--queue must be >= 0, got {args.queue}")
    if args.parallel != "auto":
        check_parallel(args.parallel)
    cors = tuple(args.cors_origin or ())
    refused = check_cors(cors, api_key=api_key, allow_any_origin=args.allow_any_origin_without_key)
    if refused:
        raise TandemError(refused)
    if not 1 <= args.port <= 65535:
        raise TandemError(f"--port must be 1..65535, got {args.port}")
    try:
        max_body = parse_bytes(args.max_body)
    except ValueError as e:
        raise TandemError(f"--max-body: {e}") from None
    if max_body < 1:
        raise TandemError(f"--max-body must be at least 1 byte (it bounds every request body), got {args.max_body!r}")
    return api_key, cors, max_body


def cmd_serve(args: argparse.Namespace) -> int:
    from .common import resolve_pair

    api_key, cors, max_body = _checked_options(args)
    aliases, any_name = aliases_and_any(args)
    _require_server_extra()
    from ..serving.server import is_loopback
    from ..serving.server.runner import bind

    hosts = allowed_hosts(args)
    if not is_loopback(args.host) and not api_key:
        print(f"tandem: warning: listening on {args.host} without --api-key: anyone who can reach this machine "
              "can use the server", file=sys.stderr)
    bind(args.host, args.port).close()  # a busy port fails now, before minutes of model loading
    target, draft = resolve_pair(args)
    if args.mmproj or not getattr(args, "rpc", None):  # pictures: the projector given, or one beside the target
        from .images import projector_for

        args.projector = projector_for(target, args, needed=False)
    library = _open_library(args.library, args.embed_model) if args.library is not None else None
    try:
        return _serve(args, target, draft, library, api_key, cors, max_body, aliases, any_name, hosts)
    finally:
        if library is not None:
            library.close()
            if library.embedder is not None:
                library.embedder.close()


def _open_library(folder: str, embed_model: str | None = None) -> Any:
    """--library DIR: the folder's index brought up to date (progress on a terminal, unreadable
    files named) and watched while the server runs (without watchdog: updated at each question);
    ranked by meaning too with --embed-model, or the catalog's embedding model when downloaded."""
    from ..library import Library
    from .ask import IndexProgress, open_embedder, say_index

    if not folder.strip():
        raise TandemError("--library is empty: name the folder of documents to serve")
    try:
        lib = Library(folder, watch=True)
    except TandemError as e:
        if "watchdog" not in str(e):
            raise
        print(f"tandem: warning: {e}; the folder is checked for changes at each question instead", file=sys.stderr)
        lib = Library(folder)
    try:
        lib.embedder = open_embedder(embed_model)
        say_index(lib.update(progress=IndexProgress()), folder)
    except BaseException:
        lib.close()
        if lib.embedder is not None:
            lib.embedder.close()
        raise
    return lib


def _serve(args: argparse.Namespace, target: Path, draft: Any, library: Any, api_key: str | None, cors: tuple,
           max_body: int, aliases: tuple, any_name: bool, hosts: tuple) -> int:
    from ..decoding.drafting.choice import DraftChoice
    from .rpc import engine_for
    from ..llamacpp.runtime import RuntimeParams
    from ..serving.server import ServedModel, ServerConfig, create_app, serve_forever
    from ..serving.server.runner import url_for

    eng = engine_for(target, RuntimeParams(n_ctx=args.ctx, n_threads=args.threads), args)  # --rpc: a child process
    try:
        parallel, why = _parallel(args)
        if draft is not None:
            eng.decoder(draft)  # load and check the draft before the first request
        eng.decoder(None)
        served = ServedModel(eng, served_id(args, target), draft=draft, lookahead=args.lookahead,
                             aliases=aliases, catalog_id=catalog_id_of(target))
        config = ServerConfig(api_key=api_key, max_waiting=args.queue, temperature=args.temperature,
                              any_model_name=any_name, cors_origins=cors, max_body=max_body,
                              early_role_chunk=args.early_role_chunk, allowed_hosts=hosts, parallel=parallel,
                              library=library, fetch_image_urls=args.fetch_image_urls)
        app = create_app(served, config)
        split = f", target split over {len(eng.endpoints)} RPC worker(s)" if getattr(args, "rpc", None) else ""
        draft_text = DraftChoice.parse(draft).label
        slots_text = f", {parallel} slots" if parallel > 1 else ""
        slots_text += f" ({why})" if why else ""
        slots_text += f", sees images ({args.projector.name})" if getattr(args, "projector", None) else ""
        slots_text += ", fetches image URLs" if args.fetch_image_urls else ""
        print(f"tandem: serving {served.id} ({target.name}, {draft_text}, lookahead {args.lookahead}, "
              f"context {args.ctx}{split}{slots_text}) on {url_for(args.host, args.port)}/v1", file=sys.stderr)
        if library is not None:
            print(f"tandem: answering from {library.folder} when a chat request sets \"library\": true "
                  f"({'watched' if library.watch is not None else 'checked at each question'}; "
                  f"{url_for(args.host, args.port)}/v1/library says what it holds)", file=sys.stderr)
        if any_name:
            print(f"tandem: answering to every model name (--alias '*' or --any-model-name) with {served.id}",
                  file=sys.stderr)
        stopped_by = serve_forever(app, args.host, args.port, log_level=args.log_level)
        print(f"tandem: server stopped{f' ({stopped_by})' if stopped_by else ''}", file=sys.stderr)
    finally:
        eng.close()
    return 0


def _parallel(args: argparse.Namespace) -> tuple[int, str]:
    """The slots to run and, where `--parallel auto` chose them, why: the machine's default
    (`hardware.default_parallel`, as the app's server switch offers), one request at a time for
    a target split over RPC workers (the slots need it on this machine)."""
    if args.parallel != "auto":
        return args.parallel, ""
    if getattr(args, "rpc", None):
        return 1, "--parallel auto: one request at a time, the target is split over RPC workers"
    from ..models.hardware import default_parallel, machine

    hw = machine()
    n = default_parallel(hw)
    return n, f"--parallel auto: {hw.cores_physical} cores, {hw.ram_available / 2**30:.0f} GB free"


def _parallel_arg(text: str) -> int | str:
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"give a whole number of slots or 'auto', got {text!r}") from None


def register(sub: Any) -> None:
    from .common import add_history_option, lookahead_arg
    from .rpc import add_rpc_option

    s = sub.add_parser("serve", help="an OpenAI-compatible local server (chat, completions, models, metrics)",
                       description="Serve the OpenAI HTTP API on a pair (or a target with a draft, prompt lookup or "
                                   "none). Requests may set 'lookahead' (0..16 or 'auto') and 'draft' "
                                   "('model', 'lookup', 'suffix', 'none'); every answer reports usage and timings.")
    s.add_argument("--pair", help="a catalog pair id (default: the catalog's default pair)")
    s.add_argument("--target", help="target GGUF path or catalog model id (instead of --pair)")
    s.add_argument("--draft", help="draft GGUF path or model id, 'lookup', 'mtp' (a target with MTP layers), 'suffix' or 'none'")
    add_history_option(s)
    from .images import add_image_options

    add_image_options(s, images=False)
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=int, default=8080)
    s.add_argument("--lookahead", type=lookahead_arg, default="auto",
                   help="default tokens drafted per step, 0..16 or 'auto' (default auto); requests may override")
    s.add_argument("--api-key", help="require 'Authorization: Bearer KEY' (also from TANDEM_API_KEY)")
    s.add_argument("--ctx", type=int, default=4096, help="context size in tokens")
    s.add_argument("--threads", type=int, default=None)
    s.add_argument("--queue", type=int, default=16, help="requests that may wait for a free slot (default 16); "
                                                          "more get 503 with Retry-After")
    s.add_argument("--parallel", type=_parallel_arg, default="auto", metavar="N|auto",
                   help="answer up to N requests side by side in slots of one context, each slot holding the whole "
                        "--ctx (default auto: 2, or 4 with 8+ cores and 16 GB free, 1 under 2 GB free or with --rpc)")
    s.add_argument("--max-body", default="4M", help="largest request body accepted, in bytes or with K/M/G (default 4M, "
                                                     "at least 1); larger ones get 413 before they are read")
    s.add_argument("--temperature", type=float, default=1.0, help="for requests that do not say (default 1.0, as OpenAI)")
    s.add_argument("--alias", action="append", metavar="NAME",
                   help="another model name the server answers to and lists in /v1/models (repeatable); "
                        "'*': every name (as --any-model-name)")
    s.add_argument("--any-model-name", action="store_true",
                   help="answer to every model name (for tools with a hard-coded one); off: an unknown name is a 404")
    s.add_argument("--cors-origin", action="append", metavar="ORIGIN",
                   help="a browser origin allowed to call the API, e.g. http://localhost:3000 (repeatable; '*' "
                        "only with --api-key or --allow-any-origin-without-key); default: none")
    s.add_argument("--allow-any-origin-without-key", action="store_true",
                   help="accept --cors-origin '*' without --api-key: any web page may then read the answers")
    s.add_argument("--allow-host", action="append", metavar="NAME",
                   help="another Host name to answer (repeatable; '*': any). By default only localhost, loopback "
                        "addresses and the bound address are answered (and, on a network address, this machine's "
                        "own names): a web page on another name cannot reach the server by DNS rebinding")
    s.add_argument("--early-role-chunk", action="store_true",
                   help="stream the first (role) chunk before the prompt is processed, as before; default: after")
    s.add_argument("--library", metavar="DIR",
                   help="a folder of documents that chat requests setting \"library\": true are answered from, with "
                        "their sources (indexed in Tandem's data folder and watched while the server runs)")
    s.add_argument("--embed-model", metavar="PATH|ID|none",
                   help="with --library: an embedding GGUF that ranks passages by meaning beside their words "
                        "(default: the catalog's embedding model when it is downloaded; 'none': by words alone)")
    s.add_argument("--fetch-image-urls", action="store_true",
                   help="fetch pictures that requests name by http(s) URL (default: refused; only data: URIs). "
                        "Anyone who may call the server can then make this machine fetch a URL")
    s.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    add_rpc_option(s)
    s.set_defaults(func=cmd_serve)
