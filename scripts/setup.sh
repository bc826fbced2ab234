#!/usr/bin/env bash
# Everything a fresh machine needs: a venv with torch (the CUDA build where pip offers it),
# perfcore's dependencies, and perfcore built in place. Safe to run again; fast when done.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${PERFCORE_VENV:-.venv}
PY=${PYTHON:-python3}

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  "$PY" -m venv "$VENV"
fi
# shellcheck disable=SC1091
. "$VENV/bin/activate"

pip_q() { python -m pip install -q --disable-pip-version-check "$@" 2>&1 | grep -v "^WARNING: Location" || true; }

if ! python -c "import torch" 2>/dev/null; then
  echo "setup: installing torch and torchvision (a CUDA build is several GB; one-time)"
  pip_q "torch>=2.1" torchvision
  python -c "import torch" || { echo "setup: torch did not install" >&2; exit 1; }
fi
python - 2>/dev/null <<'PY' || pip_q click numpy pandas psutil matplotlib ninja pytest nvidia-ml-py setuptools wheel
import importlib, sys
for m in ("click", "numpy", "pandas", "psutil", "matplotlib", "ninja", "pytest", "pynvml", "setuptools", "wheel"):
    importlib.import_module(m)
PY

# Rebuild only when sources, setup.py or the requested mode changed since the last build.
want_mode=$([ "${PERFCORE_CPU_ONLY:-0}" = "1" ] && echo cpu || echo auto)
stamp="build/.stamp-$want_mode"
need_build=1
if [ -f "$stamp" ] && [ -f perfcore/_build_info.json ] && ls perfcore/_C*.so >/dev/null 2>&1; then
  if [ -z "$(find csrc setup.py pyproject.toml -newer "$stamp" -print -quit)" ]; then need_build=0; fi
fi
if [ "$need_build" = 1 ]; then
  echo "setup: building perfcore ($want_mode mode)"
  rm -f build/.stamp-*
  python -m pip install --disable-pip-version-check --no-build-isolation --no-deps -e . -v 2>&1 \
    | grep -E "perfcore build:|error|Error" || true
  python -c "import perfcore._C" || { echo "setup: perfcore's native core did not build; see above" >&2; exit 1; }
  mkdir -p build && touch "$stamp"
fi
python -c "import perfcore, sys; c = perfcore.capabilities(); print(f'setup: perfcore built in {c[\"mode\"]} mode')"
