"""Without the compiled row kernels (a checkout used without `pip install -e .`) the CLI says
so in one line with the command that builds them (exit 2), and `tandem doctor` lists it as a
problem. The missing module is simulated (a sys.modules block), the real file stays."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from engine.cli import doctor
from engine.cli.main import main as cli

ROOT = Path(__file__).resolve().parents[4]
BLOCK = "import sys; sys.modules['engine.decoding.sampling._row_kernels'] = None; "


def test_generate_without_the_kernels_is_one_line_naming_the_build_command(tiny_target, tmp_path):
    code = BLOCK + ("from engine.cli.main import main; "
                    f"sys.exit(main(['generate', 'hello', '--target', {str(tiny_target)!r}, '--max-tokens', '2']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env={**__import__("os").environ, "TANDEM_HOME": str(tmp_path)})
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2, r.stderr
    assert len(err) == 1 and "Traceback" not in r.stderr, r.stderr
    assert err[0].startswith("tandem: error: Tandem's row kernels (compiled C) are not built"), err
    assert f"{sys.executable} -m pip install -e {ROOT}" in err[0], err


def test_the_error_is_still_an_import_error_for_code_that_catches_one():
    from engine.decoding.sampling.kernels import RowKernelsMissing
    from engine.errors import TandemError

    assert issubclass(RowKernelsMissing, ImportError) and issubclass(RowKernelsMissing, TandemError)


def test_doctor_reports_missing_kernels_as_a_problem(monkeypatch, capsys):
    from engine.decoding.sampling.kernels import build_command

    assert {c.name: c for c in doctor.run_checks()}["row kernels"].ok  # built here
    monkeypatch.setitem(sys.modules, "engine.decoding.sampling._row_kernels", None)
    checks = {c.name: c for c in doctor.run_checks()}
    k = checks["row kernels"]
    assert not k.ok and k.detail.startswith("not built: generation cannot run") and k.fix == build_command()
    rc = cli(["doctor"])
    out = capsys.readouterr().out
    assert rc == 1 and "!! row kernels" in out and f"-> {build_command()}" in out and "All good." not in out
