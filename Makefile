.PHONY: run test package
run:
	bash packaging/run.sh
test:
	bash packaging/test.sh
package:
	bash packaging/bootstrap.sh gui,package >/dev/null
	.venv/bin/pyinstaller packaging/tandem.spec --noconfirm --distpath dist --workpath build/pyinstaller
	dist/tandem/tandem --self-test
