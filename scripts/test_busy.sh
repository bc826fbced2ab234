#!/usr/bin/env bash
# The tests while CPU-bound processes occupy every core, as neighbours on a shared CI machine would:
# a test that passes only on an idle machine fails here. Arguments go to pytest (default: the suite).
# PERFCORE_BUSY_BURNERS sets how many busy processes run (default: 2, this project's CI machine's cores).
set -uo pipefail
cd "$(dirname "$0")/.."
burners=${PERFCORE_BUSY_BURNERS:-2}
pids=()
for _ in $(seq "$burners"); do
  python3 -c 'while True: pass' &
  pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
echo "== tests with $burners CPU-bound processes running alongside"
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
