"""Where a dataset's time goes: cProfile of dataset[i] in this process, for diagnose's account of loading."""

from __future__ import annotations

import cProfile
import os
import pstats
import time

from perfcore.analysis.command_results import ProfileRow, WorkerProfile
from perfcore.workloads import Workload

__all__ = ["worker_profile"]


def worker_profile(workload: Workload, items: int = 48, top: int = 8) -> WorkerProfile:
    """cProfile of dataset[i] for a few items, in this process, plus its CPU/wall ratio: a ratio
    far below 1 means __getitem__ waits (I/O), near 1 means it computes (decode, augment)."""
    ds = workload.dataset
    n = min(items, len(ds))
    prof = cProfile.Profile()
    c0, w0 = time.process_time(), time.perf_counter()
    prof.enable()
    for i in range(n):
        ds[i]
    prof.disable()
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    stats = pstats.Stats(prof)
    rows = [
        ProfileRow(f"{func} ({os.path.basename(file)}:{line})" if file != "~" else func, tt / n * 1e3, ct / n * 1e3, nc)
        for (file, line, func), (cc, nc, tt, ct, callers) in stats.stats.items()
    ]
    rows.sort(key=lambda r: r.self_ms_per_item, reverse=True)
    return WorkerProfile(n, wall / n * 1e3, cpu / wall if wall else 0.0, tuple(rows[:top]))
