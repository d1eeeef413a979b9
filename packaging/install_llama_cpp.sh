#!/usr/bin/env bash
# Build (once) and install llama-cpp-python into the given Python environment, for the
# accelerator this machine has.
#
#   bash packaging/install_llama_cpp.sh [--dry-run] [PYTHON]
#
# Backend: NVIDIA GPU (nvidia-smi reports one, or the driver's libcuda is present) -> CUDA,
# built for the card's own compute capability only (minutes instead of an hour); macOS ->
# Metal; otherwise the CPU. TANDEM_BACKEND=cpu|cuda|metal overrides the detection,
# TANDEM_CUDA_ARCH=86 (or "8.6", "86;89") the compute capability, and CMAKE_ARGS given by
# the user win over all of it. TANDEM_BACKEND=cuda on a machine with no NVIDIA GPU or driver
# stays on the CPU (nothing downloaded) unless TANDEM_CUDA_ARCH names the card to build for. --dry-run prints the choice, the reason and the CMAKE_ARGS,
# and changes nothing.
#
# CPU flags: a default `pip install llama-cpp-python` uses -march=native, which on Sapphire
# Rapids turns on ggml's AMX kernels; in VMs that do not grant AMX tile state (Firecracker,
# many clouds) the first matrix multiply segfaults. We build with GGML_NATIVE=OFF and switch
# on exactly the SIMD sets this CPU reports, never AMX. A CUDA build keeps these flags too:
# it still runs some work on the CPU backend.
#
# CUDA compiler: a system toolkit (nvcc with cuBLAS beside it) is used when present.
# Otherwise the compiler, headers and runtime come from PyPI into this venv, nowhere else.
# Only CUDA 13 is on PyPI as a whole compiler (nvidia-cuda-nvcc-cu12 ships ptxas alone), so
# that route needs a driver >= 580 and compute capability >= 7.5; anything else is said
# in one line, with what to install.
#
# A GPU build that fails falls back to the CPU build, names the cause in one line and says
# how to retry; the failure is remembered so the next set-up does not spend the build time
# again until you ask for it (TANDEM_BACKEND=cuda).
#
# pip's wheel cache ignores CMAKE_ARGS, so we keep our own cache keyed by the version, the
# backend, the flags and the compiler: a rebuild happens only when one of them changes.
# Every build also gets -DGGML_RPC=ON, so the wheel ships libggml-rpc (`tandem worker`,
# `--rpc HOST:PORT`).
set -euo pipefail

VERSION="${LLAMA_CPP_VERSION:-0.3.36}"
# The PyPI CUDA toolkit: one metapackage pins matching nvcc/crt/nvvm/cudart/cuBLAS/CCCL.
# 13.0 is the oldest CUDA 13, so the widest range of R580+ drivers runs what it builds.
CUDA_PYPI_SPEC="${TANDEM_CUDA_PYPI_SPEC:-cuda-toolkit[nvcc,cudart,cublas,cccl]==13.0.*}"
CUDA_PYPI_RUNTIME_SPEC="${CUDA_PYPI_SPEC%%\[*}[cudart,cublas]${CUDA_PYPI_SPEC#*\]}"
CUDA_PYPI_RUNTIME_LIBS="libcudart.so.13 libcublas.so.13 libcublasLt.so.13"

say() { echo "$*"; }
die() { echo "$*" >&2; exit 2; }

sha256() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum; else shasum -a 256; fi
}

# ---- flags ---------------------------------------------------------------------------

