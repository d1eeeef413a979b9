#!/usr/bin/env bash
# Measure Tandem on a lent GPU machine (the device tool: no package registry there, 10 minutes
# a call, 15 a session), in one call.
#
#   bash packaging/gpu_bench.sh prepare [ARCH]   # here, once (~45 min on 2 cores): gpu-carry/ = llama.cpp built
#                                               # for CUDA compute capability ARCH (default 90: H100/H200) with
#                                               # PyPI's CUDA 13 compiler, the trimmed llama-cpp-python sdist, and
#                                               # the pure-Python wheels Tandem needs beyond the machine's image
#   run (device tool), carry=["gpu-carry"]:  bash packaging/gpu_bench.sh device
#
# `device` works through stages, each bounded by what is left of TANDEM_GPU_BUDGET_S (default
# 540 s), each writing its results under $OUT at once:
#   1. env.txt: the card, driver, nvcc, CPU, and `tandem doctor` there (log.txt: every tool's output);
#   2. llama.cpp: the carried CUDA build (libcublas/libcudart from the machine's own CUDA
#      wheels); when it cannot use the GPU, it stops there with what a second call needs;
#   3. probe.json: 1.5B- and 0.5B-shaped random Q4_K_M models (the default pair's shapes; random
#      weights make acceptance meaningless, not costs): verify curve, draft step, target alone
#      greedy and sampled, the self-draft ceiling and whether it wrote the target's own tokens;
#   4. host-gpu.json: tools/host_overhead.py with every layer on the GPU (tiny models, 320 and
#      151,936-token vocabularies: Tandem's host work above a ctypes llama_decode loop);
#   4b. cpu-curve.json: the same models' verify curve on this machine's CPU cores (many-core CPUs);
#   5. the engine's exactness tests, run on the GPU build (in log.txt);
#   6. setup-build.txt: the set-up's own choice and build on this machine
#      (install_llama_cpp.sh --dry-run, then the build when a system toolkit serves it);
#   7. probe-7b.json: the verify curve of a 7B-shaped target with the same draft, when 200 s are left.
# Rehearse it on a machine without a GPU (tiny shapes, no build): TANDEM_GPU_REHEARSE=1 with a
# gpu-carry/ whose llama_cpp-cuda*.tar.xz holds any llama.cpp build.
# docs/benchmarks.md section 4 carries the results; tools/draft_replay.py prices the real
# pair's recorded acceptance with the measured curve (predictions, labelled so).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CARRY="$ROOT/gpu-carry"
SDIST=llama_cpp_python-0.3.36

