#!/usr/bin/env bash
# The GPU check on a lent machine: build perfcore there for its own GPU only (its Python and
# torch, no network), then run bench/gpu_check.py, whose table says PASS/FAIL per row with the
# value that passes. Exit status: gpu_check.py's (0 all pass, 1 a row failed, 3 no GPU or a
# CPU-mode build). The budget (--budget-s, default 480) counts from this script's start.
# Never calls a network: the cupti-python wheels come from .whl/ (bench/fetch_wheels.sh, run
# where there is one, for the device's Python; carry .whl to the device).
# Example: bash bench/gpu_check.sh --rows "$OUT/rows.jsonl" --json "$OUT/gpu.json"
set -euo pipefail
export GPU_CHECK_T0=${GPU_CHECK_T0:-$(date +%s)}
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1  # a pip that wants the network fails at once
arch=$("$PY" -c "import torch; print('%d.%d' % torch.cuda.get_device_capability())" 2>/dev/null || true)
if [ -n "$arch" ]; then export TORCH_CUDA_ARCH_LIST="$arch"; fi  # one arch: a build of seconds, not minutes
{ "$PY" -m pip install -q --no-build-isolation --no-deps . 2>&1 || true; } | tail -n 5
# A CPU-mode build (no toolkit found, a failed CUDA compile) checks nothing: say why, in one line.
if ! mode=$(cd /tmp && "$PY" -c "import perfcore._native as n; c = n.capabilities(); print(c['mode'])" 2>&1) \
    || [ "$mode" != "cuda" ]; then
  why=$(cd /tmp && "$PY" -c "import perfcore._native as n; r = n.capabilities()['reasons']; print(r.get('native') \
or r.get('cuda_events') or r)" 2>&1 | tail -n 1 || true)
  echo "gpu_check: perfcore built in ${mode:-no} mode here, not cuda: ${why}" >&2
  exit 3
fi
if ! "$PY" -c "import cupti" 2>/dev/null; then
  if ls .whl/cupti_python-*.whl >/dev/null 2>&1; then
    { timeout 120 "$PY" -m pip install -q --no-deps --find-links .whl cupti-python 2>&1 \
      || echo "gpu_check: the wheels in .whl/ did not install (wrong Python or CUDA?)"; } | tail -n 3
  else
    echo "gpu_check: no .whl/ wheels (run bench/fetch_wheels.sh where there is a network); the backends row will say so"
  fi
fi
cd /tmp && PYTHONUNBUFFERED=1 exec "$PY" "$OLDPWD/bench/gpu_check.py" "$@"
