"""Why diagnose's synthetic-data run can compute slower than the real one: the demo's training step
timed side by side in one process, on a fresh batch vs a replayed one (what experiment A hands out),
then on the replayed batches with 1 vs 2 intra-op threads beside the other processes' CPU (/proc/stat).
Prints medians and ratios. Usage: python bench/bench_synthetic_compute.py [rounds]"""

from __future__ import annotations

import os
import statistics
import sys
import time


def _ticks() -> tuple[int, int]:
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(f), f[3] + f[4]  # all, idle + iowait


def main(rounds: int = 6) -> None:
    import torch

    from perfcore.workloads import load_workload

    w = load_workload("demo")
    model, opt, loss_fn = w.model, w.optimizer, w.loss_fn
    model.train()
    loader = w.loader()
    it = iter(loader)
    replay = [next(it) for _ in range(8)]

    def fresh():
        nonlocal it
        try:
            return next(it)
        except StopIteration:
            it = iter(loader)
            return next(it)

    def step(x, y) -> float:
        t = time.perf_counter()
        loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return (time.perf_counter() - t) * 1e3

    x = replay[0][0]
    print(
        f"replayed batch: {x.dtype} {tuple(x.shape)} contiguous={x.is_contiguous()}; threads {torch.get_num_threads()}"
    )
    real, syn = [], []
    for i in range(rounds * 4):  # interleaved, so the machine's state is shared by both
        real.append(step(*fresh()))
        syn.append(step(*replay[i % len(replay)]))
    r, s = statistics.median(real), statistics.median(syn)
    print(f"compute per step: fresh batch {r:.1f} ms, replayed {s:.1f} ms, replayed/fresh {s / r:.2f}x")

    per = {1: [], 2: []}
    others = {1: [], 2: []}
    hz, cores = os.sysconf("SC_CLK_TCK"), os.cpu_count() or 1
    for _ in range(rounds):
        for n in (1, 2):
            torch.set_num_threads(n)
            (a0, i0), c0 = _ticks(), time.process_time()
            per[n] += [step(*replay[k]) for k in range(4)]
            (a1, i1), c1 = _ticks(), time.process_time()
            if a1 > a0:  # the machine's busy cores less this process's own
                others[n].append(((a1 - a0) - (i1 - i0) - (c1 - c0) * hz) / (a1 - a0) * cores)
    for n in (1, 2):
        print(
            f"{n} intra-op thread(s): compute {statistics.median(per[n]):.1f} ms per step, "
            f"other processes {statistics.median(others[n] or [float('nan')]):.1f} of {cores} cores"
        )
    print(f"2 threads / 1 thread: {statistics.median(per[2]) / statistics.median(per[1]):.2f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)
