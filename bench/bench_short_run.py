"""What a short run costs under `perfcore run`: a 30-step script bare and under perfcore, one after
the other (median of N, default 5), the ratio and the difference; then where perfcore's part after
the script goes, timed in a fresh process on the run folder it wrote (imports, PNG, HTML).

    .venv/bin/python bench/bench_short_run.py [REPEATS]"""
from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = [sys.executable, str(ROOT / "examples" / "train_small.py"), "30"]
PERFCORE = [sys.executable, "-c", "from perfcore.cli import main; main()"]

PARTS = r"""
import time, sys
from pathlib import Path
t = [time.perf_counter()]
import pandas
t.append(time.perf_counter())
from perfcore.report.reader import load_run
doc, steps = load_run(Path(sys.argv[1]))
t.append(time.perf_counter())
from perfcore.report import plots
plots._import_matplotlib()
import matplotlib.figure
t.append(time.perf_counter())
plots.plot_breakdown(steps, Path(sys.argv[1]) / "bench_breakdown.png", title=doc["verdict"]["summary"])
t.append(time.perf_counter())
from perfcore.report.html import render_report
render_report(doc, steps)
t.append(time.perf_counter())
names = ["import pandas", "read the run folder", "import matplotlib", "one PNG (breakdown)", "report.html"]
for n, a, b in zip(names, t, t[1:]):
    print(f"  {n:<22} {1e3 * (b - a):7.0f} ms")
"""


def wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - t0


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    out = Path(tempfile.mkdtemp(prefix="bench-short-"))
    bare, under = [], []
    for i in range(n):  # alternated, so drift on a shared machine hits both alike
        bare.append(wall(SCRIPT))
        under.append(wall(PERFCORE + ["run", "--quiet", "--out", str(out / f"r{i}"), "--"] + SCRIPT))
    b, u = statistics.median(bare), statistics.median(under)
    print(f"30-step script: bare {b:.2f} s, under perfcore run {u:.2f} s (median of {n}): "
          f"ratio {u / b:.2f}x, perfcore's part {u - b:.2f} s")
    print("after the script, in a fresh process on the run folder:")
    subprocess.run([sys.executable, "-c", PARTS, str(out / "r0")], check=True, cwd=ROOT)


if __name__ == "__main__":
    main()
