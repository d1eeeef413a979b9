.PHONY: run test
run:
	bash packaging/run.sh
test:
	bash packaging/test.sh