case "${1:-}" in
prepare)
  ARCH="${2:-90}"
  set -e
  mkdir -p "$CARRY"
  PY="$ROOT/.venv/bin/python"
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux2014_x86_64 -d "$CARRY" gguf platformdirs diskcache scikit-build-core pathspec packaging \
      pydantic pydantic-core annotated-types typing-inspection  # pydantic: tests/engine/decoding/sampling/test_grammar.py
  work=$(mktemp -d)
  "$PY" -m pip download -q --no-deps --no-binary :all: -d "$work" "llama-cpp-python==0.3.36"
  tar xzf "$work/$SDIST.tar.gz" -C "$work"
  # not needed to build: the vendored llama.cpp's git pack, models, docs, tests, web UI (~70 of ~77 MB)
  rm -rf "$work/$SDIST"/.git "$work/$SDIST"/vendor/llama.cpp/{models,docs,media,benches,examples,tests,tools/ui}
  tar czf "$CARRY/$SDIST.tar.gz" -C "$work" "$SDIST"
  # llama.cpp for CUDA, built here without a GPU: PyPI's compiler in a throwaway venv, CPU
  # flags any x86-64-v3 machine runs (the device's CPU is not this one), no VMM pool (no driver here)
  python3 -m venv "$work/venv"
  "$work/venv/bin/pip" install -q "cuda-toolkit[nvcc,cudart,cublas,cccl]==13.0.*" scikit-build-core
  tk=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')/nvidia/cu13
  [ -e "$tk/lib64" ] || ln -s lib "$tk/lib64"
  mkdir -p "$work/link"
  for l in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do ln -sf "$tk/lib/$l" "$work/link/${l%.13}"; done
  PATH="$tk/bin:$PATH" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON \
    -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
    -DGGML_AMX_BF16=OFF -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=$ARCH -DGGML_CUDA_NO_VMM=ON \
    -DCMAKE_CUDA_COMPILER=$tk/bin/nvcc -DCUDAToolkit_ROOT=$tk -DCMAKE_LIBRARY_PATH=$work/link -DGGML_RPC=ON" \
    "$work/venv/bin/pip" wheel -q --no-deps --no-build-isolation -w "$work/wheel" "$work/$SDIST"
  # the wheel holds each library three times (soname links as copies): keep one, link the rest
  mkdir -p "$work/site" && (cd "$work/site" && python3 -m zipfile -e "$work"/wheel/*.whl .)
  (cd "$work/site/llama_cpp/lib" && for f in *.so.*.*; do b=${f%%.so.*}.so
     for l in "$b" "$b".*; do [ "$l" != "$f" ] && [ -f "$l" ] && { rm -f "$l"; ln -s "$f" "$l"; }; done; done)
  (cd "$work/site" && tar cf - llama_cpp llama_cpp_python-*.dist-info | xz -6 -T0 > "$CARRY/llama_cpp-cuda$ARCH.tar.xz")
  rm -rf "$work"
  du -sh "$CARRY"/*
  ;;
device)
  OUT="${OUT:-$ROOT/gpu-out}"; mkdir -p "$OUT"
  BUDGET="${TANDEM_GPU_BUDGET_S:-540}"; T0=$(date +%s)
  left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
  say() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$OUT/steps.txt"; }
  export PYTHONUNBUFFERED=1
  PY=$(command -v python3)
  # 1. the machine
  { nvidia-smi; nvcc --version; lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Socket|Flags' | cut -c1-300; "$PY" -V
    "$PY" -c 'import numpy; print("numpy", numpy.__version__)'; } > "$OUT/env.txt" 2>&1
  say "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1); $(nproc) CPUs"
  # 2. Python packages and llama.cpp
  SITE=/tmp/tandem-site; mkdir -p "$SITE"
  "$PY" -m pip install -q --no-index --no-deps --target "$SITE" "$CARRY"/gguf-*.whl "$CARRY"/platformdirs-*.whl "$CARRY"/diskcache-*.whl
  "$PY" -c 'import pydantic' 2>/dev/null || "$PY" -m pip install -q --no-index --no-deps --target "$SITE" \
      "$CARRY"/pydantic*.whl "$CARRY"/annotated_types-*.whl "$CARRY"/typing_inspection-*.whl
  tar xJf "$CARRY"/llama_cpp-cuda*.tar.xz -C "$SITE"
  # the image's own CUDA 13 runtime and cuBLAS: its Python's nvidia wheels, else a toolkit
  libs=$("$PY" - <<'PYEOF'
import glob, os
roots = []
try:
    import nvidia
    roots += [os.path.join(p, "*", "lib") for p in nvidia.__path__] + [os.path.join(p, "*", "*", "lib") for p in nvidia.__path__]
except ImportError:
    pass
roots += ["/usr/local/cuda*/lib64", "/usr/local/cuda*/targets/*/lib", "/usr/lib/x86_64-linux-gnu"]
found = []
for lib in ("libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13"):
    hit = next((h for r in roots for h in sorted(glob.glob(os.path.join(r, lib)))), None)
    if hit and os.path.dirname(hit) not in found:
        found.append(os.path.dirname(hit))
print(":".join(found) + (":" if found else ""))
PYEOF
)
  export LD_LIBRARY_PATH="${libs}${LD_LIBRARY_PATH:-}" PYTHONPATH="$SITE:$ROOT"
  say "CUDA libraries from: ${libs:-none found}"
  # the row kernels (engine/decoding/sampling/_row_kernels.c): the working tree carries their source,
  # not a build; setuptools builds them in place, else the machine's C compiler directly
  if ! (cd "$ROOT" && "$PY" setup.py -q build_ext --inplace) >> "$OUT/log.txt" 2>&1; then
    cc -O3 -fno-trapping-math -shared -fPIC -I"$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" \
       "$ROOT/engine/decoding/sampling/_row_kernels.c" \
       -o "$ROOT/engine/decoding/sampling/_row_kernels$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')" >> "$OUT/log.txt" 2>&1
  fi
  if "$PY" -c 'import engine.decoding.sampling._row_kernels' >> "$OUT/log.txt" 2>&1; then say "row kernels built"
  else say "the row kernels did not build there (no C compiler or Python headers?): the engine cannot run; see log.txt"; exit 1; fi
  # a GPU build that also finds the card (a CUDA build without a usable driver runs on the CPU)
  offload() { "$PY" - <<'PYEOF'
import sys
import llama_cpp
from engine.llamacpp.ggml_devices import device_info, local_devices
devs = [device_info(d) for d in local_devices()]
print(llama_cpp.llama_print_system_info().decode(), devs)
sys.exit(0 if llama_cpp.llama_supports_gpu_offload() and any(d[2] == "GPU" for d in devs) else 1)
PYEOF
  }
  SHAPES=(qwen1.5b qwen0.5b); XDIST=(-n 8)
  "$PY" -c 'import xdist' 2>/dev/null || XDIST=()
  if [ -n "${TANDEM_GPU_REHEARSE:-}" ]; then
    SHAPES=(tiny tiny); offload() { :; }; touch "$OUT/setup-build.txt"
  fi
  if ! offload >> "$OUT/steps.txt" 2>&1; then
    # stop early, with what a second call needs to know (a lease cannot afford a blind build)
    { ldd "$SITE"/llama_cpp/lib/libggml-cuda.so; ls -la "$SITE"/llama_cpp/lib; nvidia-smi -L
      ls /usr/local/cuda*/lib64 2>&1 | grep -E 'cublas|cudart'; } >> "$OUT/steps.txt" 2>&1
    say "the carried build cannot use the GPU here: see steps.txt"; exit 1
  fi
  { echo "== tandem doctor"; "$PY" -m engine.cli.main doctor; } >> "$OUT/env.txt" 2>&1; say "tandem doctor: see env.txt"
  # 3. the default pair's shapes
  say "probe: ${SHAPES[0]} target, ${SHAPES[1]} draft, Q4_K_M"
  timeout "$(( $(left) - 200 ))" "$PY" -m tools.gpu_probe --target-shape "${SHAPES[0]}" --draft-shape "${SHAPES[1]}" \
      --dir /tmp/tandem-gpu-models --tokens 128 --alphas "code:0.9,chat:0.75" --out "$OUT/probe.json" \
      > "$OUT/log.txt" 2>&1; say "probe: exit $?"
  # 4. host work above llama.cpp's floor, every layer on the GPU
  timeout "$(( $(left) - 140 ))" "$PY" -m tools.host_overhead --gpu-layers -1 --reps 3 --tokens 200 \
      --json "$OUT/host-gpu.json" >> "$OUT/log.txt" 2>&1; say "host overhead: exit $?"
  # 4b. many cores: the same pair's verify curve on this machine's CPU (llama.cpp's default OpenMP build)
  timeout "$(( $(left) - 120 ))" "$PY" -m tools.gpu_probe --target-shape "${SHAPES[0]}" --draft-shape "${SHAPES[1]}" \
      --dir /tmp/tandem-gpu-models --gpu-layers 0 --curve-only --alphas "code:0.9" --out "$OUT/cpu-curve.json" \
      >> "$OUT/log.txt" 2>&1; say "CPU curve: exit $?"
  # 5. exactness on the GPU build
  (cd "$ROOT" && timeout "$(( $(left) - 60 ))" "$PY" -m pytest -q -p no:cacheprovider --continue-on-collection-errors "${XDIST[@]}" --timeout 120 \
      tests/engine/decoding/test_decoder.py tests/engine/decoding/drafting/test_lookup_drafter.py tests/engine/decoding/sampling/test_sampling.py tests/engine/decoding/sampling/test_lazy_dist.py \
      tests/engine/decoding/sampling/test_grammar.py tests/engine/decoding/drafting/test_lookahead.py tests/engine/serving/tools/test_forced_calls.py > /tmp/pytest.txt 2>&1)
  say "exactness tests: exit $? ($(tail -1 /tmp/pytest.txt))"; { echo "== pytest"; cat /tmp/pytest.txt; } >> "$OUT/log.txt"
  # 6. what the set-up itself does here, and how long its build takes (as long as time lasts)
  if [ ! -e "$OUT/setup-build.txt" ] && [ "$(left)" -gt 30 ]; then
    # a venv for the set-up to install into, seeing the image's packages (numpy, ...) through a .pth
    python3 -m venv /tmp/tv && "$PY" -c 'import site; print("\n".join(site.getsitepackages()))' \
      > "$(/tmp/tv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/image-site.pth"
    export PIP_NO_INDEX=1 PIP_FIND_LINKS="$CARRY" TANDEM_WHEEL_CACHE=/tmp/tandem-wheels CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)"
    { bash "$ROOT/packaging/install_llama_cpp.sh" --dry-run /tmp/tv/bin/python | tee /tmp/dry.txt
      # a toolkit from PyPI cannot be installed here (no registry): the choice is the result then
      if grep -q 'toolkit: would install' /tmp/dry.txt; then echo "set-up build: not run (it would fetch the CUDA toolkit from PyPI)"
      else
        s=$(date +%s); timeout "$(( $(left) - 10 ))" bash "$ROOT/packaging/install_llama_cpp.sh" /tmp/tv/bin/python; rc=$?
        echo "set-up build: exit $rc after $(( $(date +%s) - s )) s"
      fi
      tail -c 3000 /tmp/tandem-wheels/*.log 2>/dev/null | grep -oE '\[[0-9]+/[0-9]+\]' | tail -1 | sed 's/^/last build step: /'
    } > "$OUT/setup-build.txt" 2>&1
    say "$(grep -E '^(llama.cpp backend|set-up build|last build step)' "$OUT/setup-build.txt" | tr '\n' ' ')"
  fi
  # 7. a 7B-shaped target (the size of llama.cpp's published curves), as long as time lasts
  if [ "$(left)" -gt 200 ] && [ -z "${TANDEM_GPU_REHEARSE:-}" ]; then
    timeout "$(( $(left) - 5 ))" "$PY" -m tools.gpu_probe --target-shape qwen7b --draft-shape qwen0.5b \
        --dir /tmp/tandem-gpu-models --curve-only --alphas "code:0.9" --out "$OUT/probe-7b.json" >> "$OUT/log.txt" 2>&1
    say "7B probe: exit $?"
  fi
  "$PY" - "$OUT" <<'PYEOF' | tee -a "$OUT/steps.txt"
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
p = out / "probe.json"
if p.exists():
    m = json.loads(p.read_text())
    v = m["verify_s"]
    print("verify ms:", " ".join(f"{n}:{float(s) * 1e3:.2f}" for n, s in v.items()))
    print(f"draft step {m['draft_step_s'] * 1e3:.2f} ms (ratio {m['draft_cost_ratio']:.2f}); target alone "
          f"{m['target_alone_tok_s']:.0f} tok/s greedy, {m['target_alone_sampled_tok_s']:.0f} sampled; "
          f"engine overhead {m['engine_overhead_s_per_step'] * 1e6:.0f} us/step")
    print("self-draft speedup measured/predicted:", {k: f"{s:.2f}/{m['self_draft_predicted_speedup'][k]:.2f}"
          for k, s in m["self_draft_speedup"].items()}, "first difference:", m["self_draft_first_difference"])
    print("free drafter that agrees, speedup:", {k: f"{s:.2f}" for k, s in m["free_agreeing_draft_speedup"].items()},
          "first difference:", m["free_agreeing_draft_first_difference"])
c = out / "cpu-curve.json"
if c.exists():
    m = json.loads(c.read_text())
    print("CPU verify ms:", " ".join(f"{n}:{float(s) * 1e3:.1f}" for n, s in m["verify_s"].items()),
          f"draft step {m['draft_step_s'] * 1e3:.1f} ms")
h = out / "host-gpu.json"
if h.exists():
    from tools.host_overhead import table  # PYTHONPATH holds the checkout
    print(table({int(k): v for k, v in json.loads(h.read_text())["results"].items()}))
PYEOF
  ;;
*)
  echo "usage: $0 prepare [ARCH] | device" >&2; exit 2 ;;
esac
