"""Memory of a StepTimer over a long run: raw detail must stay flat; only the per-step rows grow
(about a hundred bytes a step, the per-step CSV itself).

    python bench/bench_memory.py [--steps 100000]
"""

from __future__ import annotations

import argparse
import os

import psutil


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100_000)
    args = ap.parse_args()
    import perfcore

    proc = psutil.Process(os.getpid())
    timer = perfcore.StepTimer(device="cpu", warmup=5)
    marks = {args.steps // 10, args.steps // 2, args.steps}
    print("| steps | RSS MiB | raw spans held | rows |")
    print("|---|---|---|---|")
    base = proc.memory_info().rss
    for i, _ in enumerate(timer.load(range(args.steps)), start=1):
        with timer.transfer():
            pass
        with timer.compute():
            pass
        timer.step()
        if i in marks:
            store = timer.engine.store
            held = sum(len(p) for parts in store.pending.values() for p in parts) + len(store.detail["spans"])
            rows = sum(len(r) for r in store.rows)
            print(f"| {i} | {(proc.memory_info().rss - base) / 2**20:+.1f} | {held} | {rows} |", flush=True)
    df = timer.summary()
    print(
        f"\n{len(df)} steps summarised; raw spans held at the end: "
        f"{len(timer.engine.store.detail['spans'])} (detail of the kept steps)"
    )


if __name__ == "__main__":
    main()
