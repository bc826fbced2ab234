# The two commands of the README. Both do all the set-up they need on a fresh machine.
.PHONY: demo test setup test-busy

demo: setup
	.venv/bin/perfcore demo

test:
	./scripts/test.sh

setup:
	./scripts/setup.sh

# The suite while two CPU-bound processes keep both cores busy: tests must hold on a loaded machine.
test-busy:
	./scripts/test_busy.sh