cpu_args() {
  local args="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
  if [ "$(uname -s)" = "Linux" ] && [ -r /proc/cpuinfo ]; then
    local flags
    flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
    has() { [[ " $flags " == *" $1 "* ]]; }
    has avx && args="$args -DGGML_AVX=ON"
    has avx2 && args="$args -DGGML_AVX2=ON"
    has fma && args="$args -DGGML_FMA=ON"
    has f16c && args="$args -DGGML_F16C=ON"
    has bmi2 && args="$args -DGGML_BMI2=ON"
    has avx_vnni && args="$args -DGGML_AVX_VNNI=ON"
    has avx512f && args="$args -DGGML_AVX512=ON"
    has avx512_vnni && args="$args -DGGML_AVX512_VNNI=ON"
    has avx512vbmi && args="$args -DGGML_AVX512_VBMI=ON"
    has avx512_bf16 && args="$args -DGGML_AVX512_BF16=ON"
  elif [ "$(uname -s)" = "Darwin" ]; then
    # ggml turns Metal on by default on macOS; a CPU build must say no.
    args="-DGGML_METAL=OFF"
  fi
  echo "$args"
}

metal_args() { echo "-DGGML_METAL=ON"; }

# ---- detection -----------------------------------------------------------------------

GPU_DESC="" GPU_ARCHS="" GPU_DRIVER=""

# nvidia-smi's view: sets GPU_DESC ("NVIDIA GeForce RTX 3090 (8.6)"), GPU_ARCHS ("86",
# distinct values joined by ';') and GPU_DRIVER (lowest major). False when it sees no GPU.
probe_nvidia_smi() {
  command -v nvidia-smi >/dev/null 2>&1 || return 1
  local out
  out=$(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>/dev/null) || out=""
  if [ -z "$out" ]; then
    # drivers older than 510 cannot report compute_cap
    out=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/,/, ,/') || out=""
  fi
  [ -n "$out" ] || return 1
  local line name cc drv archs="" desc="" mindrv=""
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    name=$(echo "$line" | cut -d, -f1 | sed 's/^ *//; s/ *$//')
    cc=$(echo "$line" | cut -d, -f2 | tr -d ' ')
    drv=$(echo "$line" | cut -d, -f3 | tr -d ' ' | cut -d. -f1)
    [ -n "$name" ] || continue
    desc="${desc:+$desc, }$name${cc:+ ($cc)}"
    if [[ "$cc" =~ ^[0-9]+\.[0-9]+$ ]]; then
      archs="$archs ${cc/./}"
    fi
    if [[ "$drv" =~ ^[0-9]+$ ]] && { [ -z "$mindrv" ] || [ "$drv" -lt "$mindrv" ]; }; then
      mindrv=$drv
    fi
  done <<EOF
$out
EOF
  [ -n "$desc" ] || return 1
  GPU_DESC=$desc
  GPU_ARCHS=$(echo $archs | tr ' ' '\n' | sort -un | paste -sd';' -)
  GPU_DRIVER=$mindrv
}

# The NVIDIA driver's library (libcuda.so.1), as the dynamic linker's cache knows it: for a
# machine whose nvidia-smi is not on PATH, and to link ggml-cuda's VMM pool against.
find_libcuda() {
  local ldc p
  ldc=$(command -v ldconfig 2>/dev/null || true)
  [ -z "$ldc" ] && [ -x /sbin/ldconfig ] && ldc=/sbin/ldconfig
  [ -n "$ldc" ] || return 1
  p=$("$ldc" -p 2>/dev/null | awk '$1 == "libcuda.so.1" {print $NF; exit}')
  [ -n "$p" ] || return 1
  echo "$p"
}

# TANDEM_CUDA_ARCH: "86", "8.6" or several joined by ';' or ','.
normalize_archs() {
  local a out=""
  for a in $(echo "$1" | tr ';,' '  '); do
    a=${a/./}
    [[ "$a" =~ ^[0-9]+[af]?(-real|-virtual)?$ ]] || [ "$a" = native ] || die "TANDEM_CUDA_ARCH: '$1' is not a compute capability (like 86, 8.6 or \"86;89\")"
    out="${out:+$out;}$a"
  done
  [ -n "$out" ] || die "TANDEM_CUDA_ARCH is empty (give one like 86 or \"86;89\")"
  echo "$out"
}

