#!/usr/bin/env bash
# An AppImage of a bundle directory (dist/tandem from `make package`): one file to download,
# `chmod +x`, and run on most x86-64 Linux desktops.
#
#   bash packaging/appimage.sh [BUNDLE_DIR] [OUT_DIR]     # `make appimage`; defaults: dist/tandem dist
#   APPIMAGE_RUNTIME=/path/to/runtime-x86_64 make appimage
#
# An AppImage is the AppImage runtime (a small static ELF that mounts or extracts what follows
# it) with a squashfs of an AppDir appended. The AppDir here: AppRun (runs the bundle, with
# the same commands as the .deb's `tandem`), tandem.desktop and tandem.png at the top (+
# .DirIcon), the bundle in usr/lib/tandem, the entry and icons in usr/share. mksquashfs comes
# from Debian's squashfs-tools.
#
# The runtime is the part no package registry ships: it is published only as the release
# asset `runtime-x86_64` of github.com/AppImage/type2-runtime. PyPI's appimage,
# python-appimage and appimage-builder, and npm's AppImage makers, all download it from there
# (or appimagetool, which fetches it in turn) while building. Give its path in
# APPIMAGE_RUNTIME (or put it at ~/.cache/tandem/appimage/runtime-x86_64); without it this
# builds the AppDir and the squashfs, and stops with exit 3 and one line saying so. The
# release workflow downloads it from there (a fixed release tag).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUNDLE="${1:-$ROOT/dist/tandem}"
OUT="${2:-$ROOT/dist}"
ARCH=$(uname -m)
RUNTIME="${APPIMAGE_RUNTIME:-${XDG_CACHE_HOME:-$HOME/.cache}/tandem/appimage/runtime-$ARCH}"
COMP="${APPIMAGE_COMP:-zstd}"   # what the type-2 runtime reads (appimagetool's default)

[ -x "$BUNDLE/tandem" ] || { echo "appimage.sh: $BUNDLE/tandem is not a bundle's executable (build one: make package)" >&2; exit 2; }
command -v mksquashfs >/dev/null 2>&1 || { echo "appimage.sh: mksquashfs not found (apt-get install squashfs-tools)" >&2; exit 2; }
if [ -n "${APPIMAGE_RUNTIME:-}" ] && [ ! -f "$RUNTIME" ]; then
  echo "appimage.sh: APPIMAGE_RUNTIME=$RUNTIME: no such file" >&2; exit 2
fi
if [ -f "$RUNTIME" ] && [ "$(head -c 11 "$RUNTIME" | tail -c 3 | od -An -tx1 | tr -d ' \n')" != 414902 ]; then
  # the ELF header's padding holds "AI" and the type, 2 (the AppImage specification)
  echo "appimage.sh: $RUNTIME is not an AppImage type-2 runtime (no 'AI' 0x02 at byte 8)" >&2; exit 2
fi

mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
APPDIR="$WORK/Tandem.AppDir"
mkdir -p "$APPDIR/usr/lib" "$APPDIR/usr/share/applications" "$APPDIR/usr/share/icons/hicolor/256x256/apps" \
  "$APPDIR/usr/share/icons/hicolor/scalable/apps"
cp -a "$BUNDLE" "$APPDIR/usr/lib/tandem"

cat >"$APPDIR/AppRun" <<'EOF'
#!/bin/sh
# Tandem's AppImage: no argument opens the window; `--self-test [MODEL.gguf]` checks the bundle;
# any other command (doctor, models, pull, serve, ...) is the command line, as `tandem` of the .deb.
HERE="$(dirname "$(readlink -f "$0")")"
BUNDLE="$HERE/usr/lib/tandem/tandem"
case "${1:-}" in
  "") exec "$BUNDLE" ;;
  app) shift; exec "$BUNDLE" "$@" ;;
  -*) exec "$BUNDLE" "$@" ;;
  *) exec "$BUNDLE" cli "$@" ;;
esac
EOF
chmod 755 "$APPDIR/AppRun"
# the desktop entry runs the AppImage itself (Exec is rewritten by desktop integrators)
sed 's/^Exec=.*/Exec=tandem/' "$ROOT/assets/tandem.desktop" > "$APPDIR/tandem.desktop"
cp "$APPDIR/tandem.desktop" "$APPDIR/usr/share/applications/tandem.desktop"
cp "$ROOT/assets/tandem.png" "$APPDIR/tandem.png"
cp "$ROOT/assets/tandem.png" "$APPDIR/usr/share/icons/hicolor/256x256/apps/tandem.png"
cp "$ROOT/assets/tandem.svg" "$APPDIR/usr/share/icons/hicolor/scalable/apps/tandem.svg"
ln -s tandem.png "$APPDIR/.DirIcon"

SQUASH="$OUT/Tandem-$ARCH.squashfs"
rm -f "$SQUASH"
mksquashfs "$APPDIR" "$SQUASH" -root-owned -noappend -comp "$COMP" -quiet -no-progress >/dev/null
if [ ! -f "$RUNTIME" ]; then
  echo "appimage.sh: the AppDir and $SQUASH are built, but not the AppImage: the AppImage runtime (runtime-$ARCH) is not here. It is published only as a release asset of github.com/AppImage/type2-runtime (no package registry ships it): download it, then APPIMAGE_RUNTIME=/path/to/runtime-$ARCH make appimage" >&2
  exit 3
fi
IMAGE="$OUT/Tandem-$ARCH.AppImage"
cat "$RUNTIME" "$SQUASH" > "$IMAGE.partial"
chmod 755 "$IMAGE.partial"
mv "$IMAGE.partial" "$IMAGE"
rm -f "$SQUASH"
echo "$IMAGE"
