#!/usr/bin/env bash
# Build llama.cpp's own llama-bench from the llama-cpp-python sdist Tandem builds (same
# llama.cpp commit, same CMAKE_ARGS as packaging/install_llama_cpp.sh chooses for this
# machine), once, into ~/.cache/tandem/llama-bench/; prints the binary's path.
#
#   bash tools/llama_bench_build.sh [PYTHON]
#
# The peer for prompt reading (issue #47 item 4): `python -m tools.prefill_peer` runs it.
set -euo pipefail
PY=${1:-python}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VERSION="${LLAMA_CPP_VERSION:-0.3.36}"
SDIST="$HOME/.cache/tandem/sdist/llama_cpp_python-$VERSION.tar.gz"
ARGS=$(bash "$ROOT/packaging/install_llama_cpp.sh" --dry-run "$PY" | sed -n 's/^CMAKE_ARGS="\(.*\)"$/\1/p')
KEY=$(printf '%s %s' "$VERSION" "$ARGS" | sha256sum | cut -c1-16)
OUT="$HOME/.cache/tandem/llama-bench/$KEY"
BIN="$OUT/build/bin/llama-bench"
if [ -x "$BIN" ]; then echo "$BIN"; exit 0; fi
[ -f "$SDIST" ] || { echo "no llama-cpp-python sdist at $SDIST: run the README's set-up first" >&2; exit 2; }
mkdir -p "$OUT"
tar xzf "$SDIST" -C "$OUT"
SRC="$OUT/llama_cpp_python-$VERSION/vendor/llama.cpp"
# shellcheck disable=SC2086
cmake -S "$SRC" -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON $ARGS >"$OUT/configure.log" 2>&1 \
  || { echo "llama-bench: configure failed, see $OUT/configure.log" >&2; exit 2; }
cmake --build "$OUT/build" --target llama-bench -j "${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" >"$OUT/build.log" 2>&1 \
  || { echo "llama-bench: build failed, see $OUT/build.log" >&2; exit 2; }
echo "$BIN"
