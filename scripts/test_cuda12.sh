#!/usr/bin/env bash
# `make test-cuda12`: perfcore built in CUDA mode the way Colab builds it — a CUDA 12 torch from
# PyPI (2.8.0, cu128: CUPTI 12.8) against a CUDA 12 toolkit that is older than torch's CUPTI
# (scripts/cuda_toolkit.sh 12.4) — and the native, CUPTI and build tests run there. No GPU needed.
# torch 2.8 is also the oldest torch perfcore supports (pyproject.toml, setup.py's MIN_TORCH), so
# the tests that patch torch (module calls, optimizer hooks, DataLoader, torch.compile after a
# session, the trainer callbacks) run here too; a CUDA build of torch runs them on the CPU.
#
# The venv and the toolkit are kept in $PERFCORE_CACHE (default ~/.cache/perfcore) between runs;
# perfcore itself is built in build/cuda12/src, a copy of this tree, so the checkout's own build
# (and its .venv) are left as they are. Extra arguments go to pytest.
set -uo pipefail
cd "$(dirname "$0")/.."
CACHE=${PERFCORE_CACHE:-$HOME/.cache/perfcore}
TORCH=${PERFCORE_CUDA12_TORCH:-2.8.0}
TOOLKIT=${PERFCORE_CUDA12_TOOLKIT:-12.4}
TK="$CACHE/cuda-$TOOLKIT"
VENV="$CACHE/venv-cuda12-torch$TORCH"
SRC=build/cuda12/src
start=$SECONDS

./scripts/cuda_toolkit.sh "$TOOLKIT" "$TK" || exit 1

# torch's CUDA 12 wheel and its nvidia-*-cu12 packages; the rest is what the tests run here import
# (the trainers too: their callback sessions must leave torch 2.8 as they found it). A cached venv
# made before a dependency was added gets just that one; torch stays pinned.
deps() { "$VENV/bin/python" scripts/missing_deps.py pyproject.toml | grep -v -E '^(pyarrow|nvidia-ml-py)'; }
if [ ! -f "$VENV/.perfcore-ready" ]; then
  echo "test-cuda12: creating $VENV with torch $TORCH from PyPI (about 3 GB, once)"
  rm -rf "$VENV"
  python3 -m venv "$VENV" || exit 1
  # shellcheck disable=SC2046
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "torch==$TORCH" $(deps) \
    2>&1 | grep -v "^WARNING: Location"
  "$VENV/bin/python" -c "import torch; assert torch.version.cuda.startswith('12.')" || { echo "test-cuda12: torch $TORCH did not install as a CUDA 12 build" >&2; exit 1; }
  touch "$VENV/.perfcore-ready"
elif [ -n "$(deps)" ]; then
  echo "test-cuda12: adding to $VENV:" $(deps)
  # shellcheck disable=SC2046
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "torch==$TORCH" $(deps) \
    2>&1 | grep -v "^WARNING: Location"
fi
PY="$VENV/bin/python"

# A copy of the tracked and new files; what it built last time (build/, perfcore/_C*.so) stays
# so that an unchanged tree rebuilds nothing.
mkdir -p "$SRC"
git ls-files -z -co --exclude-standard | grep -z -v '^build/' | tar --null -T - -cf - | tar -xf - -C "$SRC" || exit 1
cd "$SRC" || exit 1
# The tests start perfcore in child processes: the venv finds this copy as an editable install would.
echo "$PWD" >"$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/perfcore-src.pth"
echo "test-cuda12: building perfcore against torch $TORCH ($("$PY" -c 'import torch; print(torch.version.cuda)')) and CUDA $TOOLKIT at $TK"
b0=$SECONDS
CUDA_HOME="$TK" PERFCORE_CUDA_FALLBACK=0 "$PY" setup.py -q build_ext --inplace 2>&1 | grep -E "perfcore build:|error:|FAILED"
echo "test-cuda12: build took $((SECONDS - b0)) s"
mode=$("$PY" -c "import perfcore; print(perfcore.capabilities()['mode'])")
if [ "$mode" != cuda ]; then
  echo "test-cuda12: perfcore built in ${mode:-no} mode, not CUDA mode: $("$PY" -c 'import perfcore; print(perfcore.build_info().get("reason"))')" >&2
  exit 1
fi
echo "test-cuda12: CUDA mode, CUPTI API $("$PY" -c 'import perfcore._native as n; print(n.native().cupti_compiled_version())')"
default=0
if [ $# -eq 0 ]; then
  default=1
  # Not tests/test_layers.py: it reads the source tree only, the same here as in make test.
  set -- tests/test_native.py tests/test_cupti_decoder.py tests/test_build.py tests/test_cupti_real.py \
    tests/test_cuda_headers.py tests/test_cupti_python_kinds.py tests/test_cuda12_install.py
fi
CUDA_HOME="$TK" PERFCORE_CUDA12_SUITE=1 "$PY" -m pytest -q -p no:cacheprovider "$@"
rc=$?
[ $rc -ne 5 ] || { echo "test-cuda12: pytest collected no tests" >&2; rc=1; }

# The cupti-python backend with each CUDA 12 release of cupti-python (12.x names its record types
# ActivityKernel9 / c_upti_activity_kernel9_dtype), each in a target folder of its own beside
# torch's CUPTI 12.8 (--no-deps: its own CUPTI pin must not replace torch's). 13.x is tested by
# make test, whose torch is a CUDA 13 build.
if [ $default -eq 1 ] && [ $rc -eq 0 ]; then
  for rel in 12.6.0:cuda-python==12.6.0 12.8.0:cuda-bindings==12.8.0; do
    cp_dir="$CACHE/cupti-python-${rel%%:*}"
    if [ ! -f "$cp_dir/.perfcore-ready" ]; then
      rm -rf "$cp_dir"
      "$PY" -m pip install -q --disable-pip-version-check --no-deps --target "$cp_dir" "cupti-python==${rel%%:*}" \
        "${rel#*:}" 2>&1 | grep -v "^WARNING: Location"
      touch "$cp_dir/.perfcore-ready"
    fi
    echo "test-cuda12: the cupti-python backend with cupti-python ${rel%%:*}"
    PYTHONPATH="$cp_dir" "$PY" -m pytest -q -p no:cacheprovider tests/test_cupti_python.py || rc=1
  done
fi

# The oldest supported torch, on the CPU: everything perfcore patches in torch, and what a user
# does with torch after a session ends. (The tests of these files on hand-made events or known sleeps
# take 5 s of the phase's minutes: a list of the rest would save little and could miss a new test.)
if [ $default -eq 1 ]; then
  echo "test-cuda12: the tests that patch torch, on torch $("$PY" -c 'import torch; print(torch.__version__)')"
  t0=$SECONDS
  "$PY" -m pytest -q -p no:cacheprovider tests/test_session_restore.py tests/test_hooks.py tests/test_step_sources.py \
    tests/test_torch_reach.py tests/test_callbacks.py tests/test_trainer_scripts.py tests/test_timing.py \
    tests/test_magic.py
  r=$?
  [ $r -eq 0 ] || rc=1
  # perfcore run end to end: the runs that make test repeats on its CUDA-mode build.
  "$PY" -m pytest -q -p no:cacheprovider -m build tests/test_run.py
  r=$?
  [ $r -eq 0 ] || rc=1
  echo "test-cuda12: torch $TORCH tests took $((SECONDS - t0)) s"
fi

echo "test-cuda12: $((SECONDS - start)) s in all"
exit $rc
