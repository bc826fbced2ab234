# The two commands of the README. Both do all the set-up they need on a fresh machine.
.PHONY: demo test setup

demo: setup
	.venv/bin/perfcore demo

test:
	./scripts/test.sh

setup:
	./scripts/setup.sh
