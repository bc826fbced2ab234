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
  pip_q "torch>=2.8" torchvision
  python -c "import torch" || { echo "setup: torch did not install" >&2; exit 1; }
fi
# perfcore's declared dependencies (pyproject.toml: runtime, the test and gpu extras) and the
# build tools, installed when missing or too old; torch is left as it is (installed above).
missing_deps() { python scripts/missing_deps.py pyproject.toml; }
missing=$(missing_deps)
if [ -n "$missing" ]; then
  echo "setup: installing $(echo "$missing" | tr '\n' ' ')"
  # shellcheck disable=SC2086
  pip_q $missing
  still=$(missing_deps)
  [ -z "$still" ] || { echo "setup: could not install $(echo "$still" | tr '\n' ' '); see pip's message above" >&2; exit 1; }
fi

# Debian's headless chromium for the tests that render report.html (PERFCORE_WITH_CHROMIUM=1,
# set by scripts/test.sh). CI runs as root on a fresh machine; elsewhere this only says why not.
if [ "${PERFCORE_WITH_CHROMIUM:-0}" = "1" ] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing Debian's chromium (headless, for the HTML report tests; one-time)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } \
      >/dev/null 2>&1 || echo "setup: chromium did not install (apt-get failed); HTML render tests will skip" >&2
  else
    echo "setup: no chromium here and no root apt-get to install it; HTML render tests will skip"
  fi
fi

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
    | grep -E "perfcore build:|error:|Error:|FAILED" || true
  python -c "import perfcore._C" || { echo "setup: perfcore's native core did not build; see above" >&2; exit 1; }
  mkdir -p build && touch "$stamp"
fi
# In CUDA mode, the cupti-python backend (the fallback and cross-check of the native tracer), in
# the release that fits the CUPTI torch ships: a newer one would pull a newer libcupti over it.
mode=$(python -c "import perfcore; print(perfcore.capabilities()['mode'])")
if [ "$mode" = cuda ] && ! python -c "import cupti" 2>/dev/null; then
  spec=$(python -c "import torch; from perfcore.capture.cupti_python_kinds import install_spec; print(install_spec(torch.version.cuda) or '')")
  if [ -n "$spec" ]; then
    echo "setup: installing $spec (fits torch's CUPTI)"
    pip_q "$spec"
    python -c "import cupti" 2>/dev/null \
      || echo "setup: $spec did not install; --backend cupti-python will say so and the native tracer is used"
  else
    echo "setup: $(python -c "import torch; from perfcore.capture.cupti_python_kinds import install_advice; print(install_advice(torch.version.cuda))")"
  fi
fi
python -c "import perfcore, sys; c = perfcore.capabilities(); print(f'setup: perfcore built in {c[\"mode\"]} mode')"
