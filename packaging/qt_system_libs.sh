#!/usr/bin/env bash
# Qt needs a few system libraries that minimal Debian/Ubuntu images lack (EGL, fontconfig,
# xkbcommon, and the xcb ones for a real window). Install them with apt when they are
# missing and we may (root, or passwordless sudo); otherwise say what to install.
set -uo pipefail
[ "$(uname -s)" = "Linux" ] || exit 0
command -v apt-get >/dev/null 2>&1 || exit 0
PKGS="libegl1 libgl1 libfontconfig1 libxkbcommon0 libxkbcommon-x11-0 libdbus-1-3 libglib2.0-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 libxcb-shape0 libxcb-xinerama0 libxcb-randr0 libxcb-xkb1 libxrender1 libxi6"
missing=""
for p in $PKGS; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -n "$missing" ] || exit 0
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "Qt needs these system packages:$missing  (sudo apt-get install$missing)" >&2
    exit 1
  fi
fi
echo "Installing Qt's system libraries:$missing" >&2
$SUDO apt-get install -y -q $missing >/dev/null 2>&1 || { $SUDO apt-get update -q >/dev/null 2>&1 && $SUDO apt-get install -y -q $missing >/dev/null 2>&1; }
