#!/usr/bin/env bash
# The CUDA backend for the portable bundle, as a loadable library beside the CPU variants.
#
#   bash packaging/cuda_backend.sh LIBDIR     # adds libggml-cuda.so and the CUDA runtime to LIBDIR
#   (`make package-cuda` runs it on build/portable/llama_cpp/lib before PyInstaller)
#
# The portable build (portable.sh) loads every backend at start with
# ggml_backend_load_all_from_path; a libggml-cuda.so in the same folder is loaded when the
# NVIDIA driver (libcuda.so.1) is there and skipped with one line when not
# (engine/llamacpp/backend_dl.py). So a GPU bundle is the CPU bundle plus that one library
# and the CUDA runtime it links (libcudart, libcublas, libcublasLt, found beside it through
# its RPATH $ORIGIN): a user needs only the driver (>= 580: CUDA 13).
#
# The library is built from the same llama-cpp-python source as the portable wheel, with
# GGML_BACKEND_DL and GGML_CUDA, by PyPI's CUDA 13 compiler (no system toolkit and no GPU
# needed) in a toolkit venv of its own (~/.cache/tandem/cuda-toolkit-13.0, about 1.1 GB, once;
# the dev venv is not touched), and cached like the wheels (~/.cache/tandem/wheels/KEY/
# libggml-cuda.so). Only that target is built: the rest of the bundle is the portable wheel's.
# It links libggml-base, and the portable build's must define every symbol it takes from there.
#
# The driver library is not on a build machine: ggml-cuda's memory pool (VMM) links libcuda,
# so the link gets a stub with the driver API's names and the soname libcuda.so.1 (what
# NVIDIA's toolkit ships in lib/stubs; PyPI's wheels do not). The stub is never shipped.
#
# TANDEM_CUDA_ARCH picks the compute capabilities (default: Turing to Blackwell; each one adds
# about the time of the first). The build directory is kept ($CACHE/KEY.build): a build that
# was stopped resumes where it was.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LIBDIR="${1:-}"
[ -n "$LIBDIR" ] && [ -d "$LIBDIR" ] || { echo "usage: cuda_backend.sh LIBDIR (a portable build's llama_cpp/lib)" >&2; exit 2; }
[ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] || { echo "cuda_backend.sh: the bundle's CUDA backend is built on Linux x86-64 here (Windows: see .github/workflows/release.yml)" >&2; exit 2; }

# shellcheck source=install_llama_cpp.sh
source "$ROOT/packaging/install_llama_cpp.sh"   # VERSION, CACHE_ROOT, cache_key, fetch_sdist, build_cause, CUDA_PYPI_*
ARCHS=$(normalize_archs "${TANDEM_CUDA_ARCH:-75;80;86;89;90;120}")
TKVENV="${TANDEM_CUDA_TOOLKIT_VENV:-$(dirname "$CACHE_ROOT")/cuda-toolkit-13.0}"
TKPY="$TKVENV/bin/python"

# 1. the compiler, headers and runtime from PyPI, in their own venv
if [ ! -x "$TKPY" ]; then
  python3 -m venv "$TKVENV" || { echo "cuda_backend.sh: could not make the toolkit venv at $TKVENV" >&2; exit 1; }
fi
if ! "$TKPY" -m pip install -q "$CUDA_PYPI_SPEC" "scikit-build-core>=0.9.2" >"$TKVENV/pip.log" 2>&1; then
  echo "cuda_backend.sh: pip could not install $CUDA_PYPI_SPEC: $(grep -E 'ERROR' "$TKVENV/pip.log" | tail -1 | cut -c1-200)" >&2
  exit 1
fi
TK="$("$TKPY" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')/nvidia/cu13"
[ -x "$TK/bin/nvcc" ] || { echo "cuda_backend.sh: no nvcc at $TK/bin after installing $CUDA_PYPI_SPEC" >&2; exit 1; }
[ -e "$TK/lib64" ] || ln -s lib "$TK/lib64"   # nvcc's profile links from lib64; the wheels ship lib/

# 2. what cmake links by unversioned names: the runtime's links and the driver's stub
LINK="$TKVENV/link"
rm -rf "$LINK"; mkdir -p "$LINK"
for l in $CUDA_PYPI_RUNTIME_LIBS; do
  [ -e "$TK/lib/$l" ] || { echo "cuda_backend.sh: $l not found under $TK/lib" >&2; exit 1; }
  ln -sf "$TK/lib/$l" "$LINK/${l%.13}"
done
# every CUresult function cuda.h declares (after its _v2 renames), as an empty function
cc -E -P -I"$TK/include" -x c "$TK/include/cuda.h" \
  | grep -oE '\bCUresult[[:space:]]+cu[A-Za-z0-9_]+[[:space:]]*\(' | sed -E 's/^CUresult[[:space:]]+//; s/[[:space:]]*\($//' \
  | sort -u | sed 's/.*/void &(void) {}/' > "$LINK/libcuda-stub.c"
[ "$(wc -l < "$LINK/libcuda-stub.c")" -gt 100 ] || { echo "cuda_backend.sh: could not read the driver API from $TK/include/cuda.h" >&2; exit 1; }
cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$LINK/libcuda.so" "$LINK/libcuda-stub.c"

