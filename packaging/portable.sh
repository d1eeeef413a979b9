#!/usr/bin/env bash
# The portable bundle: dist/tandem/ with llama.cpp built to run on any x86-64 CPU.
#
#   bash packaging/portable.sh            # `make package`; needs the dev venv (make run / bootstrap.sh)
#   TANDEM_BUNDLE_CUDA=1 TANDEM_DIST=dist/cuda bash packaging/portable.sh   # `make package-cuda`: + the CUDA backend
#
# The developer venv's llama.cpp is built for this machine's SIMD flags (install_llama_cpp.sh):
# on an older CPU it dies with SIGILL. This builds the same llama-cpp-python source a second
# time, into its own cached wheel (the dev venv is not touched), with every backend as a
# loadable library (GGML_BACKEND_DL) and the CPU backend in all its variants
# (GGML_CPU_ALL_VARIANTS: x64, sse42, sandybridge ... icelake, zen4); at start the llama.cpp seam
# (engine/llamacpp/backend_dl.py) calls ggml_backend_load_all_from_path, which picks the best
# variant for the CPU it runs on. The first build takes long (~14 CPU variants: about 30
# minutes on 2 cores); the wheel is cached like the dev venv's (~/.cache/tandem/wheels).
#
# Steps: the wheel (cached) -> its llama_cpp/lib unpacked into build/portable/llama_cpp/lib ->
# PyInstaller with LLAMA_CPP_LIB_PATH pointing there (tandem.spec bundles that folder instead of
# the venv's) -> checks: at least three CPU variants inside, the bundle's own --self-test.
# packaging/release_check.sh then proves it on an old CPU under qemu.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TANDEM_VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"
OUT="$ROOT/build/portable"
DIST="${TANDEM_DIST:-$ROOT/dist}"

[ -x "$PY" ] || { echo "portable.sh: no dev venv at $VENV (run: bash packaging/bootstrap.sh gui,server,package)" >&2; exit 2; }
"$PY" -c 'import PyInstaller' 2>/dev/null || { echo "portable.sh: PyInstaller missing (run: bash packaging/bootstrap.sh gui,server,package)" >&2; exit 2; }

# The wheel cache and build helpers of the dev set-up (sourcing defines them, runs nothing).
# shellcheck source=install_llama_cpp.sh
source "$ROOT/packaging/install_llama_cpp.sh"
PYVER=$("$PY" -c 'import sys;print(sys.version_info[:2])')

# The AMX kernels are left out of GGML_CPU_ALL_VARIANTS' set below (the sapphirerapids
# variant is removed after the build): VMs that report AMX without granting its tile state
# crash in the first matrix multiply (see install_llama_cpp.sh), and a bundle cannot know.
PORTABLE_ARGS="-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DCMAKE_INSTALL_BINDIR=llama_cpp/lib -DGGML_RPC=ON"
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64|Linux-aarch64) ;;
  *) echo "portable.sh: the portable CPU build is made on Linux x86-64/aarch64 here; macOS uses Metal, Windows MSVC (see .github/workflows/release.yml)" >&2; exit 2 ;;
esac
KEY=$(cache_key "$PORTABLE_ARGS" "portable")
if ! build_wheel "$KEY" "$PORTABLE_ARGS" "the portable bundle (all CPU variants)"; then
  echo "portable.sh: the portable llama.cpp build failed: $CAUSE" >&2
  exit 1
fi
WHEEL=$(ls "$CACHE_ROOT/$KEY"/llama_cpp_python-"$VERSION"-*.whl | head -1)

rm -rf "$OUT"; mkdir -p "$OUT"
"$PY" - "$WHEEL" "$OUT" <<'PYEOF'
import sys, zipfile
from pathlib import Path
wheel, out = sys.argv[1], Path(sys.argv[2])
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith("llama_cpp/lib/") and not name.endswith("/"):
            target = out / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(name))
PYEOF
LIB="$OUT/llama_cpp/lib"
rm -f "$LIB"/libggml-cpu-sapphirerapids.so
variants=$(ls "$LIB" | sed -n 's/^libggml-cpu-\(.*\)\.so$/\1/p' | paste -sd' ' -)
n=$(echo "$variants" | wc -w)
[ "$n" -ge 3 ] || { echo "portable.sh: only $n CPU variants in the build ($variants): is GGML_CPU_ALL_VARIANTS honoured?" >&2; exit 1; }
echo "portable llama.cpp: $n CPU variants ($variants)"
# the GPU bundle (make package-cuda): the CUDA backend as one more loadable library, with its runtime
if [ "${TANDEM_BUNDLE_CUDA:-0}" = 1 ]; then
  bash "$ROOT/packaging/cuda_backend.sh" "$LIB"
fi

LLAMA_CPP_LIB_PATH="$LIB" "$PY" -m PyInstaller "$ROOT/packaging/tandem.spec" --noconfirm --distpath "$DIST" \
  --workpath "$ROOT/build/pyinstaller-portable" --log-level WARN
inside=$(ls "$DIST/tandem/_internal/llama_cpp/lib" | grep -c '^libggml-cpu-.*\.so$' || true)
[ "$inside" -ge 3 ] || { echo "portable.sh: the bundle holds $inside CPU variants, expected $n" >&2; exit 1; }
"$DIST/tandem/tandem" --self-test
if [ "${TANDEM_BUNDLE_CUDA:-0}" = 1 ]; then
  # loaded where the driver is, else one line saying why not (and the CPU variants serve)
  line=$("$DIST/tandem/tandem" cli doctor 2>&1 | grep -E "CUDA backend (loaded|not used: )" || true)
  [ -n "$line" ] || { echo "portable.sh: tandem doctor names no CUDA backend in $DIST/tandem" >&2; exit 1; }
  echo "${line#"${line%%[![:space:]]*}"}"
fi
echo "portable bundle: $DIST/tandem ($inside CPU variants); prove it on an old CPU: bash packaging/release_check.sh"
