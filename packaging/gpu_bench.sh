#!/usr/bin/env bash
# Measure Tandem on a lent GPU machine (device tool; no package registry there).
#
#   bash packaging/gpu_bench.sh prepare     # here: fetch the llama-cpp-python sdist and wheels into gpu-carry/
#   run (device tool) with carry=["gpu-carry"]:
#       bash packaging/gpu_bench.sh device   # there: build as the set-up does (CUDA for the card found), write shape-realistic random
#                                            # models, measure, write $OUT/gpu.json
#
# What it measures (random weights make acceptance meaningless): target-alone tok/s of a
# 7B-shaped Q4_K_M target, a 0.5B-shaped draft's step time, the verify-cost curve, the
# engine's per-step overhead, and the ceiling with the target as its own draft. It then
# predicts speedups at acceptance rates measured on real pairs on the CPU — predictions,
# labelled as such in docs/benchmarks.md. Budget: ~4 min build + ~4 min models + ~2 min runs.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CARRY="$ROOT/gpu-carry"

case "${1:-}" in
prepare)
  mkdir -p "$CARRY"
  PY="$ROOT/.venv/bin/python"
  "$PY" -m pip download --no-deps --no-binary :all: -d "$CARRY" "llama-cpp-python==0.3.36"
  "$PY" -m pip download --only-binary :all: --python-version 3.11 --platform manylinux2014_x86_64 \
      -d "$CARRY" gguf jinja2 markupsafe platformdirs psutil scikit-build-core pathspec packaging diskcache typing-extensions
  # trim the sdist: the vendored llama.cpp's models/docs/media/tests are not needed to build
  cd "$CARRY" && sdist=$(ls llama_cpp_python-0.3.36.tar.gz) && mkdir -p t && tar xzf "$sdist" -C t && \
    rm -rf t/*/vendor/llama.cpp/{models,docs,media,tests,benches,examples} && \
    tar czf "$sdist" -C t . && rm -rf t
  du -sh "$CARRY"
  ;;
device)
  OUT="${OUT:-$ROOT/gpu-out}"
  mkdir -p "$OUT"
  python3 -m venv --system-site-packages /tmp/tv
  /tmp/tv/bin/pip install -q --no-index --find-links "$CARRY" gguf jinja2 platformdirs psutil scikit-build-core
  # The set-up's own choice, as a user's machine makes it: nvidia-smi -> CUDA for this card's
  # compute capability (sm_90 on an H200) with the machine's CUDA toolkit. No registry here:
  # pip takes the carried sdist and build requirements only (PyPI's CUDA compiler, ~1 GB,
  # cannot be carried, so a machine without a toolkit says so and this stops below).
  export PIP_NO_INDEX=1 PIP_FIND_LINKS="$CARRY" TANDEM_WHEEL_CACHE=/tmp/tandem-wheels CMAKE_BUILD_PARALLEL_LEVEL=16
  bash "$ROOT/packaging/install_llama_cpp.sh" --dry-run /tmp/tv/bin/python | tee "$OUT/backend.txt"
  bash "$ROOT/packaging/install_llama_cpp.sh" /tmp/tv/bin/python > "$OUT/build.log" 2>&1 || true
  grep -E '^(llama.cpp backend|The .* build failed|llama-cpp-python .* installed)' "$OUT/build.log" | tee -a "$OUT/backend.txt"
  /tmp/tv/bin/python -c 'import llama_cpp, sys; sys.exit(0 if llama_cpp.llama_supports_gpu_offload() else "this llama.cpp build cannot offload to the GPU: see " + sys.argv[1])' "$OUT/backend.txt"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" || true
  cd "$ROOT" && /tmp/tv/bin/python -m tools.gpu_probe --target-shape qwen7b --draft-shape qwen0.5b \
      --alphas "code_generation:0.9,chat:0.75,code_editing_lookup:0.8" --out "$OUT/gpu.json"
  ;;
*)
  echo "usage: $0 prepare|device" >&2; exit 2 ;;
esac