BACKEND="" WHY="" EXPLICIT=0
choose_backend() {
  local os lib
  os=$(uname -s)
  if [ -n "${TANDEM_BACKEND:-}" ]; then
    EXPLICIT=1
    case "$TANDEM_BACKEND" in
      cpu) BACKEND=cpu; WHY="TANDEM_BACKEND=cpu" ;;
      cuda)
        [ "$os" = Linux ] || die "TANDEM_BACKEND=cuda: this set-up builds CUDA on Linux only (this is $os)"
        BACKEND=cuda; WHY="TANDEM_BACKEND=cuda"
        if probe_nvidia_smi; then
          WHY="$WHY; nvidia-smi sees $GPU_DESC"
        elif lib=$(find_libcuda); then
          WHY="$WHY; the NVIDIA driver library is present ($lib)"
        elif [ -n "${TANDEM_CUDA_ARCH:-}" ]; then
          WHY="$WHY; no NVIDIA GPU here: building for TANDEM_CUDA_ARCH=$TANDEM_CUDA_ARCH"
        else
          # asked for CUDA where it cannot run: say so before ~1 GB of toolkit and a long build
          BACKEND=cpu
          WHY="TANDEM_BACKEND=cuda, but no NVIDIA GPU or driver was found (nvidia-smi reports none, no libcuda.so.1): the CPU build is used and no CUDA toolkit is downloaded. To build CUDA for another machine's card anyway, name the card: TANDEM_CUDA_ARCH=86 TANDEM_BACKEND=cuda bash packaging/install_llama_cpp.sh $PY"
        fi ;;
      metal)
        [ "$os" = Darwin ] || die "TANDEM_BACKEND=metal: Metal needs macOS (this is $os)"
        BACKEND=metal; WHY="TANDEM_BACKEND=metal" ;;
      *) die "TANDEM_BACKEND must be cpu, cuda or metal (got '$TANDEM_BACKEND')" ;;
    esac
    return
  fi
  if [ "$os" = Darwin ]; then
    BACKEND=metal; WHY="macOS on $(uname -m): Metal"
    [ "$(uname -m)" = arm64 ] && WHY="Apple silicon: Metal"
  elif probe_nvidia_smi; then
    BACKEND=cuda; WHY="nvidia-smi sees $GPU_DESC"
  elif lib=$(find_libcuda); then
    BACKEND=cuda; WHY="the NVIDIA driver library is present ($lib), nvidia-smi is not on PATH"
  else
    BACKEND=cpu; WHY="no NVIDIA GPU found (nvidia-smi reports none, no libcuda.so.1) and not macOS"
  fi
}

# ---- CUDA toolkit ----------------------------------------------------------------------

TK_KIND="" TK_ROOT="" TK_NVCC="" TK_ID="" TK_NOTE=""

