"""Finishing cost and memory against run length: `perfcore run` on a tiny training loop of 1k, 10k
and 100k steps (the real instrumentation path: module, backward and optimizer hooks, StepTimer,
part writing, finish_run), then `perfcore report --html` on the folder.

For each length it prints: the loop's own time; finishing (from the loop's last step to the end of
`perfcore run`: writing the part in the child, then the run folder in the parent); `perfcore
report`; the run folder's size; and the child's RSS growth from step 1000 to the last step, minus
the same script's growth without perfcore (perfcore's own memory). Then the slopes per 10k steps.
The machine's load average is printed with each row: wall times on a shared machine are only as
good as the load allows (the report's CPU seconds are the steadier figure).

    .venv/bin/python bench/bench_finish.py [--steps 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The loop measured: tests/scripts/tiny_loop.py (the suite's memory test runs the same script).
LOOP = Path(__file__).resolve().parent.parent / "tests" / "scripts" / "tiny_loop.py"


def perfcore_cmd() -> list[str]:
    return [sys.executable, "-m", "perfcore.cli"]


def loop_line(stderr: str) -> tuple[float, float, int, int, int, float]:
    m = re.search(r"LOOP (\S+) (\S+) RSS (\d+) (\d+) (\d+) CPU (\S+)", stderr)
    if not m:
        raise SystemExit(f"the loop printed no timing line:\n{stderr[-2000:]}")
    return float(m[1]), float(m[2]), int(m[3]), int(m[4]), int(m[5]), float(m[6])


def folder_bytes(d: Path) -> int:
    return sum(f.stat().st_size for f in d.rglob("*") if f.is_file())


def one(n: int, work: Path, script: Path) -> dict:
    out = work / f"run{n}"
    cpu0 = _children_cpu()
    p = subprocess.run(
        perfcore_cmd() + ["run", "--quiet", "--out", str(out), "--", sys.executable, str(script), str(n)],
        capture_output=True,
        text=True,
    )
    t_end = time.time()
    if p.returncode != 0:
        raise SystemExit(f"perfcore run failed ({p.returncode}):\n{p.stderr[-3000:]}")
    t0, t1, r1, r10k, rn, loop_cpu = loop_line(p.stderr)
    # CPU of perfcore run and its child, less the child's CPU up to the loop's end: what finishing
    # cost (plus the parent's own start, so an upper bound).
    finish_cpu = _children_cpu() - cpu0 - loop_cpu
    part = next((out / "parts").glob("*/run.json"))
    t, cpu = time.perf_counter(), _children_cpu()
    r = subprocess.run(perfcore_cmd() + ["report", str(out), "--html"], capture_output=True, text=True)
    report_s, report_cpu = time.perf_counter() - t, _children_cpu() - cpu
    if r.returncode != 0:
        raise SystemExit(f"perfcore report failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return {
        "steps": n,
        "loop_s": t1 - t0,
        "finish_s": t_end - t1,
        "finish_cpu": finish_cpu,
        "child_s": part.stat().st_mtime - t1,
        "report_s": report_s,
        "report_cpu": report_cpu,
        "load": os.getloadavg()[0],
        "mb": folder_bytes(out) / 1e6,
        "rss_growth_mb": (rn - r1) / 1e6 if r1 else 0.0,
        "rss_after_10k_mb": (rn - r10k) / 1e6 if r10k else None,
    }


def _children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bare_growth(n: int, script: Path) -> float:
    p = subprocess.run([sys.executable, str(script), str(n)], capture_output=True, text=True)
    _, _, r1, _, rn, _ = loop_line(p.stderr)
    return (rn - r1) / 1e6


def slope(rows: list[dict], key: str) -> float:
    """Least-squares change of `key` per 10k steps."""
    xs = [r["steps"] / 1e4 for r in rows]
    ys = [r[key] for r in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", default="1000,10000,100000")
    args = ap.parse_args()
    lengths = [int(s) for s in args.steps.split(",")]
    with tempfile.TemporaryDirectory(prefix="perfcore-bench-finish-") as tmp:
        work = Path(tmp)
        script = LOOP
        rows = [one(n, work, script) for n in lengths]
        # perfcore's own memory: the same loop's growth without perfcore, at the longest length only.
        bare = bare_growth(max(lengths), script) if max(lengths) > 1000 else 0.0
    print(
        "| steps | loop s | finish s (child part) (CPU s) | report --html s (CPU s) | folder MB | RSS growth MB "
        "(step 1000 -> end) | (step 10k -> end) | load avg |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['steps']} | {r['loop_s']:.1f} | {r['finish_s']:.2f} ({r['child_s']:.2f}) ({r['finish_cpu']:.2f}) "
            f"| {r['report_s']:.2f} "
            f"({r['report_cpu']:.2f}) | {r['mb']:.1f} | {r['rss_growth_mb']:.1f} | "
            f"{'-' if r['rss_after_10k_mb'] is None else format(r['rss_after_10k_mb'], '.1f')} | {r['load']:.1f} |"
        )
    if len(rows) > 1:
        print(
            f"slope per 10k steps: finish {slope(rows, 'finish_s'):+.3f} s ({slope(rows, 'finish_cpu'):+.3f} CPU s), "
            f"report {slope(rows, 'report_s'):+.3f} s ({slope(rows, 'report_cpu'):+.3f} CPU s), "
            f"folder {slope(rows, 'mb'):+.2f} MB, RSS {slope(rows, 'rss_growth_mb'):+.2f} MB"
        )
    big = max(rows, key=lambda r: r["steps"])
    print(
        f"without perfcore the loop grew {bare:.1f} MB over {big['steps']} steps; perfcore's own growth: "
        f"{big['rss_growth_mb'] - bare:.1f} MB"
    )


if __name__ == "__main__":
    sys.exit(main())
