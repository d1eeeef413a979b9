#!/usr/bin/env bash
# Shared set-up for run.sh and test.sh: a virtual environment with Tandem installed.
# Usage: source packaging/bootstrap.sh EXTRAS   (EXTRAS like "gui" or "gui,test")
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TANDEM_VENV:-$ROOT/.venv}"
EXTRAS="${1:-gui}"

find_python() {
  for py in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$py" ] || continue
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      echo "$py"; return 0
    fi
  done
  echo "Tandem needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)" >&2
  return 1
}

if [ ! -x "$VENV/bin/python" ]; then
  PY=$(find_python)
  echo "Creating virtual environment in $VENV with $PY"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi
PYV="$VENV/bin/python"

bash "$ROOT/packaging/install_llama_cpp.sh" "$PYV"

stamp="$VENV/.tandem-installed-$EXTRAS"
# reinstall when the declared dependencies or the row kernels' C source (setup.py compiles
# them into the checkout) changed, or the compiled kernels are missing
changed=""
if [ -f "$stamp" ]; then
  changed=$(find "$ROOT/pyproject.toml" "$ROOT/setup.py" "$ROOT/engine" \( -name pyproject.toml -o -name setup.py -o -name '*.c' \) \
    -newer "$stamp" | head -1)
fi
built=$(find "$ROOT/engine/decoding/sampling" -maxdepth 1 \( -name '_row_kernels.*.so' -o -name '_row_kernels.*.pyd' \) | head -1)
if [ ! -f "$stamp" ] || [ -n "$changed" ] || [ -z "$built" ]; then
  echo "Installing Tandem and its dependencies ($EXTRAS)..."
  "$PYV" -m pip install -q -e "$ROOT[$EXTRAS]"
  touch "$stamp"
fi
export PATH="$VENV/bin:$PATH"
