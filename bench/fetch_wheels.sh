#!/usr/bin/env bash
# Run here, where the network is: puts the wheels gpu_check.sh installs on a lent GPU machine
# (which has no network) into .whl/ (git-ignored; the device run carries it). cupti-python is
# pinned to the CUDA major.minor of this checkout's torch (the device's torch has the same CUDA),
# for the DEVICE's Python (DEVICE_PYTHON, default 3.12: the lent H200's), not this one's:
# `gpu_check.py --dry-run --plan-only` checks the tags. Its dependencies come with the device's torch.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
DEVICE_PYTHON=${DEVICE_PYTHON:-3.12}
cuda=$("$PY" -c "import torch; print(torch.version.cuda or '')")
if [ -z "$cuda" ]; then echo "fetch_wheels: this torch has no CUDA; nothing to fetch" >&2; exit 2; fi
mkdir -p .whl
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "$DEVICE_PYTHON" \
  --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux_2_28_x86_64 -d .whl "cupti-python==${cuda}.*"
ls -1 .whl
"$PY" bench/gpu_check.py --dry-run --plan-only --device-python "$DEVICE_PYTHON" >/dev/null \
  || "$PY" bench/gpu_check.py --dry-run --plan-only --device-python "$DEVICE_PYTHON" | grep "gpu_check --dry-run"
