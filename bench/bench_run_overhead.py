"""Overhead of `perfcore run` on a CPU training loop, against the same script uninstrumented and
under torch.profiler (CPU activity), measured side by side (interleaved repeats, medians).

    python bench/bench_run_overhead.py [--steps 300] [--repeats 5]

Target (issue #4): perfcore run adds <= 2% to the step time.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def loop_ms(cmd: list[str], env: dict[str, str]) -> float:
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    return float(next(line for line in out.splitlines() if line.startswith("LOOP_MS_PER_STEP")).split()[1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    script = [sys.executable, str(HERE / "overhead_train.py"), str(args.steps)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    tmp = tempfile.mkdtemp()
    rows = {
        "uninstrumented": (script, env),
        "perfcore run": ([sys.executable, "-m", "perfcore.cli", "run", "--out", f"{tmp}/run", "--"] + script, env),
        "torch.profiler (CPU)": (script, dict(env, PROFILE="torch")),
    }
    res = {k: [] for k in rows}
    for _ in range(args.repeats):
        for name, (cmd, e) in rows.items():
            res[name].append(loop_ms(cmd, e))
    med = {k: statistics.median(v) for k, v in res.items()}
    base = med["uninstrumented"]
    print(f"CPU training loop, {args.steps} steps (median step of each run), median of {args.repeats} interleaved runs")
    print("| variant | ms/step | overhead |")
    print("|---|---|---|")
    for k, v in med.items():
        print(f"| {k} | {v:.3f} | {100 * (v - base) / base:+.1f}% |")
    ov = (med["perfcore run"] - base) / base
    print(f"\ntarget perfcore run <= 2%: {'PASS' if ov <= 0.02 else 'FAIL'} ({100 * ov:+.1f}%)")
    tp = (med["torch.profiler (CPU)"] - base) / base
    if ov > 0:
        print(f"torch.profiler overhead / perfcore overhead: {tp / ov:.1f}x")


if __name__ == "__main__":
    main()
