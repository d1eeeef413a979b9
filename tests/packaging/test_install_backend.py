"""packaging/install_llama_cpp.sh picks the backend: CUDA for the card's own compute capability
when nvidia-smi sees one, the CPU otherwise, TANDEM_BACKEND and the user's CMAKE_ARGS over both,
and a CPU build when the GPU build fails. Hermetic: fake nvidia-smi / ldconfig / nvcc / pip on
a temporary PATH, a temporary wheel cache; nothing is built."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "packaging" / "install_llama_cpp.sh"
VERSION = "0.3.36"

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the detection tested here is Linux's")

# The CPU flags the set-up used before it detected backends: /proc/cpuinfo flag -> CMake option.
OLD_CPU_FLAGS = [
    ("avx", "-DGGML_AVX=ON"), ("avx2", "-DGGML_AVX2=ON"), ("fma", "-DGGML_FMA=ON"),
    ("f16c", "-DGGML_F16C=ON"), ("bmi2", "-DGGML_BMI2=ON"), ("avx_vnni", "-DGGML_AVX_VNNI=ON"),
    ("avx512f", "-DGGML_AVX512=ON"), ("avx512_vnni", "-DGGML_AVX512_VNNI=ON"),
    ("avx512vbmi", "-DGGML_AVX512_VBMI=ON"), ("avx512_bf16", "-DGGML_AVX512_BF16=ON"),
]


def old_cpu_args() -> str:
    args = "-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
    flags = next((ln.split(":", 1)[1].split() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("flags")), [])
    for name, opt in OLD_CPU_FLAGS:
        if name in flags:
            args += " " + opt
    return args + " -DGGML_RPC=ON"


def _exe(path: Path, body: str) -> Path:
    path.write_text("#!/bin/bash\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def fake_nvidia_smi(bindir: Path, gpus: list[tuple[str, str, str]] | None) -> None:
    """gpus: (name, compute_cap, driver_version) per card; None: a driver that answers nothing."""
    if gpus is None:
        _exe(bindir / "nvidia-smi", """\
            echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." >&2
            exit 9
            """)
        return
    rows = "\n".join(f"{n}|{c}|{d}" for n, c, d in gpus)
    # answers --query-gpu=a,b,c with the fields asked for, in that order, one line per card
    _exe(bindir / "nvidia-smi", f"""\
        q=""
        for a in "$@"; do case "$a" in --query-gpu=*) q=${{a#--query-gpu=}};; esac; done
        [ -n "$q" ] || {{ echo "fake nvidia-smi"; exit 0; }}
        while IFS='|' read -r name cc drv; do
          line=""
          for f in $(echo "$q" | tr ',' ' '); do
            case "$f" in name) v=$name;; compute_cap) v=$cc;; driver_version) v=$drv;; *) exit 2;; esac
            line="${{line:+$line, }}$v"
          done
          echo "$line"
        done <<'EOF'
{rows}
EOF
        """)


@pytest.fixture
def sandbox(tmp_path):
    """A PATH with only fakes before /usr/bin:/bin, no CUDA_HOME, a fresh wheel cache."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _exe(bindir / "ldconfig", "exit 0\n")  # no libcuda.so.1 known to the linker
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUDA_HOME", "CUDA_PATH", "CMAKE_ARGS", "TANDEM_BACKEND", "TANDEM_CUDA_ARCH")}
    env.update(PATH=f"{bindir}:/usr/bin:/bin", TANDEM_WHEEL_CACHE=str(tmp_path / "wheels"),
               TANDEM_SDIST_CACHE=str(tmp_path / "sdist"),
               HOME=str(tmp_path / "home"))
    return tmp_path, bindir, env


def run(env, *args, py=sys.executable, timeout=60):
    return subprocess.run(["bash", str(SCRIPT), *args, str(py)], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=ROOT)


def cmake_args(out: str) -> str:
    m = re.search(r'^CMAKE_ARGS="([^"]*)"$', out, re.M)
    assert m, out
    return m.group(1)


def cache_dir(out: str) -> str:
    m = re.search(r"^wheel: (?:cached in|would be built into) (\S+)$", out, re.M)
    assert m, out
    return m.group(1)


