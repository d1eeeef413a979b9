"""The compiled row kernels (_row_kernels.c, built by setup.py into the checkout): whether
they import, and the one command that builds them when they do not.

A checkout used without the set-up's `pip install -e .` has no compiled module; sampling
cannot run without it. The CLI says so in one line (exit 2) and `tandem doctor` lists it.
"""

from __future__ import annotations

import importlib
import shlex
import sys
from pathlib import Path

from ...errors import TandemError

MODULE = "engine.decoding.sampling._row_kernels"
_ROOT = Path(__file__).resolve().parents[3]  # the checkout (or site-packages for a wheel)


class RowKernelsMissing(TandemError, ImportError):
    """The row kernels' compiled module cannot be imported (also an ImportError, as before)."""


def build_command() -> str:
    """The command that compiles the kernels for this Python: an editable install of the
    checkout, or reinstalling the package when this is no checkout."""
    py = shlex.quote(sys.executable)
    if (_ROOT / "setup.py").is_file():
        return f"{py} -m pip install -e {shlex.quote(str(_ROOT))}"
    return f"{py} -m pip install --force-reinstall tandem-studio"


def missing_message(cause: BaseException | str) -> str:
    return (f"Tandem's row kernels (compiled C) are not built ({cause}); build them with: {build_command()} "
            "(bash packaging/bootstrap.sh does it too)")


def problem() -> str | None:
    """Why the kernels cannot be imported, or None when they can."""
    try:
        importlib.import_module(MODULE)
    except ImportError as e:
        return str(e)
    return None
