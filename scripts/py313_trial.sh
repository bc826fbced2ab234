#!/usr/bin/env bash
# A one-off trial of perfcore on Python 3.13 (Colab's), repeatable: CPython 3.13 built from
# Debian trixie's python3.13 source package (no registry here ships a 3.13 interpreter that runs
# on Debian 12), torch's cp313 wheel from PyPI, perfcore built in CUDA mode against the CUDA 12.4
# toolkit of scripts/cuda_toolkit.sh (CPU mode if that fails), and the CPU test suite run there.
# Not a CI step: the CPython build alone takes several minutes of both cores.
#
#   scripts/py313_trial.sh [pytest args]      (default: the test files listed below)
#
# Everything it makes lives in $PERFCORE_CACHE (default ~/.cache/perfcore): the source download,
# the interpreter in py313/, torch's wheels in py313-wheels/, the venv in venv-py313-torchX; a second
# run reuses each step's result.
# The machine's apt sources and state are never touched (a private apt configuration fetches the
# source); missing build libraries are installed from the machine's own (bookworm) archive.
set -uo pipefail
cd "$(dirname "$0")/.."
CACHE=${PERFCORE_CACHE:-$HOME/.cache/perfcore}
TORCH=${PERFCORE_PY313_TORCH:-2.8.0}   # 2.8.0: its nvidia-*-cu12 wheels are the ones test-cuda12 already cached
TOOLKIT=12.4
PREFIX="$CACHE/py313"
VENV="$CACHE/venv-py313-torch$TORCH"
SRC=build/py313/src
LOG=build/py313
NICE="nice -n 10"
start=$SECONDS
mkdir -p "$CACHE" "$LOG"
log() { echo "py313_trial: $*"; }

# --- CPython 3.13 from Debian trixie's source package --------------------------------------------
# PERFCORE_PY313=/path/to/python3.13 takes an interpreter already built (pyenv's, say) instead.
if [ -n "${PERFCORE_PY313:-}" ]; then
  PY313=$PERFCORE_PY313
  VENV="$CACHE/venv-py313-torch$TORCH-$("$PY313" -c 'import platform; print(platform.python_version())')"
elif ! "$PREFIX/bin/python3.13" -c 'import ssl, zlib, ctypes, bz2, lzma, sqlite3, uuid, readline' 2>/dev/null; then
  missing=()
  for p in build-essential libssl-dev zlib1g-dev libffi-dev libbz2-dev libsqlite3-dev liblzma-dev \
           libreadline-dev uuid-dev libncurses-dev xz-utils; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing build libraries: ${missing[*]}"
    apt-get -qq update && apt-get -qq install -y "${missing[@]}" || { log "apt-get install ${missing[*]} failed" >&2; exit 1; }
  fi
  APT="$CACHE/py313-apt"
  DL="$CACHE/py313-source"
  mkdir -p "$DL"
  . scripts/private_apt.sh
  private_apt "$APT" "deb-src http://deb.debian.org/debian trixie main"
  if ! ls "$DL"/python3.13_*.orig.tar.xz >/dev/null 2>&1; then
    log "fetching Debian trixie's python3.13 source package (about 21 MB, once)"
    APT_CONFIG="$APT/apt.conf" apt-get -qq update || exit 1
    (cd "$DL" && APT_CONFIG="$APT/apt.conf" apt-get -qq source --download-only python3.13) || exit 1
  fi
  orig=$(ls "$DL"/python3.13_*.orig.tar.xz | head -1)
  # The upstream tarball as released; Debian's own patches (its layout, multiarch) are not applied.
  # A build cut short (it takes 10-60 min of both cores, by the machine's load) goes on where it
  # stopped: the configured tree is kept until the install is done.
  BUILD="$CACHE/py313-build"
  b0=$SECONDS
  if [ ! -f "$BUILD/Makefile" ]; then
    rm -rf "$BUILD" && mkdir -p "$BUILD"
    $NICE tar -xJf "$orig" -C "$BUILD" --strip-components=1 || exit 1
    (cd "$BUILD" && ./configure -q --prefix="$PREFIX" >"$OLDPWD/$LOG/configure.log" 2>&1) \
      || { log "CPython's configure failed; see $LOG/configure.log" >&2; exit 1; }
  fi
  log "building CPython from $(basename "$orig") into $PREFIX (nice -n 10, make -j2; see $LOG/make.log)"
  (cd "$BUILD" && $NICE make -s -j2 >>"$OLDPWD/$LOG/make.log" 2>&1 \
    && $NICE make -s install >"$OLDPWD/$LOG/install.log" 2>&1) \
    || { log "CPython build failed; see $LOG/{configure,make,install}.log" >&2; exit 1; }
  log "CPython built in $((SECONDS - b0)) s"
  rm -rf "$BUILD"