def test_fake_nvidia_smi_86_chooses_a_cuda_build_for_that_card_only(sandbox):
    tmp, bindir, env = sandbox
    fake_nvidia_smi(bindir, [("NVIDIA GeForce RTX 3090", "8.6", "580.65.06")])
    r = run(env, "--dry-run")
    assert r.returncode == 0, r.stderr
    args = cmake_args(r.stdout)
    assert "-DGGML_CUDA=ON" in args.split()
    assert "-DCMAKE_CUDA_ARCHITECTURES=86" in args.split()
    assert r.stdout.startswith("backend: cuda (nvidia-smi sees NVIDIA GeForce RTX 3090 (8.6)")
    # the CPU backend inside a CUDA build keeps the AMX-free flags
    for opt in old_cpu_args().split():
        assert opt in args.split(), opt
    assert not (tmp / "wheels").exists() or not any((tmp / "wheels").iterdir()), "a dry run built or cached something"


def test_several_cards_build_their_distinct_architectures(sandbox):
    _, bindir, env = sandbox
    fake_nvidia_smi(bindir, [("RTX 3090", "8.6", "580.1"), ("RTX 4090", "8.9", "580.1"), ("RTX 3080", "8.6", "580.1")])
    r = run(env, "--dry-run")
    assert "-DCMAKE_CUDA_ARCHITECTURES=86;89" in cmake_args(r.stdout).split(), r.stdout


