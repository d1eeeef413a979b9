.PHONY: run test package package-host deb release-check
run:
	bash packaging/run.sh
test:
	bash packaging/test.sh
# a quick bundle of the dev venv's llama.cpp, built for this machine's CPU only (development)
package-host:
	bash packaging/bootstrap.sh gui,package >/dev/null
	.venv/bin/pyinstaller packaging/tandem.spec --noconfirm --distpath dist --workpath build/pyinstaller
	dist/tandem/tandem --self-test
# the bundle for any x86-64 CPU: llama.cpp with every CPU variant, chosen at start (packaging/portable.sh)
package:
	bash packaging/bootstrap.sh gui,package >/dev/null
	bash packaging/portable.sh
deb:
	bash packaging/deb.sh dist/tandem dist
# before a release: the portable bundle natively, on an emulated old CPU, and as an installed .deb
release-check:
	bash packaging/release_check.sh
