# The two commands of the README. Both do all the set-up they need on a fresh machine.
.PHONY: demo test setup test-busy test-cuda12

demo: setup
	.venv/bin/perfcore demo

test:
	./scripts/test.sh

setup:
	./scripts/setup.sh

# The suite while two CPU-bound processes keep both cores busy: tests must hold on a loaded machine.
test-busy:
	./scripts/test_busy.sh

# Colab's CUDA 12 stack without a GPU: torch 2.8.0+cu128 in its own cached venv, perfcore built in
# CUDA mode against a CUDA 12.4 toolkit assembled from Debian's and PyPI's packages, and the
# native, CUPTI and build tests run there (also against the real libcupti of 12.4 ... 13.0); then
# the tests that patch torch, on the CPU: torch 2.8 is the oldest torch perfcore supports.
test-cuda12:
	./scripts/test_cuda12.sh