# A toolkit root with the cuBLAS that ggml-cuda links.
has_cublas() {
  local r=$1 d
  for d in "$r/include" "$r"/targets/*/include; do
    [ -e "$d/cublas_v2.h" ] && return 0
  done
  return 1
}

find_system_toolkit() {
  local c nvcc="" top
  for c in "${CUDA_HOME:+$CUDA_HOME/bin/nvcc}" "${CUDA_PATH:+$CUDA_PATH/bin/nvcc}" "$(command -v nvcc 2>/dev/null || true)" /usr/local/cuda/bin/nvcc; do
    [ -n "$c" ] && [ -x "$c" ] && { nvcc=$c; break; }
  done
  [ -n "$nvcc" ] || { TK_NOTE="nvcc not found"; return 1; }
  # nvcc may be a wrapper script elsewhere (/usr/local/bin/nvcc): ask it where it lives.
  top=$("$nvcc" --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ _HERE_=//p' | head -1 || true)
  if [ -n "$top" ] && [ -d "$top/.." ]; then top=$(cd "$top/.." && pwd); else top=$(cd "$(dirname "$nvcc")/.." && pwd); fi
  if ! has_cublas "$top"; then
    TK_NOTE="the CUDA toolkit at $top has no cuBLAS"
    return 1
  fi
  TK_KIND=system TK_ROOT=$top
  TK_NVCC="$top/bin/nvcc"; [ -x "$TK_NVCC" ] || TK_NVCC=$nvcc
  TK_ID="system:$("$TK_NVCC" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' | head -1)"
}

# Why the PyPI (CUDA 13) compiler cannot serve this machine, or nothing.
pypi_toolkit_blocker() {
  if [ "$(uname -m)" != x86_64 ] && [ "$(uname -m)" != aarch64 ]; then
    echo "PyPI has no CUDA compiler for $(uname -m)"; return
  fi
  if [ -n "$GPU_DRIVER" ] && [ "$GPU_DRIVER" -lt 580 ]; then
    echo "driver $GPU_DRIVER runs CUDA 12 at most, and PyPI has no CUDA 12 compiler (nvidia-cuda-nvcc-cu12 ships ptxas only): install CUDA toolkit 12.x (nvcc and cuBLAS) or a driver >= 580"; return
  fi
  local a
  for a in $(echo "$CUDA_ARCHS" | tr ';' ' '); do
    if [[ "$a" =~ ^[0-9]+ ]] && [ "${BASH_REMATCH[0]}" -lt 75 ]; then
      echo "compute capability ${a:0:${#a}-1}.${a: -1} is older than CUDA 13 builds for (7.5+), and PyPI has no CUDA 12 compiler: install CUDA toolkit 12.x (nvcc and cuBLAS)"; return
    fi
  done
}

SITE=""
py_site() {
  [ -n "$SITE" ] || SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
  echo "$SITE"
}

# cmake finds libraries by their unversioned names, which wheels do not ship, and ggml-cuda
# links the driver (libcuda) for its VMM pool: give it a directory of links to both.
LINK_DIR=""
make_link_dir() {
  local root=$1 lib libcuda
  # nvcc's own profile links from $TOP/lib64 (-lcudadevrt, -lcudart_static); the wheels
  # ship lib/ only
  [ -e "$root/lib64" ] || ln -s lib "$root/lib64"
  LINK_DIR="$("$PY" -c 'import sys; print(sys.prefix)')/tandem-cuda-link"
  rm -rf "$LINK_DIR"; mkdir -p "$LINK_DIR"
  for lib in $CUDA_PYPI_RUNTIME_LIBS; do
    [ -e "$root/lib/$lib" ] && ln -sf "$root/lib/$lib" "$LINK_DIR/${lib%.13}"
  done
  if libcuda=$(find_libcuda); then
    ln -sf "$libcuda" "$LINK_DIR/libcuda.so"
  fi
}

# The runtime libraries of a PyPI-toolkit build live in site-packages/nvidia/cu13/lib;
# llama.cpp's libraries look beside themselves ($ORIGIN), so link them there.
link_runtime_libs() {
  local site lib
  site=$(py_site)
  mkdir -p "$site/llama_cpp/lib"
  for lib in $CUDA_PYPI_RUNTIME_LIBS; do
    ln -sf "../../nvidia/cu13/lib/$lib" "$site/llama_cpp/lib/$lib"
  done
}

CUDA_ARCHS="" ARCH_OVERRIDE=""
cuda_plan() {
  if [ -n "$ARCH_OVERRIDE" ]; then
    CUDA_ARCHS=$ARCH_OVERRIDE
  elif [ -n "$GPU_ARCHS" ]; then
    CUDA_ARCHS=$GPU_ARCHS
  else
    CUDA_ARCHS=native   # no nvidia-smi to ask: let nvcc look at the card (needs it present)
  fi
  if find_system_toolkit; then
    TK_NOTE="system CUDA toolkit $TK_ROOT"
    return 0
  fi
  local blocker
  blocker=$(pypi_toolkit_blocker)
  if [ -n "$blocker" ]; then
    TK_NOTE="$TK_NOTE; $blocker"
    return 1
  fi
  TK_KIND=pypi
  TK_ROOT="$(py_site)/nvidia/cu13"
  TK_NVCC="$TK_ROOT/bin/nvcc"
  TK_ID="pypi:$CUDA_PYPI_SPEC"
  TK_NOTE="$TK_NOTE: CUDA compiler from PyPI into this venv ($CUDA_PYPI_SPEC)"
}

cuda_key_args() {
  local a
  a="$(cpu_args) -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHS"
  # no driver library to link (a build-only machine): ggml-cuda without the VMM pool
  find_libcuda >/dev/null || a="$a -DGGML_CUDA_NO_VMM=ON"
  echo "$a"
}

cuda_toolkit_args() {
  local a="-DCMAKE_CUDA_COMPILER=$TK_NVCC -DCUDAToolkit_ROOT=$TK_ROOT"
  [ "$TK_KIND" = pypi ] && a="$a -DCMAKE_LIBRARY_PATH=$("$PY" -c 'import sys; print(sys.prefix)')/tandem-cuda-link"
  echo "$a"
}

with_rpc() {
  case " $1 " in
    *" -DGGML_RPC="*) echo "$1" ;;
    *) echo "$1 -DGGML_RPC=ON" ;;
  esac
}

# ---- cache, build, install -----------------------------------------------------------

CACHE_ROOT="${TANDEM_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tandem/wheels}"
PYVER=""

# The flags name the backend (-DGGML_CUDA=ON, -DGGML_METAL=ON, neither for the CPU) and the
# CUDA compiler is appended, so each backend has its own wheel; a CPU key is what it was
# before backends were detected, so existing CPU wheels stay valid.
cache_key() {  # FLAGS [TOOLKIT_ID]
  printf '%s|%s|%s' "$VERSION" "$1${2:+ |$2}" "$PYVER" | sha256 | cut -c1-16
}

installed_key() {
  "$PY" - <<'PYEOF' 2>/dev/null || true
import importlib.metadata as md, pathlib
try:
    d = md.distribution("llama_cpp_python")
    p = pathlib.Path(d.locate_file("llama_cpp/.tandem_build_key"))
    print(p.read_text().strip() if p.exists() else "")
except md.PackageNotFoundError:
    print("")
PYEOF
}

# The line of a failed build that says what went wrong: the last compiler or linker error
# ("fatal error: ...", "ld: cannot find -lcublas"), else CMake's own message.
build_cause() {
  local log=$1 line
  line=$(grep -E '(fatal error|error:| error |cannot find|No such file|undefined reference)' "$log" 2>/dev/null \
    | grep -vE 'subprocess-exited-with-error|Failed building wheel|failed-wheel-build|Failed to build|ERROR: Could not build|collect2: error: ld returned|^ *(note|hint):|ninja: build stopped|exited with|Error [0-9]+$|CMake Error' \
    | tail -1 | sed 's/^ *//' || true)
  if [ -z "$line" ]; then
    line=$(grep -E -A1 -m1 '^ *CMake Error' "$log" 2>/dev/null | tail -1 | sed 's/^ *//' || true)
  fi
  [ -n "$line" ] || line="pip wheel failed (log: $log)"
  echo "${line:0:300}"
}