# 3. the library, cached by version, flags and compiler: only the ggml-cuda target (and the
# libggml-base it links) is built, not libllama and its common library, which the bundle takes
# from the portable build: that saves the better part of an hour on 2 cores
PYVER=$("$TKPY" -c 'import sys;print(sys.version_info[:2])')
CUDA_ARGS="-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=$ARCHS -DCMAKE_INSTALL_BINDIR=llama_cpp/lib -DLLAVA_BUILD=OFF"
KEY=$(cache_key "$CUDA_ARGS" "pypi:$CUDA_PYPI_SPEC|bundle")
OUTDIR="$CACHE_ROOT/$KEY"
if [ ! -f "$OUTDIR/libggml-cuda.so" ]; then
  fetch_sdist || { echo "cuda_backend.sh: $CAUSE" >&2; exit 1; }
  SRC="$CACHE_ROOT/$KEY.src" BUILD="$CACHE_ROOT/$KEY.build" LOG="$CACHE_ROOT/$KEY.log"
  # an unpacked source at a fixed path: cmake's kept build directory is tied to it
  if [ ! -f "$SRC/pyproject.toml" ]; then
    rm -rf "$SRC"; mkdir -p "$SRC"; tar xzf "$SDIST" -C "$SRC" --strip-components=1
  fi
  echo "Building llama.cpp's CUDA backend for compute capability $ARCHS (long: about an hour per capability on 2 cores; log: $LOG)..."
  s=$(date +%s)
  # shellcheck disable=SC2086  # the flags are words
  if (export PATH="$TK/bin:$PATH"
      [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release $CUDA_ARGS \
        -DCMAKE_CUDA_COMPILER="$TK/bin/nvcc" -DCUDAToolkit_ROOT="$TK" -DCMAKE_LIBRARY_PATH="$LINK"
      cmake --build "$BUILD" --target ggml-cuda -j "${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}") >>"$LOG" 2>&1 \
      && [ -f "$BUILD/bin/libggml-cuda.so" ]; then
    rm -rf "$OUTDIR.partial"; mkdir -p "$OUTDIR.partial"
    cp -L "$BUILD/bin/libggml-cuda.so" "$BUILD/bin/libggml-base.so" "$OUTDIR.partial/"
    echo "$(( $(date +%s) - s )) s (this run) for compute capability $ARCHS" > "$OUTDIR.partial/build-time.txt"
    rm -rf "$OUTDIR"; mv "$OUTDIR.partial" "$OUTDIR"   # only a finished library enters the cache
  else
    echo "cuda_backend.sh: the CUDA build failed: $(build_cause "$LOG")" >&2
    exit 1
  fi
fi

# 4. libggml-cuda.so and the runtime into LIBDIR, after checking the CPU build's libggml-base
# defines every symbol it takes from its own build's
"$TKPY" - "$OUTDIR" "$LIBDIR" "$TK/lib" $CUDA_PYPI_RUNTIME_LIBS <<'PYEOF'
import re, shutil, subprocess, sys
from pathlib import Path
built, libdir, rtdir, runtime = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:]


def origin_only(path: Path) -> None:
    """Cut the library's RUNPATH to $ORIGIN: cmake appends the build's link folder (the
    toolkit venv's), which means nothing elsewhere. The string is shortened in place, a NUL
    after $ORIGIN, as patchelf does when a path gets shorter."""
    dyn = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout
    m = re.search(r"Library r(?:un)?path: \[(.*)\]", dyn)
    if m is None or m.group(1) == "$ORIGIN":
        return
    data = bytearray(path.read_bytes())
    entry = m.group(1).encode() + b"\0"
    if not entry.startswith(b"$ORIGIN:") or data.count(entry) != 1:
        sys.exit(f"cuda_backend.sh: cannot trim the RUNPATH {m.group(1)!r} of {path} to $ORIGIN")
    data[data.index(entry) + len(b"$ORIGIN")] = 0
    path.write_bytes(bytes(data))


def symbols(path: Path, which: str) -> set[str]:
    out = subprocess.run(["nm", "-D", which, str(path)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}

mine = libdir / "libggml-base.so"
if not mine.exists():
    sys.exit(f"cuda_backend.sh: no libggml-base.so in {libdir}: not a portable llama.cpp lib folder")
needed = symbols(built / "libggml-cuda.so", "--undefined-only") & symbols(built / "libggml-base.so", "--defined-only")
missing = needed - symbols(mine, "--defined-only")
if missing:
    sys.exit(f"cuda_backend.sh: {mine} lacks {len(missing)} symbols libggml-cuda.so takes from it "
             f"({', '.join(sorted(missing)[:3])}...): not the same llama-cpp-python version?")
shutil.copyfile(built / "libggml-cuda.so", libdir / "libggml-cuda.so")
origin_only(libdir / "libggml-cuda.so")
for lib in runtime:  # the files themselves, not the toolkit venv's links
    shutil.copyfile(rtdir / lib, libdir / lib)
print(f"CUDA backend added to {libdir}: libggml-cuda.so ({len(needed)} symbols from libggml-base, all defined there) "
      f"+ {', '.join(runtime)}")
PYEOF

# 5. it must find everything beside itself except the driver (and the system's own libraries)
missing=$(cd "$LIBDIR" && env -u LD_LIBRARY_PATH ldd ./libggml-cuda.so | awk '/not found/ {print $1}' | grep -v '^libcuda\.so\.1$' || true)
[ -z "$missing" ] || { echo "cuda_backend.sh: libggml-cuda.so does not find $(echo $missing) beside itself" >&2; exit 1; }
rpath=$(readelf -d "$LIBDIR/libggml-cuda.so" | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\]/\2/p')
[ "$rpath" = '$ORIGIN' ] || { echo "cuda_backend.sh: libggml-cuda.so's RPATH is '$rpath', not \$ORIGIN" >&2; exit 1; }
