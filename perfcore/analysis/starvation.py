"""Loader starvation in numbers, from the steps table's per-step load time: how many steps waited for
data, how long those waits were, and the longest run of starved steps in a row. Pure; no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from perfcore.analysis.attribution import measured_mask
from perfcore.analysis.codec import Frac, Ms

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Starvation", "starvation", "MIN_WAIT_MS", "REL_WAIT"]

# A step waited when its exposed load time is over max(MIN_WAIT_MS, REL_WAIT x the median step): a
# fraction of a millisecond is the loader's own call cost, not a wait, and 5% of the step is where the
# verdict's tiers (10% warn) begin to care.
MIN_WAIT_MS = 0.5
REL_WAIT = 0.05


@dataclass(frozen=True)
class Starvation:
    steps: int  # measured steps (no warm-up, no evaluation)
    starved: int  # steps whose load time is over threshold_ms
    share: Frac  # starved / steps
    threshold_ms: Ms
    p50_wait_ms: Ms | None  # of the starved steps' load time
    p95_wait_ms: Ms | None
    longest_run: int  # most starved steps in a row
    longest_run_first_step: int | None  # the step number it starts at
    load_ms_per_step: Ms  # mean load over all measured steps


def _longest_run(flags: np.ndarray) -> tuple[int, int]:
    # (length, first index) of the longest run of True; (0, -1) when none.
    if not flags.any():
        return 0, -1
    edges = np.diff(np.concatenate(([0], flags.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    k = int(np.argmax(ends - starts))
    return int(ends[k] - starts[k]), int(starts[k])


def starvation(steps: pd.DataFrame, threshold_ms: float | None = None) -> Starvation:
    """Starvation over the measured steps of a steps table (load_ms, wall_ms, step; warmup and
    evaluation rows left out). threshold_ms: a wait that counts; default max(MIN_WAIT_MS, REL_WAIT x
    the median step's wall_ms)."""
    keep = measured_mask(steps)
    # The three columns' kept rows, never a row selection of the whole table (a copy of every column).
    n = int(keep.sum())
    load = steps["load_ms"].to_numpy(dtype=float)[keep]
    if threshold_ms is None:
        median = float(np.median(steps["wall_ms"].to_numpy(dtype=float)[keep])) if n else 0.0
        threshold_ms = max(MIN_WAIT_MS, REL_WAIT * median)
    if not threshold_ms >= 0:
        raise ValueError(f"a wait threshold is a number of ms >= 0, got {threshold_ms}")
    starved = load > threshold_ms
    waits = load[starved]
    run, first = _longest_run(starved)
    numbers = steps["step"].to_numpy()[keep] if "step" in steps else np.arange(n)
    return Starvation(
        steps=n,
        starved=int(starved.sum()),
        share=float(starved.mean()) if n else 0.0,
        threshold_ms=float(threshold_ms),
        p50_wait_ms=float(np.percentile(waits, 50)) if len(waits) else None,
        p95_wait_ms=float(np.percentile(waits, 95)) if len(waits) else None,
        longest_run=run,
        longest_run_first_step=int(numbers[first]) if run else None,
        load_ms_per_step=float(load.mean()) if len(load) else 0.0,
    )