# The source distribution, downloaded once into the set-up's cache and built from there: the
# test command also unpacks llama.cpp's own server tests from it (tests/engine/serving/test_peer_llama_server.py).
SDIST_DIR="${TANDEM_SDIST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tandem/sdist}"
SDIST=""
fetch_sdist() {  # sets SDIST, or false with the cause in CAUSE
  local f="$SDIST_DIR/llama_cpp_python-$VERSION.tar.gz" tmp log
  if [ -s "$f" ]; then SDIST=$f; return 0; fi
  mkdir -p "$SDIST_DIR"
  tmp="$SDIST_DIR/.partial.$$"; log="$SDIST_DIR/download.log"
  rm -rf "$tmp"; mkdir -p "$tmp"
  say "Downloading the llama-cpp-python $VERSION source into $SDIST_DIR (once)..."
  if "$PY" -m pip download --no-deps --no-binary :all: -d "$tmp" "llama-cpp-python==$VERSION" >"$log" 2>&1 \
      && [ -s "$tmp/llama_cpp_python-$VERSION.tar.gz" ]; then
    mv "$tmp/llama_cpp_python-$VERSION.tar.gz" "$f"; rm -rf "$tmp"
    SDIST=$f; return 0
  fi
  rm -rf "$tmp"
  CAUSE="could not download the llama-cpp-python $VERSION source: $(grep -E 'ERROR|error' "$log" | tail -1 | cut -c1-200) (log: $log)"
  return 1
}