fi
PY313=${PY313:-$PREFIX/bin/python3.13}
"$PY313" -c 'import sys, ssl, zlib, ctypes, bz2, lzma, sqlite3, uuid; assert sys.version_info[:2] == (3, 13)' \
  || { log "$PY313 is not a complete Python 3.13 (see $LOG/make.log if it was built here)" >&2; exit 1; }
log "$("$PY313" -VV | head -1)"

# --- venv: torch's cp313 wheel and perfcore's dependencies ---------------------------------------
# torch and its nvidia-*-cu12 wheels (about 3 GB) are kept in $WHEELS, so a new venv downloads
# nothing big again; the download needs no 3.13 interpreter, so it can run while CPython builds.
WHEELS="$CACHE/py313-wheels"
if [ ! -f "$WHEELS/.perfcore-ready-$TORCH" ]; then
  log "downloading torch $TORCH (cp313) and its dependencies into $WHEELS (about 3 GB, once)"
  mkdir -p "$WHEELS"
  python3 -m pip download -q --disable-pip-version-check --only-binary=:all: --python-version 3.13 \
    --implementation cp --abi cp313 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$WHEELS" "torch==$TORCH" 2>&1 | grep -v "^WARNING: Location"
  ls "$WHEELS"/torch-"$TORCH"-cp313-*.whl >/dev/null 2>&1 || { log "pip could not fetch torch $TORCH for cp313" >&2; exit 1; }
  touch "$WHEELS/.perfcore-ready-$TORCH"
fi
if [ ! -f "$VENV/.perfcore-ready" ]; then
  log "creating $VENV with torch $TORCH (cp313)"
  rm -rf "$VENV"
  "$PY313" -m venv "$VENV" || exit 1
  # shellcheck disable=SC2046
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --find-links "$WHEELS" "torch==$TORCH" \
    $("$VENV/bin/python" scripts/missing_deps.py pyproject.toml | grep -v -E '^(transformers|accelerate|lightning)') \
    2>&1 | grep -v "^WARNING: Location"
  "$VENV/bin/python" -c "import torch" || { log "torch $TORCH does not import on Python 3.13" >&2; exit 1; }
  touch "$VENV/.perfcore-ready"
fi
PY="$VENV/bin/python"
log "torch $("$PY" -c 'import torch; print(torch.__version__)')"

# --- perfcore, built in a copy of this tree ------------------------------------------------------
mkdir -p "$SRC"
git ls-files -z -co --exclude-standard | grep -z -v '^build/' | tar --null -T - -cf - | tar -xf - -C "$SRC" || exit 1
./scripts/cuda_toolkit.sh "$TOOLKIT" "$CACHE/cuda-$TOOLKIT" || exit 1
b0=$SECONDS
# The full compiler output is kept: warnings about C API that 3.13 removed or changed show there.
(cd "$SRC" && CUDA_HOME="$CACHE/cuda-$TOOLKIT" $NICE "$PY" setup.py build_ext --inplace) >"$LOG/build_ext.log" 2>&1
log "perfcore build: $((SECONDS - b0)) s, $(grep -c -i 'warning' "$LOG/build_ext.log") warning lines, $(grep -c -E 'error:' "$LOG/build_ext.log") error lines (full output: $LOG/build_ext.log)"
grep -E "perfcore build:" "$LOG/build_ext.log"
grep -E "csrc/.*(warning|error):" "$LOG/build_ext.log" | sort -u | head -40
cd "$SRC" || exit 1
# The tests start perfcore in child processes: the venv finds this copy as an editable install would.
echo "$PWD" >"$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/perfcore-src.pth"
log "mode $("$PY" -c "import perfcore; print(perfcore.capabilities()['mode'])")"
[ $# -gt 0 ] || set -- tests/test_layers.py tests/test_native.py tests/test_hooks.py tests/test_timing.py \
  tests/test_step_sources.py tests/test_run.py tests/test_magic.py tests/test_session_restore.py \
  tests/test_torch_reach.py
"$PY" -m pytest -q -p no:cacheprovider "$@"
rc=$?
log "$((SECONDS - start)) s in all"
exit $rc
