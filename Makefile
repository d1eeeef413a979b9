.PHONY: run test package package-host package-cuda deb appimage release-check
run:
	bash packaging/run.sh
test:
	bash packaging/test.sh
# a quick bundle of the dev venv's llama.cpp, built for this machine's CPU only (development)
package-host:
	bash packaging/bootstrap.sh gui,server,package >/dev/null
	.venv/bin/pyinstaller packaging/tandem.spec --noconfirm --distpath dist --workpath build/pyinstaller
	dist/tandem/tandem --self-test
# the bundle for any x86-64 CPU: llama.cpp with every CPU variant, chosen at start (packaging/portable.sh)
package:
	bash packaging/bootstrap.sh gui,server,package >/dev/null
	bash packaging/portable.sh
# the same bundle with llama.cpp's CUDA backend and runtime beside the CPU variants (packaging/cuda_backend.sh):
# used where the NVIDIA driver is, skipped with one line where not; TANDEM_CUDA_ARCH picks the cards
package-cuda:
	bash packaging/bootstrap.sh gui,server,package >/dev/null
	TANDEM_BUNDLE_CUDA=1 TANDEM_DIST=dist/cuda bash packaging/portable.sh
deb:
	bash packaging/deb.sh dist/tandem dist
# one file for most Linux desktops; needs the AppImage runtime (APPIMAGE_RUNTIME=..., see packaging/appimage.sh)
appimage:
	bash packaging/appimage.sh dist/tandem dist
# before a release: the portable bundle natively, on an emulated old CPU, and as an installed .deb
release-check:
	bash packaging/release_check.sh
