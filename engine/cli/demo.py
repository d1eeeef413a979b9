"""`tandem demo`: the race a newcomer should see first on this machine (engine/measure/demo.py),
with the default pair: the terminal's answer to "what does speculation do here?"."""

from __future__ import annotations

import argparse
import sys


def has_gpu() -> bool:
    """llama.cpp registered a GPU here (what the engine will run the target on)."""
    from ..llamacpp import ggml_devices

    return bool(ggml_devices.probe().gpus)


def cmd_demo(args: argparse.Namespace) -> int:
    from ..measure.demo import first_demo

    gpu = has_gpu()
    demo = first_demo(gpu)
    race = [demo.prompt, "--chat", "--lookahead", "auto", "--max-tokens", str(args.max_tokens)]
    race += ["--pair", args.pair] if args.pair else []
    race += ["--target", args.target] if args.target else []
    race += ["--draft", "lookup"] if demo.draft == "lookup" else (["--draft", args.draft] if args.draft else [])
    race += ["--json"] if args.json else []
    if not args.json:
        how = "prompt lookup (no second model)" if demo.draft == "lookup" else "the pair's draft model"
        print(f"demo: {'GPU' if gpu else 'CPU'} machine, {how}: {demo.why}", file=sys.stderr)
    race_args = args.race_parser.parse_args(race)  # `tandem race` as if typed, its checks included
    return race_args.func(race_args)


def register(sub: argparse._SubParsersAction, race_parser: argparse.ArgumentParser) -> None:
    d = sub.add_parser("demo", help="the race to see first on this machine: an edit with prompt lookup on a CPU, "
                                    "new code with the draft model on a GPU")
    d.add_argument("--pair", default=None, help="a catalog pair id (default: the catalog's default pair)")
    d.add_argument("--target", default=None, help="a target GGUF instead of a pair")
    d.add_argument("--draft", default=None, help="with --target: its draft model (used on a GPU)")
    d.add_argument("--max-tokens", type=int, default=200)
    d.add_argument("--json", action="store_true", help="print the race as one JSON object")
    d.set_defaults(func=cmd_demo, race_parser=race_parser)
