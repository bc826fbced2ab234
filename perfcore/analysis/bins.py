"""Per-step rows -> a fixed number of bins, so plots and reports cost the same at 1k and 1M steps.

Each bin holds consecutive steps: the mean ms of each label (the five still sum to the bin's mean
step time), the median and p90 step time, and whether it holds warm-up steps. Outliers are the
steps the verdict's figures leave out (analysis.uncertainty.outlier_mask), reported by step number (at
most a fixed count, slowest first), so that a plot marks the steps the brief says were set apart.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfcore.analysis.attribution import LABELS
from perfcore.analysis.uncertainty import outlier_mask

__all__ = ["bin_steps", "outliers", "BINS"]

BINS = 200


def bin_steps(steps: pd.DataFrame, bins: int = BINS) -> pd.DataFrame:
    """One row per bin: first_step, last_step, steps, warmup (any warm-up step inside),
    <label>_ms (mean), wall_ms (mean), median_ms, p90_ms. With no more steps than bins, one row per step."""
    n = len(steps)
    cols = ["first_step", "last_step", "steps", "warmup", "wall_ms", "median_ms", "p90_ms"] + [
        f"{lb}_ms" for lb in LABELS
    ]
    if n == 0:
        return pd.DataFrame({c: pd.Series(dtype=float) for c in cols})
    k = min(bins, n)
    # Bin i holds rows [i*n//k, (i+1)*n//k): equal sizes within one step, computed without a loop.
    edges = (np.arange(k + 1, dtype=np.int64) * n) // k
    step = steps["step"].to_numpy() if "step" in steps else np.arange(n)
    wall = steps["wall_ms"].to_numpy(dtype=np.float64)
    warm = steps["warmup"].to_numpy(dtype=bool) if "warmup" in steps else np.zeros(n, dtype=bool)
    count = np.diff(edges)
    out = {
        "first_step": step[edges[:-1]],
        "last_step": step[edges[1:] - 1],
        "steps": count,
        "warmup": np.add.reduceat(warm.astype(np.int64), edges[:-1]) > 0,
        "wall_ms": np.add.reduceat(wall, edges[:-1]) / count,
    }
    out["median_ms"], out["p90_ms"] = _quantiles(wall, edges[:-1], count)
    for lb in LABELS:
        col = f"{lb}_ms"
        v = steps[col].to_numpy(dtype=np.float64) if col in steps else np.zeros(n)
        out[col] = np.add.reduceat(v, edges[:-1]) / count
    return pd.DataFrame(out)[cols]


def _quantiles(wall: np.ndarray, starts: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each bin's median and p90, as np.quantile of its slice gives them: bins of one size (there are at most
    two sizes) as the rows of one array, a view's rows copied once (8 bytes a step), one call per size, where a
    call per bin cost a 20k-step run's finish a tenth of a second (and a groupby held ~110 bytes a row)."""
    q = np.empty((2, len(starts)))
    for size in np.unique(count):
        of = np.flatnonzero(count == size)
        rows = np.lib.stride_tricks.sliding_window_view(wall, int(size))[starts[of]]
        q[:, of] = np.quantile(rows, [0.5, 0.9], axis=1)
    return q[0], q[1]


def outliers(steps: pd.DataFrame, limit: int = 50) -> pd.DataFrame:
    """The measured steps set apart as outliers, as robust_breakdown sets them apart: step, wall_ms,
    slowest first (at most `limit` rows; `attrs['count']` holds how many there were in all)."""
    if not len(steps):
        return pd.DataFrame({"step": pd.Series(dtype=np.int64), "wall_ms": pd.Series(dtype=float)})
    # A few columns, never a row-selected copy of the whole table.
    keep = ~steps["warmup"].to_numpy(dtype=bool) if "warmup" in steps else np.ones(len(steps), dtype=bool)
    wall = steps["wall_ms"].to_numpy(dtype=np.float64)[keep]
    load = steps["load_ms"].to_numpy(dtype=np.float64)[keep] if "load_ms" in steps else np.zeros(len(wall))
    hit = np.flatnonzero(outlier_mask(wall, load))
    order = hit[np.argsort(-wall[hit], kind="stable")][:limit]
    step = steps["step"].to_numpy()[keep][order] if "step" in steps else order
    out = pd.DataFrame({"step": step, "wall_ms": wall[order]})
    out.attrs["count"] = int(len(hit))
    return out
