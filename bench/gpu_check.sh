#!/usr/bin/env bash
# The GPU check on a lent machine: build perfcore there for its own GPU only (its Python and
# torch, no network), then run bench/gpu_check.py, whose table says PASS/FAIL per row with the
# value that passes. Exit status: gpu_check.py's (0 all pass, 1 a row failed, 2 a deciding row
# skipped: the budget ran out, 3 no GPU or a CPU-mode build). The budget (--budget-s, default 480)
# counts from this script's start. Never calls a network: the cupti-python wheels come from .whl/
# (bench/fetch_wheels.sh, run where there is one, for the device's Python; carry .whl to the device).
# Example: bash bench/gpu_check.sh --rows "$OUT/rows.jsonl" --json "$OUT/gpu.json" --keep-failed "$OUT"
# It prints first the command that finishes the run in a second call on the same warm machine (the
# checks the budget left, from the rows this call keeps on the device); that call skips the build.
set -euo pipefail
export GPU_CHECK_T0=${GPU_CHECK_T0:-$(date +%s)}
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
STATE_DIR=$(dirname "${GPU_CHECK_STATE:-/tmp/gpu_check_state/rows.jsonl}")
resume=0
for a in "$@"; do [ "$a" = "--resume" ] && resume=1; done
if [ "$resume" = 0 ]; then
  echo "gpu_check: to finish what this call's budget leaves, call again within 30 s of its end:"
  echo "  bash bench/gpu_check.sh --resume $*"
fi
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1  # a pip that wants the network fails at once
# The build is the tree's: a second call on the warm machine with the same sources keeps the first's.
stamp=$(cat setup.py pyproject.toml $(find csrc perfcore -type f \( -name '*.py' -o -name '*.cpp' -o -name '*.h' \
  -o -name '*.cu' \) | sort) 2>/dev/null | sha1sum | cut -c1-16)
mkdir -p "$STATE_DIR"
if [ "$resume" = 1 ] && [ "$(cat "$STATE_DIR/build" 2>/dev/null)" = "$stamp" ]; then
  echo "gpu_check: perfcore already built from these sources ($stamp)"
else
  arch=$(timeout 60 "$PY" -c "import torch; print('%d.%d' % torch.cuda.get_device_capability())" 2>/dev/null || true)
  if [ -n "$arch" ]; then export TORCH_CUDA_ARCH_LIST="$arch"; fi  # one arch: a build of seconds, not minutes
  { timeout 300 "$PY" -m pip install -q --no-build-isolation --no-deps . 2>&1 \
    || echo "gpu_check: pip install did not finish (exit $?, 300 s limit)"; } | tail -n 5
  echo "$stamp" >"$STATE_DIR/build"
fi
# A CPU-mode build (no toolkit found, a failed CUDA compile) checks nothing: say why, in one line.
if ! mode=$(cd /tmp && "$PY" -c "import perfcore._native as n; c = n.capabilities(); print(c['mode'])" 2>&1) \
    || [ "$mode" != "cuda" ]; then
  why=$(cd /tmp && "$PY" -c "import perfcore._native as n; r = n.capabilities()['reasons']; print(r.get('native') \
or r.get('cuda_events') or r)" 2>&1 | tail -n 1 || true)
  echo "gpu_check: perfcore built in ${mode:-no} mode here, not cuda: ${why}" >&2
  rm -f "$STATE_DIR/build"
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
export GPU_CHECK_COMMIT=${GPU_CHECK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo "tree $stamp")}
cd /tmp && PYTHONUNBUFFERED=1 exec "$PY" "$OLDPWD/bench/gpu_check.py" "$@"