def test_tandem_cuda_arch_overrides_what_nvidia_smi_reports(sandbox):
    _, bindir, env = sandbox
    fake_nvidia_smi(bindir, [("RTX 3090", "8.6", "580.1")])
    r = run(dict(env, TANDEM_CUDA_ARCH="8.9"), "--dry-run")
    assert "-DCMAKE_CUDA_ARCHITECTURES=89" in cmake_args(r.stdout).split(), r.stdout
    r = run(dict(env, TANDEM_CUDA_ARCH="sm_eighty"), "--dry-run")
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_tandem_backend_cpu_wins_over_a_gpu(sandbox):
    _, bindir, env = sandbox
    fake_nvidia_smi(bindir, [("NVIDIA GeForce RTX 3090", "8.6", "580.65.06")])
    r = run(dict(env, TANDEM_BACKEND="cpu"), "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "CUDA" not in cmake_args(r.stdout)
    assert cmake_args(r.stdout) == old_cpu_args()
    assert r.stdout.startswith("backend: cpu (TANDEM_BACKEND=cpu)")


def test_without_a_gpu_the_cpu_flags_are_todays(sandbox):
    _, bindir, env = sandbox
    fake_nvidia_smi(bindir, None)  # nvidia-smi installed, driver not answering
    r = run(env, "--dry-run")
    assert r.returncode == 0, r.stderr
    assert cmake_args(r.stdout) == old_cpu_args()
    assert r.stdout.startswith("backend: cpu (no NVIDIA GPU found")
    # and the same as the script's own CPU flag function
    own = subprocess.run(["bash", "-c", f"source {shlex.quote(str(SCRIPT))}; with_rpc \"$(cpu_args)\""],
                         capture_output=True, text=True, env=env)
    assert own.stdout.strip() == cmake_args(r.stdout)


def test_cpu_cache_key_is_unchanged_and_each_backend_has_its_own(sandbox):
    _, bindir, env = sandbox
    fake_nvidia_smi(bindir, [("RTX 3090", "8.6", "580.1")])
    cpu = run(dict(env, TANDEM_BACKEND="cpu"), "--dry-run")
    cuda = run(env, "--dry-run")
    # the key before backends were detected: sha256("VERSION|ARGS|(3, 11)")[:16], so CPU wheels
    # already in users' caches stay valid
    pyver = str(tuple(sys.version_info[:2]))
    old_key = hashlib.sha256(f"{VERSION}|{old_cpu_args()}|{pyver}".encode()).hexdigest()[:16]
    assert Path(cache_dir(cpu.stdout)).name == old_key
    assert cache_dir(cuda.stdout) != cache_dir(cpu.stdout)
    r89 = run(dict(env, TANDEM_CUDA_ARCH="89"), "--dry-run")
    assert cache_dir(r89.stdout) != cache_dir(cuda.stdout)  # the architecture is part of it too


@pytest.mark.parametrize("value", ["gpu", "CUDA", "rocm", " "])
def test_an_unknown_tandem_backend_is_one_line_and_exit_2(sandbox, value):
    _, _, env = sandbox
    r = run(dict(env, TANDEM_BACKEND=value), "--dry-run")
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "TANDEM_BACKEND must be cpu, cuda or metal" in lines[0], r.stderr


def test_metal_on_linux_is_refused_in_one_line(sandbox):
    _, _, env = sandbox
    r = run(dict(env, TANDEM_BACKEND="metal"), "--dry-run")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "macOS" in r.stderr


def test_user_cmake_args_win_and_say_so(sandbox):
    _, bindir, env = sandbox
    fake_nvidia_smi(bindir, [("RTX 3090", "8.6", "580.1")])
    r = run(dict(env, CMAKE_ARGS="-DGGML_VULKAN=ON", TANDEM_BACKEND="cuda"), "--dry-run")
    assert r.returncode == 0, r.stderr
    assert cmake_args(r.stdout) == "-DGGML_VULKAN=ON -DGGML_RPC=ON"
    assert "CMAKE_ARGS win" in r.stdout and "TANDEM_BACKEND=cuda ignored" in r.stdout


def fake_toolkit(root: Path, cublas: bool = True) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    _exe(root / "bin" / "nvcc", 'case "$*" in *--version*) echo "Cuda compilation tools, release 12.4, V12.4.131";; esac\n')
    if cublas:
        (root / "include" / "cublas_v2.h").write_text("/* fake */\n")
    return root


def test_an_old_driver_without_a_toolkit_stays_on_the_cpu_and_says_why(sandbox):
    tmp, bindir, env = sandbox
    fake_nvidia_smi(bindir, [("Tesla T4", "7.5", "535.104.05")])
    cuda_home = fake_toolkit(tmp / "cuda", cublas=False)  # nvcc alone, as in a runtime image
    r = run(dict(env, CUDA_HOME=str(cuda_home)), "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "GGML_CUDA" not in cmake_args(r.stdout)
    first = r.stdout.splitlines()[0]
    assert first.startswith("backend: cpu (CUDA wanted") and "has no cuBLAS" in first
    assert "driver 535 runs CUDA 12 at most" in first and "TANDEM_BACKEND=cuda bash packaging/install_llama_cpp.sh" in first


def test_a_complete_system_toolkit_is_used_as_is(sandbox):
    tmp, bindir, env = sandbox
    fake_nvidia_smi(bindir, [("RTX 3090", "8.6", "580.1")])
    cuda_home = fake_toolkit(tmp / "cuda")
    r = run(dict(env, CUDA_HOME=str(cuda_home)), "--dry-run")
    args = cmake_args(r.stdout).split()
    assert f"-DCMAKE_CUDA_COMPILER={cuda_home}/bin/nvcc" in args and f"-DCUDAToolkit_ROOT={cuda_home}" in args
    assert "toolkit: would install" not in r.stdout


# ---- the fallback, with a fake python whose `-m pip wheel` fails for CUDA ------------------

MAKE_WHEEL = """\
import sys, zipfile
from pathlib import Path
out = Path(sys.argv[1]) / "llama_cpp_python-{v}-py3-none-linux_x86_64.whl"
with zipfile.ZipFile(out, "w") as z:
    z.writestr("llama_cpp/__init__.py", "")
    z.writestr("llama_cpp/lib/libllama.so", "")
    z.writestr("llama_cpp_python-{v}.dist-info/METADATA", "Metadata-Version: 2.1\\nName: llama_cpp_python\\nVersion: {v}\\n")
    z.writestr("llama_cpp_python-{v}.dist-info/RECORD", "")
"""


@pytest.fixture
def fake_python(sandbox):
    """A venv (no pip) behind a wrapper: `-m pip wheel` fails when CMAKE_ARGS asks for CUDA, as a
    compiler would, and otherwise writes a minimal wheel; `-m pip install` unpacks it."""
    tmp, bindir, env = sandbox
    venv.EnvBuilder(with_pip=False).create(tmp / "venv")
    (tmp / "make_wheel.py").write_text(MAKE_WHEEL.format(v=VERSION))
    calls = tmp / "pip-calls.log"
    py = _exe(tmp / "python", f"""\
        REAL={tmp}/venv/bin/python
        if [ "${{1:-}}" = -m ] && [ "${{2:-}}" = pip ]; then
          shift 2
          echo "$* CMAKE_ARGS=${{CMAKE_ARGS:-}}" >> {calls}
          case "$1" in
            wheel)
              dir=""; while [ $# -gt 0 ]; do [ "$1" = -w ] && dir=$2; shift; done
              case " ${{CMAKE_ARGS:-}} " in *" -DGGML_CUDA=ON "*)
                echo "[41/212] Building CUDA object ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/argmax.cu.o"
                echo "/tmp/x/ggml/src/ggml-cuda/common.cuh:12:10: fatal error: cublas_v2.h: No such file or directory"
                echo "ninja: build stopped: subcommand failed."
                echo "ERROR: Failed building wheel for llama-cpp-python" >&2
                exit 1;;
              esac
              exec "$REAL" {tmp}/make_wheel.py "$dir";;
            download)
              dir=""; while [ $# -gt 0 ]; do [ "$1" = -d ] && dir=$2; shift; done
              echo "not really a source archive" > "$dir/llama_cpp_python-{VERSION}.tar.gz"
              exit 0;;
            install)
              case "${{@: -1}}" in
                *.whl) exec "$REAL" -c 'import sys, sysconfig, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sysconfig.get_paths()["platlib"])' "${{@: -1}}";;
                cuda-toolkit*)  # the wheels' layout: nvidia/cu13/{{lib,bin,include}}
                  cu13="$("$REAL" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')/nvidia/cu13"
                  mkdir -p "$cu13/lib"
                  for l in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do echo fake > "$cu13/lib/$l"; done
                  case "${{@: -1}}" in *nvcc*)
                    mkdir -p "$cu13/bin" "$cu13/include"; printf '#!/bin/sh\n' > "$cu13/bin/nvcc"; chmod +x "$cu13/bin/nvcc"
                    echo "/* fake */" > "$cu13/include/cublas_v2.h";;
                  esac;;
              esac;;
          esac
          exit 0
        fi
        exec "$REAL" "$@"
        """)
    fake_nvidia_smi(bindir, [("NVIDIA GeForce RTX 3090", "8.6", "580.65.06")])
    env = dict(env, CUDA_HOME=str(fake_toolkit(tmp / "cuda")))
    return py, env, calls


def installed_key(py) -> str:
    r = subprocess.run([str(py), "-c", "import importlib.metadata as m, pathlib; "
                        "print(pathlib.Path(m.distribution('llama_cpp_python').locate_file('llama_cpp/.tandem_build_key')).read_text().strip())"],
                       capture_output=True, text=True)
    return r.stdout.strip()


def test_a_failing_cuda_build_falls_back_to_the_cpu_build_naming_the_cause(fake_python):
    py, env, calls = fake_python
    r = run(env, py=py)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    failed = [ln for ln in out.splitlines() if ln.startswith("The cuda build failed")]
    assert len(failed) == 1, out
    assert "fatal error: cublas_v2.h: No such file or directory" in failed[0]
    assert f"TANDEM_BACKEND=cuda bash packaging/install_llama_cpp.sh {py}" in failed[0]
    assert out.rstrip().endswith(f"installed ({old_cpu_args()})"), out
    wheels = calls.read_text().splitlines()
    # the source is downloaded once, into the set-up's cache, and both builds use it
    assert [w.split()[0] for w in wheels] == ["download", "wheel", "wheel", "install"]
    assert "-DGGML_CUDA=ON" in wheels[1] and "GGML_CUDA" not in wheels[2]
    assert (Path(env["TANDEM_SDIST_CACHE"]) / f"llama_cpp_python-{VERSION}.tar.gz").is_file()
    # the CPU wheel is what is installed, and no CUDA wheel was cached
    pyver = str(tuple(sys.version_info[:2]))
    assert installed_key(py) == hashlib.sha256(f"{VERSION}|{old_cpu_args()}|{pyver}".encode()).hexdigest()[:16]
    cache = Path(env["TANDEM_WHEEL_CACHE"])
    assert len(list(cache.glob("*/*.whl"))) == 1 and not list(cache.glob("*.partial.*"))

    # the next plain set-up does not spend the build again; it says why and how to retry
    calls.write_text("")
    r = run(env, py=py)
    assert r.returncode == 0 and calls.read_text() == "", r.stdout
    assert "the cuda build failed before: /tmp/x/ggml/src/ggml-cuda/common.cuh:12:10: fatal error" in r.stdout
    assert "Retry: TANDEM_BACKEND=cuda" in r.stdout and "already installed" in r.stdout

    # asking for CUDA tries again (and falls back again, since the fake still fails)
    r = run(dict(env, TANDEM_BACKEND="cuda"), py=py)
    assert r.returncode == 0
    assert [w.split()[0] for w in calls.read_text().splitlines()] == ["wheel"]
    assert "The cuda build failed" in r.stdout and "already installed" in r.stdout


def test_user_cmake_args_that_fail_do_not_fall_back(fake_python):
    py, env, calls = fake_python
    r = run(dict(env, CMAKE_ARGS="-DGGML_CUDA=ON"), py=py)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == "llama-cpp-python build failed: /tmp/x/ggml/src/ggml-cuda/common.cuh:12:10: fatal error: cublas_v2.h: No such file or directory"
    assert installed_key(py) == ""  # nothing half-installed


def test_a_cached_cuda_wheel_needs_only_the_runtime_from_pypi(fake_python, tmp_path):
    py, env, calls = fake_python
    env = dict(env, CUDA_HOME=str(fake_toolkit(tmp_path / "nvcc-only", cublas=False)))  # -> the PyPI route
    dry = run(env, "--dry-run", py=py)
    assert "toolkit: would install cuda-toolkit[nvcc,cudart,cublas,cccl]==13.0.*" in dry.stdout, dry.stdout
    key_dir = Path(cache_dir(dry.stdout))
    key_dir.mkdir(parents=True)  # a CUDA wheel another venv built
    subprocess.run([str(tmp_path / "venv" / "bin" / "python"), str(tmp_path / "make_wheel.py"), str(key_dir)], check=True)
    (key_dir.parent / f"{key_dir.name}.failed").write_text("an old failure\n")  # does not hide the wheel
    r = run(env, py=py)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Installing the CUDA runtime libraries" in r.stdout and "failed" not in r.stdout, r.stdout
    installs = calls.read_text().splitlines()
    assert [c.split()[0] for c in installs] == ["list", "install", "list", "install"]  # no `pip wheel`: nothing built
    assert "cuda-toolkit[cudart,cublas]==13.0.*" in installs[1]
    assert installed_key(py) == key_dir.name
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                               capture_output=True, text=True).stdout.strip())
    for lib in ("libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13"):
        link = site / "llama_cpp" / "lib" / lib  # found by llama.cpp's $ORIGIN runpath
        assert link.is_symlink() and link.resolve() == (site / "nvidia" / "cu13" / "lib" / lib).resolve()
        assert link.read_text() == "fake\n"
    assert not (key_dir.parent / f"{key_dir.name}.failed").exists()


