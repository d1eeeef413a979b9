#!/usr/bin/env bash
# Build (once) and install llama-cpp-python into the given Python environment.
#
# Why not a plain `pip install llama-cpp-python`: its default CPU build uses
# -march=native, which on Sapphire Rapids turns on ggml's AMX kernels; in VMs that do not
# grant AMX tile state (Firecracker, many clouds) the first matrix multiply segfaults.
# We build with GGML_NATIVE=OFF and switch on exactly the SIMD sets this CPU reports,
# never AMX. pip's wheel cache ignores CMAKE_ARGS, so we keep our own wheel cache keyed
# by the flags: a rebuild happens only when the flags or the version change.
#
# GPU builds: set CMAKE_ARGS yourself and it is used as is, for example
#   CMAKE_ARGS="-DGGML_CUDA=on" bash packaging/install_llama_cpp.sh .venv/bin/python   (NVIDIA)
#   CMAKE_ARGS="-DGGML_METAL=on" ...                                                  (Apple, default on macOS)
#
# Every build (CPU, CUDA, Metal, or your own CMAKE_ARGS) also gets -DGGML_RPC=ON, so the
# wheel ships libggml-rpc: `tandem worker` serves this host's devices over TCP and
# `--rpc HOST:PORT` splits a target across hosts. It is part of the cache key.
set -euo pipefail

PY="${1:-python3}"
VERSION="${LLAMA_CPP_VERSION:-0.3.36}"

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
    args="-DGGML_METAL=ON"
  fi
  echo "$args"
}

ARGS="${CMAKE_ARGS:-$(cpu_args)}"
case " $ARGS " in
  *" -DGGML_RPC="*) ;;
  *) ARGS="$ARGS -DGGML_RPC=ON" ;;
esac
KEY=$(printf '%s|%s|%s' "$VERSION" "$ARGS" "$("$PY" -c 'import sys;print(sys.version_info[:2])')" | sha256sum | cut -c1-16)
CACHE="${TANDEM_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tandem/wheels}/$KEY"

installed_key=$("$PY" - <<'PYEOF' 2>/dev/null || true
import importlib.metadata as md, pathlib
try:
    d = md.distribution("llama_cpp_python")
    p = pathlib.Path(d.locate_file("llama_cpp/.tandem_build_key"))
    print(p.read_text().strip() if p.exists() else "")
except md.PackageNotFoundError:
    print("")
PYEOF
)
if [ "$installed_key" = "$KEY" ]; then
  echo "llama-cpp-python $VERSION already installed ($ARGS)"
  exit 0
fi

mkdir -p "$CACHE"
if ! ls "$CACHE"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1; then
  echo "Building llama-cpp-python $VERSION with CMAKE_ARGS=\"$ARGS\" (about 7 minutes on 2 cores, once)..."
  CMAKE_ARGS="$ARGS" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}" \
    "$PY" -m pip wheel --no-cache-dir --no-deps -w "$CACHE" "llama-cpp-python==$VERSION"
fi
"$PY" -m pip install --force-reinstall --no-deps "$CACHE"/llama_cpp_python-"$VERSION"-*.whl
"$PY" - "$KEY" <<'PYEOF'
import importlib.metadata as md, pathlib, sys
d = md.distribution("llama_cpp_python")
pathlib.Path(d.locate_file("llama_cpp/.tandem_build_key")).write_text(sys.argv[1] + "\n")
PYEOF
echo "llama-cpp-python $VERSION installed ($ARGS)"
