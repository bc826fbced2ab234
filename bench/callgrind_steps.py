"""Instructions per step, bare against `perfcore run`, counted by callgrind over a window of steady steps.

    python bench/callgrind_steps.py [--shape tiny] [--steps 300] [--warm 1000] [--top 25] [-- PERFCORE_RUN_OPTIONS]

A shared machine's timing cannot see a few microseconds a step; instruction counts can (they do not move with
the load). Each variant runs bench/overhead_train.py SHAPE under valgrind with instrumentation off, in its
lock-step mode (BENCH_RING): after the warm-up it waits; callgrind is zeroed and switched on, one block of
`steps` steps runs, the counts are dumped and switched off, and the script runs one more block and ends. So
start-up, imports and the exit are outside the window. Prints instructions per step of each variant, the
difference, and the functions whose own instructions differ most.

Under valgrind the loop runs ~50x slower, so perfcore's time-based upkeep (the memory sample's 20 ms spacing,
progress every 2 s, settling at most every 2 s, checkpoints every 30 s) fires ~50x more often per step than
it does at full speed: the callback's share of the difference is an upper bound; the native hooks' is exact.
The warm-up must pass the run's one-off work (the first progress write imports the verdict's modules, ~2 s in;
the first settle, 10 s or 4096 steps in): with --warm 30 the window held that import's compile (the parser's
functions at the top of the list).
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

HERE = Path(__file__).resolve().parent


def _wait_for(path: Path, word: str, proc: subprocess.Popen, timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while word not in path.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > end:
            raise RuntimeError(f"no {word} from the script (see {path})")
        time.sleep(0.5)


def window(tmp: Path, name: str, shape: str, steps: int, warm: int, run_opts: list[str] | None) -> Path:
    """One variant's callgrind file over `steps` steady steps (run_opts None: the bare script)."""
    fifo_in, fifo_out = tmp / f"{name}.in", tmp / f"{name}.out"
    for f in (fifo_in, fifo_out):
        os.mkfifo(f)
    out = tmp / f"cg.{name}"
    vg = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}.%p"]
    script = [sys.executable, str(HERE / "overhead_train.py"), str(warm + 2 * steps), shape]
    cmd = vg + script
    if run_opts is not None:
        cmd = [sys.executable, "-m", "perfcore", "run", "-q", "--out", str(tmp / f"run.{name}"), *run_opts, "--"] + cmd
    env = {**os.environ, "BENCH_RING": f"{fifo_in},{fifo_out},{steps},{warm}", "PYTHONUNBUFFERED": "1"}
    log = tmp / f"{name}.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, cwd=HERE)
    _wait_for(log, "READY", proc, 1800)
    pid = re.search(r"==(\d+)== Command", log.read_text()).group(1)
    rfd, wfd = os.open(fifo_out, os.O_RDWR), os.open(fifo_in, os.O_RDWR)
    for flag in ("-z", "-i on"):
        subprocess.run(["callgrind_control", *flag.split(), pid], check=True, capture_output=True)
    os.write(wfd, b"x")
    os.read(rfd, 1)  # the block is done; the script waits for the next turn
    for flag in ("-d", "-i off"):
        subprocess.run(["callgrind_control", *flag.split(), pid], check=True, capture_output=True)
    os.write(wfd, b"x")
    proc.wait()
    return next(tmp.glob(f"cg.{name}.*.1"))


def own_costs(path: Path) -> tuple[int, dict[str, int]]:
    """The window's total instructions and each function's own instructions (recursion levels folded)."""
    text = subprocess.run(
        ["callgrind_annotate", "--inclusive=no", "--threshold=100", str(path)], capture_output=True, text=True
    ).stdout
    total = int(re.search(r"^summary:\s*(\d+)", path.read_text(), re.M).group(1))
    funcs: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(.*)", line)
        if m and "PROGRAM TOTALS" not in line:
            name = re.sub(r"'\d+", "", m.group(2))
            name = re.sub(r"^.*/(?=[^/]+:)", "", name.split(" [")[0])
            funcs[name] = funcs.get(name, 0) + int(m.group(1).replace(",", ""))
    return total, funcs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="tiny")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warm", type=int, default=1000)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("run_opts", nargs="*", help="perfcore run options (after --), e.g. --no-lines --no-monitor")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="callgrind-steps-") as d:
        tmp = Path(d)
        bare = own_costs(window(tmp, "bare", a.shape, a.steps, a.warm, None))
        run = own_costs(window(tmp, "run", a.shape, a.steps, a.warm, a.run_opts))
    n = a.steps
    print(f"shape {a.shape}, {n} steps after {a.warm}; perfcore run {' '.join(a.run_opts) or '(defaults)'}")
    print(
        f"instructions a step: bare {bare[0] / n:,.0f}  perfcore run {run[0] / n:,.0f}  "
        f"difference {(run[0] - bare[0]) / n:+,.0f} ({(run[0] - bare[0]) / bare[0]:+.2%})"
    )
    names = set(bare[1]) | set(run[1])
    diff = sorted(((run[1].get(k, 0) - bare[1].get(k, 0)) / n, k) for k in names)
    print("largest differences in functions' own instructions, a step:")
    for per, k in diff[::-1][: a.top]:
        print(f"  {per:+10,.0f}  {k[:120]}")


if __name__ == "__main__":
    main()
