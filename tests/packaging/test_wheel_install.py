"""`pip install tandem-studio` works outside the checkout: an sdist and a wheel are built from
a copy of the source, the wheel goes into a fresh virtual environment, and `tandem models` /
`tandem doctor` run there from another folder, reading models.toml and the prompt suites from
the installed package's data.

The fresh environment sees this one's dependencies through a .pth file instead of
re-installing them (no network; llama.cpp takes minutes to build).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

# Not part of what a user installs: version control, environments, build output, models.
NOT_SOURCE = shutil.ignore_patterns(".*", "build", "dist", "*.egg-info", "__pycache__", "out", "gpu-*", "*.gguf",
                                    "tests", "docs")


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert r.returncode == 0, f"{cmd}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def _dependency_dirs() -> list[str]:
    """site-packages folders of the interpreter running the tests, where the dependencies are."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys(paths[k] for k in ("purelib", "platlib")))


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("wheel_install")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=NOT_SOURCE)
    # the sdist must carry what the wheel's build step copies (MANIFEST.in), so build through it
    build = "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))"
    sdist = tmp / "sdist" / _run([sys.executable, "-c", build, str(tmp / "sdist")], cwd=src).stdout.split()[-1]
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
          "-w", str(tmp / "wheels"), str(sdist)], cwd=tmp)
    (wheel,) = (tmp / "wheels").glob("tandem_studio-*.whl")

    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    py = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    # pip runs from here but installs into the fresh environment, which sees nothing else yet
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index", "-q", str(wheel)])
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (site / "tandem_test_dependencies.pth").write_text("\n".join(_dependency_dirs()) + "\n")

    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TANDEM_CATALOG", "PYTHONHOME")}
    env.update(HF_HOME=str(tmp / "hf"), TANDEM_HOME=str(tmp / "home"), HF_HUB_OFFLINE="1")
    tandem = venv / ("Scripts/tandem.exe" if os.name == "nt" else "bin/tandem")
    return {"py": py, "tandem": tandem, "site": site, "cwd": elsewhere, "env": env, "wheel": wheel}


DEV_SCRIPTS = ("baseline", "gpu_probe", "lookup_replay", "server_bench", "bench_gui", "host_overhead")


def test_the_wheel_ships_no_development_scripts(installed):
    import zipfile

    names = zipfile.ZipFile(installed["wheel"]).namelist()
    assert not [n for n in names if n.startswith("tools/")], names
    shipped = [n for n in names if n.endswith(".py") and Path(n).stem in DEV_SCRIPTS]
    assert not shipped, shipped
    assert any(n.startswith("engine/decoding/") for n in names) and any(n.startswith("app/views/") for n in names)


def test_the_public_api_imports_in_the_fresh_environment(installed):
    probe = ("import engine, importlib.metadata as md; print(engine.Engine.__name__, engine.RemoteEngine.__name__); "
             "print([e.value for e in md.entry_points(group='tandem.gui')])")
    r = _run([str(installed["py"]), "-c", probe], cwd=installed["cwd"], env=installed["env"])
    assert r.stdout.splitlines() == ["Engine RemoteEngine", "['app.main:main']"], r.stdout


def test_installed_package_carries_the_catalog_and_suites(installed):
    probe = ("import json, engine, engine.models.catalog as c, engine.measure.suites as b; "
             "print(json.dumps({'engine': engine.__file__, 'catalog': str(c.CATALOG_PATH), "
             "'suites': str(b.SUITES_DIR), 'builtin': b.every_builtin_suite()}))")
    r = _run([str(installed["py"]), "-c", probe], cwd=installed["cwd"], env=installed["env"])
    got = json.loads(r.stdout)
    data = installed["site"] / "engine" / "data"
    assert Path(got["engine"]).is_relative_to(installed["site"]), got  # the installed package ran, not the checkout
    assert Path(got["catalog"]) == data / "models.toml"
    assert Path(got["catalog"]).read_bytes() == (ROOT / "models.toml").read_bytes()
    assert Path(got["suites"]) == data / "suites"
    shipped = sorted(p.relative_to(ROOT / "assets" / "suites") for p in (ROOT / "assets" / "suites").rglob("*") if p.is_file())
    assert shipped, "no suites in the checkout"
    for rel in shipped:  # subfolders included
        assert (data / "suites" / rel).read_bytes() == (ROOT / "assets" / "suites" / rel).read_bytes(), rel
    assert got["builtin"] and set(got["builtin"]) == {str(p.with_suffix("")) for p in shipped if p.suffix == ".jsonl"}


def test_tandem_models_runs_from_outside_the_checkout(installed):
    r = _run([str(installed["tandem"]), "models"], cwd=installed["cwd"], env=installed["env"])
    default = tomllib.loads((ROOT / "models.toml").read_text())["default_pair"]
    assert f"*{default}" in r.stdout and "not downloaded" in r.stdout, r.stdout
    assert "Traceback" not in r.stderr


def test_tandem_doctor_runs_from_outside_the_checkout(installed):
    r = subprocess.run([str(installed["tandem"]), "doctor"], capture_output=True, text=True, timeout=300,
                       cwd=installed["cwd"], env=installed["env"])
    out = r.stdout
    assert r.returncode in (0, 1) and "Traceback" not in r.stdout + r.stderr, out + r.stderr
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert "ok python" in out and "ok tandem-studio" in out, out
    assert next(ln for ln in out.splitlines() if ln.startswith("ok tandem-studio")).split()[-1] == version
    assert "ok backend" in out and "model store" in out, out
    default = tomllib.loads((ROOT / "models.toml").read_text())["default_pair"]
    assert f"-> tandem pull {default}" in out and "problem(s)" in out, out  # nothing downloaded in this HF_HOME
