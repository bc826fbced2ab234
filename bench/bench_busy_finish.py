"""How long `perfcore run` takes to finish after the script's last step, on a quiet and on a busy machine:
tests/scripts/tiny_loop.py (N tiny steps) under `perfcore run`, with 0 and then B CPU burners
(`python -c 'while 1: pass'`, one process each) running beside it. The gap is from the loop's own last
step (its LOOP line) to `perfcore run`'s exit, with the CPU seconds both processes used in it; the child's
own calibrations after the script (run.json's overhead.calibration: seconds, pairs, whether the time cap cut
them short) are printed beside it.

The loop runs with torch's default intra-op threads (one a core, as most scripts leave it) and, with
--threads, with others: a calibration made on the script's threads took 6.8 s against 0.2 s on one, two
burners beside it.

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
import threading
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


class CpuTrail:
    """The CPU seconds of a process and its descendants, read every 50 ms while it runs: what they had used
    at a moment known only afterwards (the loop's last step)."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.proc, self.trail = psutil.Process(pid), []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                procs = [self.proc, *self.proc.children(recursive=True)]
                cpu = sum(sum(p.cpu_times()[:2]) for p in procs)
            except Exception:  # a process that just ended: the next read has the rest
                continue
            self.trail.append((time.time(), cpu))

    def at(self, t: float) -> float:
        self._stop.set()
        self._thread.join()
        return max((cpu for when, cpu in self.trail if when <= t), default=0.0)


def one(n: int, threads: int, work: Path, checkout: str | None = None) -> dict:
    out = work / f"run-{time.monotonic_ns()}"
    cmd = perfcore_cmd() + ["run", "--quiet", "--out", str(out), "--", sys.executable, str(LOOP), str(n), str(threads)]
    env = dict(os.environ, **({"PYTHONPATH": checkout} if checkout else {}))
    cpu0 = _children_cpu()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    trail = CpuTrail(p.pid)
    _, stderr = p.communicate()
    t_end = time.time()
    if p.returncode != 0:
        raise SystemExit(f"perfcore run failed ({p.returncode}):\n{stderr[-3000:]}")
    t0, t1, *_ = loop_line(stderr)
    total_cpu = _children_cpu() - cpu0
    overhead = json.loads((out / "run.json").read_text()).get("overhead") or {}
    cal = overhead.get("calibration") or {}
    return {
        "loop_s": t1 - t0,
        "gap_s": t_end - t1,
        # Both processes' CPU from the loop's last step on (read within 50 ms of it): what finishing cost.
        "finish_cpu": total_cpu - trail.at(t1),
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
