#!/usr/bin/env bash
# The GPU check on a lent machine: build perfcore there for its own GPU only (its Python and
# torch, no network), then run bench/gpu_check.py, whose table says PASS/FAIL per row with the
# value that passes. Exit status: gpu_check.py's (0 all pass, 1 a row failed, 3 no GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
arch=$("$PY" -c "import torch; print('%d.%d' % torch.cuda.get_device_capability())" 2>/dev/null || true)
if [ -n "$arch" ]; then export TORCH_CUDA_ARCH_LIST="$arch"; fi  # one arch: a build of seconds, not minutes
"$PY" -m pip install -q --no-build-isolation --no-deps . 2>&1 | grep -v "^$" | tail -n 5
# The cupti-python cross-check needs the package matching torch's CUDA; without network this only
# works from a local wheel cache, and its row says so when the package is missing.
cuda=$("$PY" -c "import torch; print(torch.version.cuda or '')" 2>/dev/null || true)
if [ -n "$cuda" ] && ! "$PY" -c "import cupti" 2>/dev/null; then
  "$PY" -m pip install -q --no-deps "cupti-python==${cuda}.*" >/dev/null 2>&1 || echo "gpu_check: cupti-python not installable here (no network?)"
fi
cd /tmp && PYTHONUNBUFFERED=1 exec "$PY" "$OLDPWD/bench/gpu_check.py" "$@"
