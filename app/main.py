"""Start the desktop app: `python -m app` or `tandem app`."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

ASSETS = Path(__file__).resolve().parent.parent / "assets"


def self_test(model: str | None = None) -> int:
    """Load a model, generate greedily alone and with itself as the draft, exit 0 when both
    give the same tokens and the optional parts work (the packaged bundle's check). Without `model` a tiny generated
    model is used; it is too small to reach llama.cpp's SIMD kernels, so a check of the
    bundle on another CPU passes a real quantized GGUF."""
    import tempfile

    from engine import Engine
    from engine.errors import TandemError
    from engine.llamacpp.ggml_devices import backends
    from engine.models.tinymodel import write_model

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(model) if model else write_model(Path(tmp) / "selftest.gguf", seed=1)
        n = 16 if model else 8
        try:
            eng = Engine(path, n_ctx=256, metrics_log=False)
            plain = eng.generate("The capital of France is", max_tokens=n)
            spec = eng.generate("The capital of France is", max_tokens=n, draft_model=path, lookahead=3)
            eng.close()
        except TandemError as e:
            print(f"self-test: FAILED ({path.name}: {e})")
            return 1
    # a real model may end its answer early; the tiny one never does, and agrees with itself fully
    ok = plain.tokens == spec.tokens and len(plain.tokens) > 0
    if not model:
        ok = ok and len(plain.tokens) == n and spec.stats.acceptance_rate == 1.0
    load = backends()
    kernels = load.status_text() if load and load.dynamic else "CPU kernels: this build's own"
    print(f"self-test: {'ok' if ok else 'FAILED'} ({path.name}: {len(plain.tokens)} tokens, "
          f"acceptance {spec.stats.acceptance_rate:.0%}, {kernels})")
    return 0 if ok and _parts_ok() else 1


def _parts_ok() -> bool:
    """The optional parts (documents, pictures, tools, library, server), each made to work once,
    a line each. A bundle (sys.frozen) must carry them all; from source a part not installed is
    a note, and only a broken one fails."""
    from engine.cli.parts import part_checks

    checks = part_checks(required=bool(getattr(sys, "frozen", False)))
    for c in checks:
        print(f"  {c.name}: {'ok' if c.ok else 'FAILED'} ({c.detail})")
    return all(c.ok for c in checks)


def _rpc_endpoints(value: str) -> list[str]:
    from engine.cli.rpc import rpc_endpoints

    return rpc_endpoints(value)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tandem app", description="Tandem desktop app")
    ap.add_argument("--self-test", nargs="?", const="", default=None, metavar="MODEL.gguf",
                    help="load a model (a tiny generated one, or MODEL.gguf), generate, exit 0 when it works")
    ap.add_argument("--pair", help="catalog pair to load at start (if downloaded)")
    ap.add_argument("--no-autoload", action="store_true", help="do not load the last pair at start")
    ap.add_argument("--rpc", type=_rpc_endpoints, default=None, metavar="HOST:PORT[,...]",
                    help="split the target over these `tandem worker`s (the draft stays local); also in the app: RPC button")
    args, qt_args = ap.parse_known_args(argv)
    if args.self_test is not None:
        return self_test(args.self_test or None)
    logging.basicConfig(level=logging.INFO if os.environ.get("TANDEM_DEBUG") else logging.WARNING)

    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication

    from .main_window import MainWindow

    app = QApplication.instance() or QApplication([sys.argv[0], *qt_args])
    app.setApplicationName("Tandem")
    app.setOrganizationName("Tandem")
    app.setDesktopFileName("tandem")
    icon = ASSETS / "tandem.svg"
    if icon.exists():
        app.setWindowIcon(QIcon(str(icon)))
    win = MainWindow(autoload=not args.no_autoload and not args.pair)
    if args.rpc:  # before the first load (autoload runs from the event loop)
        win.session.rpc_endpoints = tuple(args.rpc)
        win.rpc_status.refresh()
    if args.pair:
        win.load_pair(args.pair)
    win.show()
    return app.exec()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
