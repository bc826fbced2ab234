"""Memory over a run -> a probable leak (a steady rise per step, and from which step) or memory pressure
(allocator retries, use near capacity), as figures: report.memory_words says them. Pure functions on
per-step samples."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = ["memory_findings", "LEAK_R2", "LEAK_MIN_BYTES", "NEAR_CAPACITY"]

# A leak is a rise that a straight line explains well (r^2), that is not noise (at least 8 MiB or 5%
# of the starting level over the run), and that goes on: the last quarter still rises.
LEAK_R2 = 0.8
LEAK_MIN_BYTES = 8 * 2**20
NEAR_CAPACITY = 0.90


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    if len(x) < 3 or np.ptp(x) == 0:
        return 0.0, 0.0
    slope, icept = np.polyfit(x, y, 1)
    fit = slope * x + icept
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1 - float(((y - fit) ** 2).sum()) / ss_tot if ss_tot > 0 else 0.0
    return float(slope), r2


def memory_findings(
    steps: Sequence[int],
    mem_bytes: Sequence[float],
    *,
    kind: str = "cuda_allocated",
    capacity_bytes: int | None = None,
    alloc_retries: int | None = None,
) -> dict[str, Any]:
    """steps and mem_bytes: one sample per sampled step (peak allocated on a GPU, peak RSS on CPU).
    Returns {peak_bytes, growth_bytes_per_step, probable_leak, leak_from_step, pressure, findings:
    [{id, kind, and the finding's figures}]}."""
    x = np.asarray(steps, dtype=np.float64)
    y = np.asarray(mem_bytes, dtype=np.float64)
    keep = y >= 0
    x, y = x[keep], y[keep]
    out: dict[str, Any] = {
        "kind": kind,
        "peak_bytes": int(y.max()) if len(y) else None,
        "growth_bytes_per_step": 0.0,
        "probable_leak": False,
        "leak_from_step": None,
        "pressure": False,
        "findings": [],
    }
    if len(y) >= 4:
        # Where the rise starts: the split that best explains the samples as flat, then a straight line
        # (least squares over both pieces; a rise from the first step splits at 0).
        cands = np.unique(np.linspace(0, len(y) - 4, num=min(200, len(y) - 3)).astype(int))
        best = None
        for k in cands:
            head, tx, ty = y[:k], x[k:], y[k:]
            slope, icept = np.polyfit(tx, ty, 1)
            sse = float(((head - head.mean()) ** 2).sum() if k else 0.0) + float(((ty - slope * tx - icept) ** 2).sum())
            if best is None or sse < best[0] - 1e-9 * max(sse, 1.0):
                best = (sse, int(k))
        start = best[1]
        slope, r2 = _fit(x[start:], y[start:])
        tail_x, tail_y = x[start:], y[start:]
        growth = slope * (tail_x[-1] - tail_x[0])
        q = max(len(tail_y) * 3 // 4, 0)
        still_rising = len(tail_y) - q >= 2 and tail_y[-1] > tail_y[q]
        out["growth_bytes_per_step"] = slope
        out["r2"] = r2
        if slope > 0 and r2 >= LEAK_R2 and growth >= max(LEAK_MIN_BYTES, 0.05 * max(y[0], 1.0)) and still_rising:
            out["probable_leak"] = True
            out["leak_from_step"] = int(tail_x[0])
            out["findings"].append(
                {
                    "id": "memory_leak",
                    "kind": kind,
                    "bytes_per_step": slope,
                    "from_step": int(tail_x[0]),
                    "growth_bytes": growth,
                    "over_steps": int(tail_x[-1] - tail_x[0]),
                    "r2": r2,  # how much of the rise a straight line explains
                }
            )
    if alloc_retries:
        out["pressure"] = True
        out["findings"].append({"id": "memory_pressure", "kind": kind, "retries": int(alloc_retries)})
    if capacity_bytes and out["peak_bytes"] and out["peak_bytes"] >= NEAR_CAPACITY * capacity_bytes:
        out["pressure"] = True
        out["findings"].append(
            {
                "id": "memory_near_capacity",
                "kind": kind,
                "peak_bytes": out["peak_bytes"],
                "capacity_bytes": capacity_bytes,
            }
        )
    return out
