"""No stall on the training thread: what perfcore imports to settle steps (pandas: 0.3-3 s) is
imported on a thread of its own while the script starts, so the first settle, ~10 s into the
steps, costs the training thread only the settling itself. `perfcore run` on a script that times
its own iterations for 14 s."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

SCRIPT = Path(__file__).resolve().parent / "scripts" / "own_meter.py"


def import_s() -> float:
    """What importing pandas (and pyarrow's pandas layer) costs a fresh interpreter here, now."""
    code = "import time; t = time.perf_counter(); import pandas, pyarrow.pandas_compat; print(time.perf_counter() - t)"
    best = min(
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout) for _ in range(2)
    )
    return best


def test_the_first_settle_does_not_import_on_the_training_thread(tmp_path):
    out = tmp_path / "r"
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "perfcore.cli", "run", "--out", str(out), "--", sys.executable, str(SCRIPT), "14"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert time.perf_counter() - t0 > 12  # long enough for the first settle (at 10 s)
    steps = pd.read_csv(out / "steps.csv")
    own = [float(line.split()[2]) for line in p.stdout.splitlines() if line.startswith("STEP ")]
    assert len(own) == len(steps)
    # perfcore's own time on the training thread, per step: the settles. The first one used to
    # carry pandas' import; now none comes near what that import costs here.
    worst = steps["perfcore_ms"].max() / 1e3
    assert worst < 0.5 * import_s(), (worst, steps.nlargest(3, "perfcore_ms")[["step", "wall_ms", "perfcore_ms"]])
