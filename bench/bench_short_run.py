"""What a short run costs under `perfcore run`: a 30-step script bare and under perfcore, alternated in
each round (median of N, default 5), the ratio and perfcore's added seconds; with --before TREE, the
same under another checkout's perfcore in the same rounds (before/after side by side), and the
script's own p50 step time under each (finishing work done while the script runs must not slow it).
Then where perfcore's part after the script goes, timed in a fresh process on the run folder it wrote.

    .venv/bin/python bench/bench_short_run.py [REPEATS] [--before /work/main]"""
from __future__ import annotations

import argparse
import json
import os
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
t.append(time.perf_counter())
plots.plot_breakdown(steps, Path(sys.argv[1]) / "bench_breakdown.png", title=doc["verdict"]["summary"])
t.append(time.perf_counter())
from perfcore.report.html import render_report
render_report(doc, steps)
t.append(time.perf_counter())
from perfcore.report.terminal import render_text
render_text(doc)
t.append(time.perf_counter())
names = ["import pandas", "read the run folder", "import plots", "one PNG (breakdown)", "report.html", "terminal text"]
for n, a, b in zip(names, t, t[1:]):
    print(f"  {n:<22} {1e3 * (b - a):7.0f} ms")
print("  matplotlib imported:", "matplotlib" in sys.modules)
"""


def wall(cmd: list[str], tree: Path | None = None) -> float:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, env=env)
    return time.perf_counter() - t0


def spread(xs: list[float]) -> str:
    return f"median {statistics.median(xs):.2f} (min {min(xs):.2f}, max {max(xs):.2f})"


def script_times(folder: Path) -> tuple[float, float]:
    """The script's own p50 step and its time from launch to the end of its first step (ms): where
    the warm-up overlaps the script (its start-up, importing torch) and where it could slow it."""
    doc = json.loads((folder / "run.json").read_text())
    return float(doc["step_time_ms"]["p50"]), float((doc.get("startup") or {}).get("time_to_first_step_ms", "nan"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("repeats", type=int, nargs="?", default=5)
    ap.add_argument("--before", type=Path, help="another checkout (built) to run as 'before', side by side")
    a = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="bench-short-"))
    trees = {"after": ROOT} if a.before is None else {"after": ROOT, "before": a.before.resolve()}
    bare: list[float] = []
    under: dict[str, list[float]] = {k: [] for k in trees}
    added: dict[str, list[float]] = {k: [] for k in trees}
    step: dict[str, list[float]] = {k: [] for k in trees}
    first: dict[str, list[float]] = {k: [] for k in trees}
    for i in range(a.repeats):
        # Alternated, the order rotated each round, so drift on a shared machine hits all alike.
        order = ["bare"] + list(trees)
        order = order[i % len(order):] + order[:i % len(order)]
        took = {}
        for name in order:
            if name == "bare":
                took[name] = wall(SCRIPT)
            else:
                folder = out / f"{name}{i}"
                took[name] = wall(PERFCORE + ["run", "--quiet", "--out", str(folder), "--"] + SCRIPT, trees[name])
                p50, to_first = script_times(folder)
                step[name].append(p50)
                first[name].append(to_first / 1e3)
        bare.append(took["bare"])
        for name in trees:
            under[name].append(took[name])
            added[name].append(took[name] - took["bare"])  # paired within the round
    print(f"30-step script, {a.repeats} rounds, seconds: bare {spread(bare)}")
    for name in trees:
        ratio = statistics.median(under[name]) / statistics.median(bare)
        print(f"  under perfcore run ({name}, {trees[name]}): {spread(under[name])}; ratio {ratio:.2f}x")
        print(f"    perfcore's added seconds (paired per round): {spread(added[name])}")
        print(f"    the script's own p50 step, ms: {spread(step[name])}; launch to first step end, s: "
              f"{spread(first[name])}")
    if a.before is not None:
        gain = statistics.median(added["before"]) - statistics.median(added["after"])
        print(f"  added seconds before/after: {statistics.median(added['before']):.2f} -> "
              f"{statistics.median(added['after']):.2f} ({gain:.2f} s less)")
    print("after the script, in a fresh process on the run folder (this tree):")
    subprocess.run([sys.executable, "-c", PARTS, str(out / "after0")], check=True, cwd=ROOT)


if __name__ == "__main__":
    main()
