"""Host cost of one phase enter+exit, side by side in one run (this machine is noisy: compare ratios).

    python bench/bench_timing.py [--n 200000] [--repeats 7]

Rows: perfcore's `with timer.compute():` on the CPU path; a plain-Python context manager around
time.perf_counter_ns (reused object, the cheapest way to write one); the same written with
contextlib; torch.profiler.record_function inside an active torch.profiler.profile (CPU activity).
Targets (issue #3): perfcore <= 300 ns, >= 2x cheaper than the plain-Python manager, >= 5x cheaper
than record_function.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time


class PlainTimer:
    """What people write by hand: one reusable context manager that appends (start, end) pairs."""

    __slots__ = ("t0", "spans")

    def __init__(self):
        self.spans = []

    def compute(self):
        return self

    def __enter__(self):
        self.t0 = time.perf_counter_ns()
        return self

    def __exit__(self, *exc):
        self.spans.append((self.t0, time.perf_counter_ns()))
        return False


def per_phase_ns(make_cm, n: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(n):
        with make_cm():
            pass
    return (time.perf_counter_ns() - t0) / n


def loop_ns(n: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(n):
        pass
    return (time.perf_counter_ns() - t0) / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()

    import torch

    import perfcore

    timer = perfcore.StepTimer(device="cpu")
    plain = PlainTimer()
    spans = []

    @contextlib.contextmanager
    def ctxlib():
        t0 = time.perf_counter_ns()
        yield
        spans.append((t0, time.perf_counter_ns()))

    rows = {
        "perfcore timer.compute()": lambda: timer.compute(),
        "plain-Python context manager": plain.compute,
        "contextlib.contextmanager": ctxlib,
    }
    results = {k: [] for k in list(rows) + ["torch.profiler.record_function (profiling)"]}
    empty = []
    n_rf = max(1000, args.n // 20)  # record_function is slow; fewer iterations, same per-call figure
    for _ in range(args.repeats):  # interleaved, so drift hits every row alike
        empty.append(loop_ns(args.n))
        for name, fn in rows.items():
            results[name].append(per_phase_ns(fn, args.n))
            timer.engine.spans.drain()
            plain.spans.clear()
            spans.clear()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            results["torch.profiler.record_function (profiling)"].append(
                per_phase_ns(lambda: torch.profiler.record_function("compute"), n_rf)
            )
    base = statistics.median(empty)
    med = {k: statistics.median(v) - base for k, v in results.items()}
    ours = med["perfcore timer.compute()"]
    print(f"host cost per phase enter+exit (median of {args.repeats}, loop cost {base:.0f} ns subtracted)")
    print("| variant | ns/phase | x perfcore |")
    print("|---|---|---|")
    for k, v in med.items():
        print(f"| {k} | {v:.0f} | {v / ours:.1f} |")
    print()
    print(f"target perfcore <= 300 ns: {'PASS' if ours <= 300 else 'FAIL'} ({ours:.0f} ns)")
    r_plain = med["plain-Python context manager"] / ours
    r_rf = med["torch.profiler.record_function (profiling)"] / ours
    print(f"target >= 2x cheaper than plain Python: {'PASS' if r_plain >= 2 else 'FAIL'} ({r_plain:.2f}x)")
    print(f"target >= 5x cheaper than record_function: {'PASS' if r_rf >= 5 else 'FAIL'} ({r_rf:.1f}x)")


if __name__ == "__main__":
    main()