# build_wheel KEY ARGS LABEL: the wheel into the cache, or false with the cause in CAUSE.
CAUSE="" PARTIAL=""
trap '[ -z "$PARTIAL" ] || rm -rf "$PARTIAL"' EXIT   # an interrupted build leaves no half wheel
build_wheel() {
  local key=$1 args=$2 label=$3 dir="$CACHE_ROOT/$1" log="$CACHE_ROOT/$1.log" tmp
  if ls "$dir"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1; then return 0; fi
  fetch_sdist || return 1
  mkdir -p "$CACHE_ROOT"
  tmp="$dir.partial.$$"
  rm -rf "$tmp"; mkdir -p "$tmp"
  PARTIAL=$tmp
  say "Building llama-cpp-python $VERSION for $label with CMAKE_ARGS=\"$args\" ($( [ "$label" = CPU ] && echo "about 7 minutes on 2 cores" || echo "longer than the CPU build" ), once; log: $log)..."
  if (CMAKE_ARGS="$args" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}" \
      "$PY" -m pip wheel --no-cache-dir --no-deps -w "$tmp" "$SDIST" 2>&1 | tee "$log") \
      && ls "$tmp"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1; then
    rm -rf "$dir"; mv "$tmp" "$dir"   # only a finished wheel enters the cache
    return 0
  fi
  CAUSE=$(build_cause "$log")
  rm -rf "$tmp"
  return 1
}

install_wheel() {
  local key=$1 args=$2
  "$PY" -m pip install -q --force-reinstall --no-deps "$CACHE_ROOT/$key"/llama_cpp_python-"$VERSION"-*.whl
  "$PY" - "$key" <<'PYEOF'
import importlib.metadata as md, pathlib, sys
d = md.distribution("llama_cpp_python")
pathlib.Path(d.locate_file("llama_cpp/.tandem_build_key")).write_text(sys.argv[1] + "\n")
PYEOF
  say "llama-cpp-python $VERSION installed ($args)"
}

pip_names() { "$PY" -m pip list --format=freeze 2>/dev/null | cut -d= -f1 | tr 'A-Z_' 'a-z-' | sort; }

# Install the PyPI CUDA toolkit: the compiler too (compiler=1, to build) or the runtime
# libraries alone (compiler=0, for a cached wheel). On failure CAUSE says why. Sets ADDED to
# the packages this run added (so a fallback can take them out again).
ADDED=""
install_pypi_toolkit() {
  local compiler=$1 spec before after log lib
  if [ "$compiler" = 1 ]; then spec=$CUDA_PYPI_SPEC; else spec=$CUDA_PYPI_RUNTIME_SPEC; fi
  before=$(pip_names)
  log="$CACHE_ROOT/cuda-toolkit-pip.log"; mkdir -p "$CACHE_ROOT"
  if [ "$compiler" = 1 ]; then
    say "Installing the CUDA compiler into this venv from PyPI ($spec, about 1 GB once)..."
  else
    say "Installing the CUDA runtime libraries into this venv from PyPI ($spec, about 900 MB once)..."
  fi
  if ! "$PY" -m pip install -q "$spec" >"$log" 2>&1; then
    CAUSE="pip could not install $spec: $(grep -E 'ERROR|error' "$log" | tail -1 | cut -c1-200)"
    after=$(pip_names); ADDED=$(comm -13 <(echo "$before") <(echo "$after") | tr '\n' ' ')
    return 1
  fi
  after=$(pip_names); ADDED=$(comm -13 <(echo "$before") <(echo "$after") | tr '\n' ' ')
  for lib in $CUDA_PYPI_RUNTIME_LIBS; do
    [ -e "$TK_ROOT/lib/$lib" ] || { CAUSE="$lib not found under $TK_ROOT/lib after installing $spec"; return 1; }
  done
  [ "$compiler" = 1 ] || return 0
  [ -x "$TK_NVCC" ] || { CAUSE="nvcc not found at $TK_NVCC after installing $spec"; return 1; }
  has_cublas "$TK_ROOT" || { CAUSE="cublas_v2.h not found under $TK_ROOT after installing $spec"; return 1; }
}

