"""Kernel tracing's mode and its cost: which CUPTI records a run takes, what one traced launch costs the
launching thread (measured in the run), and that cost kept out of the user's steps as perfcore's own.

The mode. "lean", the default, takes the records the attribution needs: kernels, memcpys and memsets
(CONCURRENT_KERNEL, MEMCPY, MEMSET), every step, and places each kernel in its phase by the phase's CUDA
events (capture/launches.py), which GPU-label phases record on every step anyway. "full" adds CUPTI's
runtime and driver API records and external correlation (the phase pushed as an id), which tie each
launch to its phase by correlation id: every launch then pays for two API records and CUPTI's callbacks
around both calls. On the H200 the full set cost ~16 us a launch, as much as torch.profiler on the same
loop (bench/RESULTS.md, 2026-12-04, run 2).

Why every step rather than short windows of traced steps with events between (measured on no device
yet: the choice is argued, the figures below decide it). Enabling CONCURRENT_KERNEL generates CUPTI's
instrumentation for the modules loaded by then, which kineto saw stall a process for seconds (kineto
#542), and disabling it may deadlock on CUPTI 13.0 GA (tracer.h): a window's switch costs more than
the launches it saves, where it is safe at all. The steps between windows would be labelled by events,
which count a launch-bound phase's idle gaps between kernels as compute: the loop tracing is there to
get right. And every per-step kernel or copy figure (pageable bytes a step, a phase's GPU time) would
need the traced steps as its denominator. What tracing still costs is measured here and kept out.

The cost. Before the tracer starts, a block of launches of an empty kernel (csrc/calib.cu, its records
left out of the run's) is timed on the host; after, the same with tracing on. The difference of the
medians is one traced launch's cost (CUPTI's work in the launch call). Each settled step's traced
launches (kernels, memsets, copies, counted in the step they end in) times that cost is taken out of the
step's wall and host time into perfcore's own: no more than its host time, since a launch that waited
behind GPU work delayed nothing. A cost on the GPU side (instrumented kernels running longer) is not
in the figure.
"""

from __future__ import annotations

import statistics
from typing import Any, Callable, Sequence

import numpy as np

from perfcore.analysis.run_parts import Tracing as RunTracing
from perfcore.analysis.run_parts import TracingCalibration
from perfcore.errors import UsageError

__all__ = ["KERNEL_MODES", "kernel_mode", "Tracing", "probe", "overhead", "facts", "PROBE_LAUNCHES", "PROBE_BLOCKS"]

KERNEL_MODES = ("lean", "full")
# Launches per calibration block and blocks each way: ~1 ms a block at ~4 us a launch, and the median of
# three so one preempted block does not set the figure.
PROBE_LAUNCHES, PROBE_BLOCKS = 256, 3
_KINDS = {"lean": ["concurrent_kernel", "memcpy", "memset"]}
_KINDS["full"] = _KINDS["lean"] + ["synchronization", "runtime", "driver", "external_correlation", "overhead"]


def kernel_mode(kernels: Any) -> str | None:
    """StepTimer's kernels= as a mode: False -> None (no tracing), True -> "lean", or a mode by name."""
    if kernels is None or kernels is False:
        return None
    if kernels is True:
        return "lean"
    if kernels in KERNEL_MODES:
        return str(kernels)
    raise UsageError(f"kernels must be True, False, 'lean' or 'full', got {kernels!r}")


def probe(device: int, measure: Callable[[int, int, int], Sequence[float]] | None = None) -> list[float] | None:
    """Host ns per launch of the calibration kernel on `device`, a figure per block; None where it could
    not be measured (the launch failed: it never raises into the run)."""
    try:
        if measure is None:
            from perfcore._native import native

            measure = native().measure_probe_launches
        return [float(x) for x in measure(int(device), PROBE_LAUNCHES, PROBE_BLOCKS)]
    except Exception:
        return None


def overhead(tracing: "Tracing | None", rows: int, steps_traced: int) -> dict[str, Any]:
    """run.json overhead's tracing figures, in every run: zeros where nothing was traced (no launch paid)."""
    if tracing is None:
        return {"tracing_ms_per_step": 0.0, "tracing_ns_per_launch": 0.0, "launches_per_step": 0.0}
    return tracing.overhead(rows, steps_traced)


def facts(tracing: "Tracing | None", steps_traced: int) -> RunTracing:
    """run.json capture.tracing, in every run: mode "off" with no step traced where kernels were not."""
    if tracing is None:
        return RunTracing("off")
    return tracing.facts(steps_traced)


class Tracing:
    """One run's kernel tracing: its mode, the backend that traced, the calibration, and the cost kept
    out of the settled steps (the store calls keep_out on each slice it settles)."""

    def __init__(self, mode: str, backend: str, untraced: list[float] | None, traced: list[float] | None):
        self.mode, self.backend = mode, backend
        self.untraced, self.traced = untraced, traced
        self.launch_cost_ns = 0.0
        if untraced and traced:
            self.launch_cost_ns = max(0.0, statistics.median(traced) - statistics.median(untraced))
        self.launches = 0  # traced launches in the settled steps
        self.taken_ns = 0  # what was taken out of their wall time

    @property
    def tags_phases(self) -> bool:
        """Phases push their id as CUPTI's external correlation id (only the full mode's records carry it)."""
        return self.mode == "full"

    def keep_out(self, raw: dict, cols: dict[str, np.ndarray], s0: np.ndarray, s1: np.ndarray) -> None:
        """The traced launches of steps with these starts and ends, counted, and their cost moved from
        wall_ns and host_ns into perfcore_ns (cols: attribution.step_columns' arrays, changed in place)."""
        n = np.zeros(len(s1), dtype=np.int64)
        for table in ("kernels", "copies"):
            end = np.asarray(raw[table]["end_ns"], dtype=np.int64)
            step = np.searchsorted(s1, end, side="left")
            ok = (step < len(s1)) & (end > s0[0])
            n += np.bincount(step[ok], minlength=len(s1))
        self.launches += int(n.sum())
        if self.launch_cost_ns <= 0:
            return
        take = np.minimum((n * self.launch_cost_ns).astype(np.int64), np.maximum(cols["host_ns"], 0))
        cols["wall_ns"] = cols["wall_ns"] - take
        cols["host_ns"] = cols["host_ns"] - take
        cols["perfcore_ns"] = cols["perfcore_ns"] + take
        self.taken_ns += int(take.sum())

    def overhead(self, rows: int, steps_traced: int) -> dict[str, Any]:
        """run.json overhead's tracing figures over `rows` settled steps, `steps_traced` of them traced."""
        return {
            "tracing_ms_per_step": self.taken_ns / max(1, rows) / 1e6,
            "tracing_ns_per_launch": self.launch_cost_ns if self.measured else None,
            "launches_per_step": self.launches / max(1, steps_traced),
        }

    @property
    def measured(self) -> bool:
        return bool(self.untraced and self.traced)

    def facts(self, steps_traced: int) -> RunTracing:
        """run.json capture.tracing: what was traced, how kernels found their phase, the calibration."""
        spread = (
            max(max(self.traced) - min(self.traced), max(self.untraced) - min(self.untraced)) if self.measured else None
        )
        return RunTracing(
            self.mode,
            int(steps_traced),
            tuple(_KINDS[self.mode]),
            self.launches,
            self.backend,
            "correlation" if self.tags_phases else "event_windows",
            TracingCalibration(
                PROBE_LAUNCHES,
                tuple(self.untraced) if self.untraced else self.untraced,
                tuple(self.traced) if self.traced else self.traced,
                spread,
                self.measured,
            ),
        )
