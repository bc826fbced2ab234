"""The finishing process gives freed column-sized arrays back to the OS (run.parent.heap): glibc's malloc
raises its mmap threshold each time it frees a large block, and the blocks allocated after that come
from the heap, which keeps them once freed (1M steps: ~100 MiB held after the part was written)."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Frees one 8 MiB array (glibc then raises its threshold), then holds ten 4 MiB arrays and an eleventh
# above them, frees the ten: prints the MiB still resident of those freed.
_SCRIPT = """
import sys
import numpy as np
from perfcore.run.parent.heap import give_back_freed
if sys.argv[1] == "fixed" and not give_back_freed():
    print("unset"); raise SystemExit
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
a = np.ones(1 << 20); del a
before = rss()
held = [np.ones(1 << 19) for _ in range(10)]
top = np.ones(1 << 19)
del held
print((rss() - before) / 2**20 - 4)
"""


def _kept_mib(mode: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", _SCRIPT, mode], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; mallopt is glibc's")
def test_freed_columns_go_back_to_the_os():
    fixed = _kept_mib("fixed")
    if fixed == "unset":
        pytest.skip("no glibc mallopt here")
    if float(_kept_mib("default")) < 20:
        pytest.skip("this malloc gives freed blocks back without the fix")
    assert float(fixed) < 4, f"{fixed} MiB of 40 MiB freed stayed resident"