# ---- TANDEM_BACKEND=cuda where there is no GPU: said first, nothing downloaded ----------------

def test_cuda_asked_without_a_gpu_stays_on_the_cpu_in_one_line(sandbox):
    _, bindir, env = sandbox
    fake_nvidia_smi(bindir, None)  # nvidia-smi installed, no driver answering; no libcuda.so.1 either
    r = run(dict(env, TANDEM_BACKEND="cuda"), "--dry-run")
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("backend: cpu (TANDEM_BACKEND=cuda, but no NVIDIA GPU or driver was found"), first
    assert "the CPU build is used and no CUDA toolkit is downloaded" in first
    assert "TANDEM_CUDA_ARCH=86 TANDEM_BACKEND=cuda bash packaging/install_llama_cpp.sh" in first  # the way to force it
    assert cmake_args(r.stdout) == old_cpu_args()
    assert "toolkit: would install" not in r.stdout


def test_cuda_asked_without_a_gpu_downloads_no_toolkit_and_keeps_the_cpu_build(fake_python):
    py, env, calls = fake_python
    (Path(env["PATH"].split(":")[0]) / "nvidia-smi").unlink()  # the fake card is gone
    env = {k: v for k, v in env.items() if k != "CUDA_HOME"}  # and no system toolkit: the PyPI route
    r = run(dict(env, TANDEM_BACKEND="cuda"), py=py)
    assert r.returncode == 0, r.stdout + r.stderr
    said = [ln for ln in r.stdout.splitlines() if ln.startswith("llama.cpp backend:")]
    assert len(said) == 1 and said[0].startswith("llama.cpp backend: cpu (TANDEM_BACKEND=cuda, but no NVIDIA GPU"), r.stdout
    installs = calls.read_text().splitlines()
    assert not [c for c in installs if "cuda-toolkit" in c or "GGML_CUDA" in c], installs
    assert [c.split()[0] for c in installs] == ["download", "wheel", "install"]
    assert r.stdout.rstrip().endswith(f"installed ({old_cpu_args()})"), r.stdout
    calls.write_text("")
    r = run(dict(env, TANDEM_BACKEND="cuda"), py=py)  # asked again: the CPU build is kept, nothing rebuilt
    assert r.returncode == 0 and "already installed" in r.stdout and calls.read_text() == "", r.stdout


def test_naming_the_card_still_builds_cuda_without_a_gpu(sandbox):
    _, _, env = sandbox  # no nvidia-smi, no libcuda: a build machine for another computer's card
    r = run(dict(env, TANDEM_BACKEND="cuda", TANDEM_CUDA_ARCH="8.9"), "--dry-run")
    assert r.returncode == 0, r.stderr
    args = cmake_args(r.stdout).split()
    assert "-DGGML_CUDA=ON" in args and "-DCMAKE_CUDA_ARCHITECTURES=89" in args and "-DGGML_CUDA_NO_VMM=ON" in args
    assert r.stdout.startswith("backend: cuda (TANDEM_BACKEND=cuda; no NVIDIA GPU here: building for TANDEM_CUDA_ARCH=8.9")
