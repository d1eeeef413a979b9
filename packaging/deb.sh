#!/usr/bin/env bash
# A Debian package of a bundle directory (dist/tandem from `make package`).
#
#   bash packaging/deb.sh [BUNDLE_DIR] [OUT_DIR] [VERSION]    # `make deb`; defaults: dist/tandem dist <pyproject version>
#
# Layout: the bundle in /opt/tandem; /usr/bin/tandem, the same commands as the pip-installed
# CLI (`tandem`, `tandem app`: the window; `tandem --self-test [MODEL.gguf]`; `tandem doctor` and
# every other command: the bundle's `cli`); the desktop entry and the icon in /usr/share. No
# maintainer scripts: models (the Hugging Face cache) and history (the user data folder) live
# in each user's home, which dpkg never touches, so removing or purging the package leaves them.
# Only dpkg-deb is needed (no root: file ownership is set with --root-owner-group).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUNDLE="${1:-$ROOT/dist/tandem}"
OUT="${2:-$ROOT/dist}"
VERSION="${3:-$(sed -n 's/^version *= *"\(.*\)"/\1/p' "$ROOT/pyproject.toml" | head -1)}"

command -v dpkg-deb >/dev/null 2>&1 || { echo "deb.sh: dpkg-deb not found (apt-get install dpkg)" >&2; exit 2; }
[ -x "$BUNDLE/tandem" ] || { echo "deb.sh: $BUNDLE/tandem is not a bundle's executable (build one: make package)" >&2; exit 2; }
[[ "$VERSION" =~ ^[0-9][A-Za-z0-9.+~-]*$ ]] || { echo "deb.sh: '$VERSION' is not a Debian version (like 0.1.0)" >&2; exit 2; }
case "$(uname -m)" in
  x86_64) ARCH=amd64 ;;
  aarch64) ARCH=arm64 ;;
  *) ARCH=$(uname -m) ;;
esac
ARCH="${TANDEM_DEB_ARCH:-$ARCH}"

STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
PKG="$STAGE/tandem"
mkdir -p "$PKG/DEBIAN" "$PKG/opt" "$PKG/usr/bin" "$PKG/usr/share/applications" \
  "$PKG/usr/share/icons/hicolor/256x256/apps" "$PKG/usr/share/icons/hicolor/scalable/apps" "$PKG/usr/share/doc/tandem"
cp -a "$BUNDLE" "$PKG/opt/tandem"

# found relative to itself, so the package also works installed under dpkg --root/--instdir
cat >"$PKG/usr/bin/tandem" <<'EOF'
#!/bin/sh
# Tandem, installed from its .deb: `tandem` or `tandem app` opens the window, any other command
# (doctor, models, pull, generate, serve, ...) is the command line.
BUNDLE="$(dirname "$(readlink -f "$0")")/../../opt/tandem/tandem"
case "${1:-}" in
  "") exec "$BUNDLE" ;;
  app) shift; exec "$BUNDLE" "$@" ;;
  --self-test) exec "$BUNDLE" "$@" ;;
  *) exec "$BUNDLE" cli "$@" ;;
esac
EOF
chmod 755 "$PKG/usr/bin/tandem"
cp "$ROOT/assets/tandem.desktop" "$PKG/usr/share/applications/tandem.desktop"
cp "$ROOT/assets/tandem.png" "$PKG/usr/share/icons/hicolor/256x256/apps/tandem.png"
[ -f "$ROOT/assets/tandem.svg" ] && cp "$ROOT/assets/tandem.svg" "$PKG/usr/share/icons/hicolor/scalable/apps/tandem.svg"
cat >"$PKG/usr/share/doc/tandem/copyright" <<'EOF'
Tandem: local speculative decoding on llama.cpp. The bundle carries llama.cpp (MIT),
llama-cpp-python (MIT), Qt for Python (LGPLv3) and Python (PSF); see /opt/tandem/_internal.
EOF

size=$(du -sk "$PKG" | cut -f1)
cat >"$PKG/DEBIAN/control" <<EOF
Package: tandem
Version: $VERSION
Section: utils
Priority: optional
Architecture: $ARCH
Maintainer: Tandem developers <tandem@localhost>
Installed-Size: $size
Depends: libc6, libgl1, libegl1, libfontconfig1, libxkbcommon0, libdbus-1-3
Description: local speculative decoding on llama.cpp
 A desktop app and command line: a small draft model proposes tokens, a large
 target model checks them in one pass. llama.cpp is built for every x86-64 CPU
 (the best kernels are chosen at start). Models and history stay in your home
 folder when the package is removed.
EOF

mkdir -p "$OUT"
DEB="$OUT/tandem_${VERSION}_${ARCH}.deb"
dpkg-deb --root-owner-group -Zxz --build "$PKG" "$DEB" >/dev/null
echo "$DEB"