remove_added() {
  [ -n "${ADDED// /}" ] || return 0
  "$PY" -m pip uninstall -y -q $ADDED >/dev/null 2>&1 || true
  rm -f "$(py_site)/nvidia/cu13/lib64"
  rm -rf "$("$PY" -c 'import sys; print(sys.prefix)')/tandem-cuda-link"
}

# ---- main ------------------------------------------------------------------------------

main() {
  local DRY_RUN=0
  if [ "${1:-}" = "--dry-run" ]; then DRY_RUN=1; shift; fi
  case "${1:-}" in -*) die "usage: install_llama_cpp.sh [--dry-run] [PYTHON]  (unknown option '$1')" ;; esac
  PY="${1:-python3}"
  PYVER=$("$PY" -c 'import sys;print(sys.version_info[:2])' 2>/dev/null) \
    || die "install_llama_cpp.sh: '$PY' is not a working Python"
  CPU_ARGS=$(with_rpc "$(cpu_args)")
  # checked here, not inside `if cuda_plan` where a failure would not stop the script
  if [ -n "${TANDEM_CUDA_ARCH:-}" ]; then ARCH_OVERRIDE=$(normalize_archs "$TANDEM_CUDA_ARCH") || exit 2; fi

  local KEY_ARGS TK_ARGS=""
  if [ -n "${CMAKE_ARGS:-}" ]; then
    BACKEND=custom; WHY="your CMAKE_ARGS win over detection"
    [ -n "${TANDEM_BACKEND:-}" ] && WHY="$WHY; TANDEM_BACKEND=$TANDEM_BACKEND ignored"
    KEY_ARGS=$(with_rpc "$CMAKE_ARGS")
  else
    choose_backend
    case "$BACKEND" in
      cpu) KEY_ARGS=$CPU_ARGS ;;
      metal) KEY_ARGS=$(with_rpc "$(metal_args)") ;;
      cuda)
        if cuda_plan; then
          KEY_ARGS=$(with_rpc "$(cuda_key_args)")
          TK_ARGS=$(cuda_toolkit_args)
          WHY="$WHY; compute capability $CUDA_ARCHS; $TK_NOTE"
        else
          WHY="CUDA wanted ($WHY) but ${TK_NOTE#; }. Retry after fixing that: TANDEM_BACKEND=cuda bash packaging/install_llama_cpp.sh $PY"
          BACKEND=cpu; KEY_ARGS=$CPU_ARGS
        fi ;;
    esac
  fi
  local ARGS="$KEY_ARGS${TK_ARGS:+ $TK_ARGS}"
  local KEY FAILED
  KEY=$(cache_key "$KEY_ARGS" "$TK_ID")
  FAILED="$CACHE_ROOT/$KEY.failed"

  if [ "$DRY_RUN" = 1 ]; then
    say "backend: $BACKEND ($WHY)"
    say "CMAKE_ARGS=\"$ARGS\""
    if ls "$CACHE_ROOT/$KEY"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1; then
      say "wheel: cached in $CACHE_ROOT/$KEY"
    else
      say "wheel: would be built into $CACHE_ROOT/$KEY"
    fi
    [ "$TK_KIND" = pypi ] && say "toolkit: would install $CUDA_PYPI_SPEC into $(py_site)"
    [ -f "$FAILED" ] && say "note: this build failed before ($(cat "$FAILED")); a plain set-up uses the CPU until TANDEM_BACKEND=$BACKEND asks again"
    return 0
  fi

  # A GPU build that failed before is not retried on every set-up, only when asked (a wheel
  # that is cached after all, built by another venv, is used).
  if [ "$BACKEND" = cuda ] || [ "$BACKEND" = metal ]; then
    if [ -f "$FAILED" ] && [ "$EXPLICIT" = 0 ] && ! ls "$CACHE_ROOT/$KEY"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1; then
      WHY="the $BACKEND build failed before: $(cat "$FAILED"). Retry: TANDEM_BACKEND=$BACKEND bash packaging/install_llama_cpp.sh $PY"
      BACKEND=cpu; KEY_ARGS=$CPU_ARGS; ARGS=$CPU_ARGS; TK_KIND=""; TK_ID=""
      KEY=$(cache_key "$KEY_ARGS" "")
    else
      rm -f "$FAILED"
    fi
  fi
  say "llama.cpp backend: $BACKEND ($WHY)"

  if [ "$(installed_key)" = "$KEY" ]; then
    [ "$TK_KIND" = pypi ] && link_runtime_libs
    say "llama-cpp-python $VERSION already installed ($ARGS)"
    return 0
  fi

  # a source that cannot be downloaded is not a failed GPU build: stop here, remember nothing
  if ! ls "$CACHE_ROOT/$KEY"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1 && ! fetch_sdist; then
    echo "llama-cpp-python build failed: $CAUSE" >&2
    exit 1
  fi

  if [ "$BACKEND" = cuda ] || [ "$BACKEND" = metal ]; then
    local ok=1 cached=0
    ls "$CACHE_ROOT/$KEY"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1 && cached=1
    if [ "$TK_KIND" = pypi ]; then
      # a cached wheel needs only the runtime libraries; a build needs the compiler too
      if [ "$cached" = 1 ]; then install_pypi_toolkit 0 || ok=0
      else install_pypi_toolkit 1 || ok=0; fi
      if [ "$ok" = 1 ] && [ "$cached" = 0 ]; then make_link_dir "$TK_ROOT"; fi
    fi
    if [ "$ok" = 1 ]; then build_wheel "$KEY" "$ARGS" "$BACKEND" || ok=0; fi
    if [ "$ok" = 1 ]; then
      install_wheel "$KEY" "$KEY_ARGS"
      if [ "$TK_KIND" = pypi ]; then link_runtime_libs; fi
      rm -f "$FAILED"
      return 0
    fi
    mkdir -p "$CACHE_ROOT"; echo "$CAUSE" >"$FAILED"
    remove_added
    say "The $BACKEND build failed: $CAUSE -- falling back to the CPU build. Retry after fixing that: TANDEM_BACKEND=$BACKEND bash packaging/install_llama_cpp.sh $PY"
    BACKEND=cpu; KEY_ARGS=$CPU_ARGS; ARGS=$CPU_ARGS
    KEY=$(cache_key "$KEY_ARGS" "")
    if [ "$(installed_key)" = "$KEY" ]; then
      say "llama-cpp-python $VERSION already installed ($ARGS)"
      return 0
    fi
  fi

  if ! build_wheel "$KEY" "$ARGS" "$([ "$BACKEND" = cpu ] && echo CPU || echo "$BACKEND")"; then
    echo "llama-cpp-python build failed: $CAUSE" >&2
    exit 1
  fi
  install_wheel "$KEY" "$KEY_ARGS"
}

# Sourcing this file (tests) defines the functions without running anything.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
