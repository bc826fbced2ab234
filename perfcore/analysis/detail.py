"""Which settled steps keep their raw intervals (host spans, kernels, copies, events) for the trace.

Every step keeps them, from the first, until DETAIL_STEPS steps or DETAIL_ROWS intervals are kept
(whichever comes first): that bounds the training process's memory (~50 bytes an interval, 10 MB
at the cap) and the trace's size however long the run. Past the cap only a window keeps them: the
first step, the slowest so far and the median and last step of the latest settled chunk.
"""

from __future__ import annotations

from typing import Any

import numpy as np


__all__ = ["DetailSteps", "DETAIL_STEPS", "DETAIL_ROWS"]

DETAIL_STEPS = 10_000
DETAIL_ROWS = 200_000


class DetailSteps:
    def __init__(self) -> None:
        self.through = 0  # steps [0, through) keep every interval ...
        self.end_ns = 0  # ... that is, every interval that starts before this instant
        self.capped = False  # the cap was reached: later steps keep theirs only in the window
        self.window: dict[int, tuple[int, int]] = {}  # step -> its [start, end), past the cap
        self.slowest: tuple[int, int] | None = None  # (wall ns, step)

    def choose(self, df: dict[str, np.ndarray], raw: dict[str, dict[str, np.ndarray]], held: int) -> None:
        """After settling the steps of df (step, start_ns, wall_ns): extend the every-step prefix by as
        many of them as the cap still holds (`held`: intervals kept now), and move the window."""
        walls, starts, steps = np.asarray(df["wall_ns"]), np.asarray(df["start_ns"]), np.asarray(df["step"])
        first = int(steps[0])
        i_slow = int(np.argmax(walls))
        if self.slowest is None or walls[i_slow] > self.slowest[0]:
            self.slowest = (int(walls[i_slow]), int(steps[i_slow]))
        ends = starts + walls + (np.asarray(df["perfcore_ns"]) if "perfcore_ns" in df else 0)  # wall leaves it out
        if not self.capped:
            per_step = np.zeros(len(walls), dtype=np.int64)
            for f in raw.values():
                if len(f["start_ns"]):
                    idx = np.searchsorted(ends, np.asarray(f["start_ns"]), side="right")
                    per_step += np.bincount(idx[idx < len(walls)], minlength=len(walls))
            fit = int(np.searchsorted(np.cumsum(per_step), DETAIL_ROWS - held, side="right"))
            n = min(fit, DETAIL_STEPS - first, len(walls))
            if n > 0:
                self.through, self.end_ns = first + n, int(ends[n - 1])
            self.capped = n < len(walls)
        if not self.capped:
            self.window = {}
            return
        i_med = int(np.argsort(walls)[len(walls) // 2])
        want = {0, self.slowest[1], first + i_med, first + len(walls) - 1}

        def span(step: int) -> tuple[int, int] | None:
            if step in self.window:
                return self.window[step]
            i = step - first
            return (int(starts[i]), int(ends[i])) if 0 <= i < len(walls) else None

        self.window = {s: w for s in want if s >= self.through and (w := span(s)) is not None}

    def mask(self, start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
        """The intervals that stay: those of the prefix's steps and those overlapping a window step."""
        m = start_ns < self.end_ns
        for lo, hi in self.window.values():
            m |= (start_ns < hi) & (end_ns > lo)
        return m

    def summary(self, settled: int) -> dict[str, Any]:
        return {
            "through": self.through,
            "window": sorted(self.window),
            "capped": self.capped,
            "settled": settled,
            "cap_steps": DETAIL_STEPS,
            "cap_rows": DETAIL_ROWS,
        }
