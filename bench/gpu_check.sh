#!/usr/bin/env bash
# Builds perfcore on the lent GPU machine (its own Python and torch, no network) and runs the check.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-build-isolation --no-deps . 2>&1 | grep -v "^$" | tail -n 5
cd /tmp && PYTHONUNBUFFERED=1 python3 "$OLDPWD/bench/gpu_check.py" "$@"
