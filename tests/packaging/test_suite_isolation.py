"""The README's test command survives a test that hangs: that test fails alone, the rest run.

pytest-timeout's thread method ends a hung test by ending its process; packaging/test.sh runs
the suite in an xdist worker that is then replaced. This runs the same pytest options (read
from test.sh itself) on a small suite whose middle test hangs in a thread join.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SUITE = '''
import threading

def test_before():
    assert True

def test_hangs():
    threading.Thread(target=threading.Event().wait, daemon=True).start()
    threading.Event().wait()

def test_after():
    assert True
'''


def _test_sh_options() -> list[str]:
    line = next(ln for ln in (ROOT / "packaging/test.sh").read_text().splitlines() if ln.startswith("exec python -m pytest"))
    return [a for a in shlex.split(line)[4:] if a != "$@"]


def test_a_hung_test_fails_alone_and_the_run_goes_on(tmp_path):
    opts = _test_sh_options()
    assert "-n" in opts, "test.sh no longer runs the suite in a worker process"
    (tmp_path / "test_demo.py").write_text(SUITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\ntimeout = 3\ntimeout_method = thread\n")
    r = subprocess.run([sys.executable, "-m", "pytest", *opts, "-p", "no:cacheprovider", str(tmp_path)],
                       capture_output=True, text=True, timeout=240, cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out[-3000:]
    assert re.search(r"\b1 failed, 2 passed\b|\b2 passed, 1 failed\b", out), out[-3000:]
    assert "test_hangs" in out
