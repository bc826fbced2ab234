"""How long `perfcore run` takes to finish after the script's last step, on a quiet and on a busy machine:
tests/scripts/tiny_loop.py (N tiny steps) under `perfcore run`, with 0 and then B CPU burners
(`python -c 'while 1: pass'`, one process each) running beside it. The gap is from the loop's own last
step (its LOOP line) to `perfcore run`'s exit; the child's own calibrations after the script (run.json's
overhead.calibration: seconds, pairs, whether the time cap cut them short) are printed beside it.

The loop runs with torch's default intra-op threads (one a core, as most scripts leave it) and, with
--threads, with others: a calibration that uses the script's threads waits on a worker that a burner
holds off its core.

    .venv/bin/python bench/bench_busy_finish.py [--steps 20000] [--burners 0,2] [--threads 0] [--repeat 1]
                                                [--against OTHER_CHECKOUT]

--against runs another perfcore checkout (built in place, e.g. main's) right after this one's, in each
setting, so a before/after pair sees the same hour of a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from bench_finish import LOOP, _children_cpu, loop_line, perfcore_cmd


@contextmanager
def burners(n: int):
    """n processes that keep a core busy each, stopped (by their own handles) on the way out."""
    procs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(n)]
    try:
        time.sleep(0.5 if n else 0.0)  # running before the script starts
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def one(n: int, threads: int, work: Path, checkout: str | None = None) -> dict:
    out = work / f"run-{time.monotonic_ns()}"
    cmd = perfcore_cmd() + ["run", "--quiet", "--out", str(out), "--", sys.executable, str(LOOP), str(n), str(threads)]
    env = dict(os.environ, **({"PYTHONPATH": checkout} if checkout else {}))
    cpu0 = _children_cpu()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    t_end = time.time()
    if p.returncode != 0:
        raise SystemExit(f"perfcore run failed ({p.returncode}):\n{p.stderr[-3000:]}")
    t0, t1, *_, loop_cpu = loop_line(p.stderr)
    overhead = json.loads((out / "run.json").read_text()).get("overhead") or {}
    cal = overhead.get("calibration") or {}
    return {
        "loop_s": t1 - t0,
        "gap_s": t_end - t1,
        # perfcore run's CPU and its child's, less the child's up to the loop's end: an upper bound on what
        # finishing cost in CPU seconds (the parent's start and its warm-up imports are in it too).
        "finish_cpu": _children_cpu() - cpu0 - loop_cpu,
        "cal_s": cal.get("seconds"),
        "cal_pairs": cal.get("pairs"),
        "cal_cut": cal.get("cut_short"),
        "load": os.getloadavg()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--burners", default="0,2")
    ap.add_argument("--threads", default="0", help="the loop's intra-op threads, comma-separated (0: torch's default)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--against", metavar="DIR", help="also another perfcore checkout, built in place")
    args = ap.parse_args()
    checkouts = [("this", None)] + ([(args.against, str(Path(args.against).resolve()))] if args.against else [])
    print(
        "| perfcore | burners | loop threads | loop s | finish gap s (CPU s) | calibration s (pairs, cut short) | load |"
    )
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="perfcore-bench-busy-") as tmp:
        for _ in range(args.repeat):
            for b in (int(x) for x in args.burners.split(",")):
                for th in (int(x) for x in args.threads.split(",")):
                    for name, checkout in checkouts:
                        with burners(b):
                            r = one(args.steps, th, Path(tmp), checkout)
                        cal = "-" if r["cal_s"] is None else f"{r['cal_s']:.2f} ({r['cal_pairs']}, {r['cal_cut']})"
                        print(
                            f"| {name} | {b} | {th or 'default'} | {r['loop_s']:.1f} | {r['gap_s']:.2f} "
                            f"({r['finish_cpu']:.2f}) | {cal} | {r['load']:.1f} |",
                            flush=True,
                        )


if __name__ == "__main__":
    sys.exit(main())
