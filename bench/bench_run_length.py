"""What `perfcore run` costs over run length: a tiny loop (2-layer MLP, batch 16, CPU) of N steps, bare
and under `perfcore run`. Wall time, the peak RSS (VmHWM) of the training process and of perfcore's
own process, and the run folder's size (and its largest files).

    python bench/bench_run_length.py [--steps 10000 100000 1000000] [--out /tmp/runlen]

Peak RSS is read from /proc/<pid>/status every 20 ms until the process exits: the kernel's
high-water mark, so a peak between two reads is still seen (only the last 20 ms can be missed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

LOOP = """
import sys, torch
torch.set_num_threads(1)
n = int(sys.argv[1])
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(16, 32), torch.randn(16, 1)
for _ in range(n):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _hwm(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def measure(cmd: list[str], script_is_child: bool) -> dict[str, float]:
    """Runs cmd; wall and the peak RSS of it and (script_is_child) of its Python child."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    top = child = 0
    child_pid = None
    while proc.poll() is None:
        top = max(top, _hwm(proc.pid))
        if script_is_child:
            if child_pid is None:
                kids = (
                    [p for p in psutil.Process(proc.pid).children() if "python" in p.name()]
                    if psutil.pid_exists(proc.pid)
                    else []
                )
                child_pid = kids[0].pid if kids else None
            if child_pid is not None:
                child = max(child, _hwm(child_pid))
        time.sleep(0.02)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} failed ({proc.returncode}): {err[-2000:]}")
    return {"wall_s": wall, "top_mib": top / 2**20, "child_mib": child / 2**20}


def folder_size(out: Path) -> tuple[float, list[str]]:
    files = [p for p in out.rglob("*") if p.is_file() and not p.is_symlink()]
    total = sum(p.stat().st_size for p in files)
    big = sorted(files, key=lambda p: -p.stat().st_size)[:4]
    return total / 1e6, [f"{p.relative_to(out)} {p.stat().st_size / 1e6:.1f}" for p in big]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    work = args.out or Path(tempfile.mkdtemp(prefix="runlen-"))
    work.mkdir(parents=True, exist_ok=True)
    loop = work / "loop.py"
    loop.write_text(LOOP)
    print(
        "| steps | bare wall s | bare RSS MiB | perfcore run wall s | training process peak MiB (vs bare) "
        "| perfcore process peak MiB | folder MB | largest files (MB) |"
    )
    print("|---|---|---|---|---|---|---|---|", flush=True)
    for n in args.steps:
        bare = measure([sys.executable, str(loop), str(n)], script_is_child=False)
        out = work / f"run-{n}"
        shutil.rmtree(out, ignore_errors=True)
        run = measure(
            [
                sys.executable,
                "-m",
                "perfcore",
                "run",
                "--quiet",
                "--out",
                str(out),
                "--",
                sys.executable,
                str(loop),
                str(n),
            ],
            script_is_child=True,
        )
        size, big = folder_size(out)
        print(
            f"| {n:,} | {bare['wall_s']:.1f} | {bare['top_mib']:.0f} | {run['wall_s']:.1f} | "
            f"{run['child_mib']:.0f} ({run['child_mib'] - bare['top_mib']:+.0f}) | {run['top_mib']:.0f} | "
            f"{size:.1f} | {', '.join(big)} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
