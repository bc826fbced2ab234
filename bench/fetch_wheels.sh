#!/usr/bin/env bash
# Run here, where the network is: puts the wheels gpu_check.sh installs on a lent GPU machine
# (which has no network) into .whl/ (git-ignored; the device run carries it). cupti-python is
# pinned to the CUDA major.minor of this checkout's torch, for this Python; its dependencies
# other than the ones torch already brings (numpy, nvidia-cuda-cupti) come with it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
cuda=$("$PY" -c "import torch; print(torch.version.cuda or '')")
if [ -z "$cuda" ]; then echo "fetch_wheels: this torch has no CUDA; nothing to fetch" >&2; exit 2; fi
mkdir -p .whl
"$PY" -m pip download -q --no-deps --only-binary=:all: -d .whl "cupti-python==${cuda}.*" cuda-bindings cuda-pathfinder
ls -1 .whl
