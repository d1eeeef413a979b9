"""Start the desktop app: `python -m app` or `tandem app`."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

ASSETS = Path(__file__).resolve().parent.parent / "assets"


def self_test() -> int:
    """Load a tiny generated model, generate a few tokens, exit 0 (used by the packaged bundle)."""
    import tempfile

    from engine import Engine
    from engine.models.tinymodel import write_model

    with tempfile.TemporaryDirectory() as tmp:
        path = write_model(Path(tmp) / "selftest.gguf", seed=1)
        eng = Engine(path, n_ctx=256, metrics_log=False)
        plain = eng.generate("the value of", max_tokens=8)
        spec = eng.generate("the value of", max_tokens=8, draft_model=path, lookahead=3)
        eng.close()
    ok = plain.tokens == spec.tokens and len(plain.tokens) == 8 and spec.stats.acceptance_rate == 1.0
    print(f"self-test: {'ok' if ok else 'FAILED'} ({len(plain.tokens)} tokens, acceptance {spec.stats.acceptance_rate:.0%})")
    return 0 if ok else 1


def _rpc_endpoints(value: str) -> list[str]:
    from engine.cli.rpc import rpc_endpoints

    return rpc_endpoints(value)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tandem app", description="Tandem desktop app")
    ap.add_argument("--self-test", action="store_true", help="load a tiny model, generate, exit")
    ap.add_argument("--pair", help="catalog pair to load at start (if downloaded)")
    ap.add_argument("--no-autoload", action="store_true", help="do not load the last pair at start")
    ap.add_argument("--rpc", type=_rpc_endpoints, default=None, metavar="HOST:PORT[,...]",
                    help="split the target over these `tandem worker`s (the draft stays local); also in the app: RPC button")
    args, qt_args = ap.parse_known_args(argv)
    if args.self_test:
        return self_test()
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
