"""packaging/bootstrap.sh (both README commands) installs Tandem when it must and only then.

It runs under `set -euo pipefail`, so a check that fails on a fresh machine ends the set-up
without a word: these runs use a copy of the script beside stand-ins for the venv's Python
(it logs what it is asked and "builds" the row kernels) and for the llama.cpp set-up.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/../calls.log"
if [ "$1 $2 $3" = "-m pip install" ]; then touch "$TANDEM_FAKE_ROOT/engine/decoding/sampling/_row_kernels.fake-abi.so"; fi
"""


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    root, venv = tmp_path / "checkout", tmp_path / "venv"
    (root / "packaging").mkdir(parents=True)
    (root / "engine" / "decoding" / "sampling").mkdir(parents=True)
    shutil.copy(ROOT / "packaging" / "bootstrap.sh", root / "packaging" / "bootstrap.sh")
    (root / "packaging" / "install_llama_cpp.sh").write_text("echo llama.cpp: already there\n")
    for name in ("pyproject.toml", "setup.py"):
        (root / name).write_text("")
    (root / "engine" / "decoding" / "sampling" / "_row_kernels.c").write_text("")
    (venv / "bin").mkdir(parents=True)
    py = venv / "bin" / "python"
    py.write_text(FAKE_PYTHON)
    py.chmod(0o755)
    return root, venv


def _bootstrap(root: Path, venv: Path) -> tuple[int, list[str]]:
    env = dict(os.environ, TANDEM_VENV=str(venv), TANDEM_FAKE_ROOT=str(root))
    # `;`, not `&&`: bash ignores set -e inside the left side of an && list (test.sh sources it as a plain command)
    r = subprocess.run(["bash", "-c", f'source "{root}/packaging/bootstrap.sh" gui; echo BOOTSTRAP-DONE'],
                       capture_output=True, text=True, timeout=60, env=env)
    log = venv / "calls.log"
    calls = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    assert r.returncode != 0 or "BOOTSTRAP-DONE" in r.stdout, r.stdout + r.stderr
    return r.returncode, [c for c in calls if c.startswith("-m pip install")]


def test_a_fresh_venv_installs_once_and_then_only_when_a_source_or_the_build_changes(tmp_path):
    root, venv = _tree(tmp_path)
    rc, installs = _bootstrap(root, venv)
    assert rc == 0 and len(installs) == 1, installs  # fresh: no stamp yet
    assert (venv / ".tandem-installed-gui").exists()

    rc, installs = _bootstrap(root, venv)
    assert rc == 0 and installs == []  # nothing changed

    time.sleep(0.01)
    future = time.time() + 5
    os.utime(root / "engine" / "decoding" / "sampling" / "_row_kernels.c", (future, future))
    rc, installs = _bootstrap(root, venv)
    assert rc == 0 and len(installs) == 1  # the kernels' source changed: rebuilt

    for so in (root / "engine" / "decoding" / "sampling").glob("_row_kernels.*.so"):
        so.unlink()
    later = time.time() + 10
    os.utime(venv / ".tandem-installed-gui", (later, later))
    rc, installs = _bootstrap(root, venv)
    assert rc == 0 and len(installs) == 1  # the compiled kernels are gone: rebuilt
