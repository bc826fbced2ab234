"""perfcore's own work on the training thread, as spans the attribution leaves out of the steps."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from perfcore.analysis import attribution
from perfcore.analysis.codec import Count, Ms, to_doc
from perfcore.analysis.run_parts import Calibrations, Overhead

__all__ = ["OwnWork", "OwnCosts", "beside_steps", "overhead_doc", "MATERIAL_OVERHEAD"]

# An overhead worth a warning: two uninstrumented processes of the same script differ by up to ~2% in the
# overhead bench's rings (memory layout), so less than this is within what a rerun moves the step by.
MATERIAL_OVERHEAD = 0.02


class OwnWork:
    """perfcore's own work on the training thread between two step ends (settling, following the
    device, memory samples, a progress file): `with` it, or record(start_ns) a stretch already timed,
    and its time becomes a span the attribution leaves out of the step it falls in, so the user's
    step time and labels never carry it. Nested stretches make one span (the outermost)."""

    __slots__ = ("_rec", "_now", "_depth", "_start_ns")

    def __init__(self, rec, now_ns: Callable[[], int]):
        self._rec, self._now, self._depth, self._start_ns = rec, now_ns, 0, 0

    def __enter__(self) -> "OwnWork":
        if self._depth == 0:
            self._start_ns = self._now()
        self._depth += 1
        return self

    def __exit__(self, *exc) -> bool:
        self._depth -= 1
        if self._depth == 0:
            self._rec.record(attribution.OWN_PHASE_ID, self._start_ns, self._now())
        return False

    def record(self, start_ns: int) -> int:
        """The stretch from start_ns until now (unless inside a `with`, which covers it); its ns."""
        t = self._now()
        if self._depth == 0:
            self._rec.record(attribution.OWN_PHASE_ID, int(start_ns), t)
        return t - int(start_ns)


@dataclasses.dataclass(frozen=True)
class OwnCosts:
    """How often the run's per-call wrappers ran on the training thread and what one call of each costs on
    this machine (run.child.upkeep.own_costs), with the line sampler's cost to that thread (sampler_ns, and
    sampler_share: its share of the measured steps' time) and what the calibrations took. A part's facts
    hold it as an object of these names; `error` says why the costs could not be measured."""

    sync_calls: Count = 0
    sync_call_ns: Ms = 0.0
    sync_calls_steps: int = -1  # the steps the counter was on (its cap took it off there); -1: the whole run
    fetches: Count = 0
    fetch_ns: Ms = 0.0
    passed_calls: Count = 0  # hooked calls that only went through a hook's call layer
    passed_call_ns: Ms = 0.0
    sampler_ns: Ms = 0.0
    sampler_share: float | None = None
    calibration: Calibrations | None = None
    error: str | None = None


def beside_steps(
    overhead: Overhead,
    costs: OwnCosts,
    steps: int,
    mean_wall_ms: float,
    typical_ms: float | None = None,
) -> Overhead:
    """A perfcore run's whole overhead: the timer's (its phases, and its own work left out of the steps)
    plus what the run's wrappers and its line sampler added inside the steps, each a cost measured on
    this machine times how often it ran (`costs`: sync_calls x sync_call_ns, fetches x fetch_ns,
    passed_calls x passed_call_ns, the hooked calls that only went through a hook's call layer, and
    sampler_ns, the line sampler's cost to the training thread: its time holding the interpreter and a
    measured hand-back per wake-up), over `steps` (warm-up included). The fraction is of the step the
    script would take without perfcore, which is what a side-by-side run against the uninstrumented
    script measures: `mean_wall_ms` is the mean over the same steps, warm-up included (a compile's seconds
    of warm-up are paid for in its sampler's wake-ups, so they are in the time those are a share of).

    The steady figure is what a typical step (`typical_ms`, the robust step; else the mean) pays: the pauses
    left out, and the sampler at its share of the measured steps' time (`sampler_share`: it is paid by the
    second, so a compile's seconds of warm-up sampling are not spread over a short run's steps)."""
    n = max(1, int(steps))
    sync_ms = costs.sync_calls * costs.sync_call_ns / 1e6
    # The counter is on until its cap (sync_calls_steps steps; -1: the whole run): the whole run pays its
    # calls once, spread over all steps; a typical step pays them only where it was on over most steps.
    on = n if costs.sync_calls_steps < 0 else min(max(1, costs.sync_calls_steps), n)
    sync_per_step = sync_ms / n
    fetch_per_step = costs.fetches * costs.fetch_ns / n / 1e6
    passed_per_step = costs.passed_calls * costs.passed_call_ns / n / 1e6
    sampler_per_step = costs.sampler_ns / n / 1e6
    # Kernel tracing's launches, taken out of the steps as perfcore's own and said apart from the own work.
    tracing = overhead.tracing_ms_per_step or 0.0
    own = overhead.own_ms_per_step or 0.0
    beside = sync_per_step + fetch_per_step + passed_per_step + sampler_per_step
    in_steps = overhead.phases_per_step * overhead.per_phase_ns / 1e6 + beside
    total = in_steps + own + tracing
    typical = typical_ms or mean_wall_ms
    share = costs.sampler_share
    steady_sampler = sampler_per_step if share is None else share * typical
    steady_sync = sync_ms / on if 2 * on > n else 0.0
    steady_in = in_steps - sync_per_step + steady_sync - sampler_per_step + steady_sampler
    # Between the pauses (settling, checkpoints, imports: own work many steps long, in few steps): what a
    # typical step pays, which a side-by-side bench's per-block medians measure.
    # The pauses are timed apart from the per-step sums, so on a loaded machine they can exceed them
    # by a little: never a negative cost.
    steady_own = max(0.0, own - (overhead.pause_ms_total or 0.0) / n)
    steady = max(0.0, steady_in + steady_own + tracing)
    bare = mean_wall_ms - in_steps
    fraction = total / bare if bare > 0 else 0.0
    typical_bare = typical - steady_in
    steady_fraction = steady / typical_bare if typical_bare > 0 else 0.0
    return dataclasses.replace(
        overhead,
        sync_calls_ms_per_step=sync_per_step,
        fetch_ms_per_step=fetch_per_step,
        passed_ms_per_step=passed_per_step,
        sampler_ms_per_step=sampler_per_step,
        steady_ms_per_step=steady,
        steady_fraction=steady_fraction,
        sampler_share=share,
        sampler_steady_ms_per_step=steady_sampler if share is not None else None,
        # The typical step's parts that differ from the whole run's (said beside the steady figure).
        steady_sync_calls_ms_per_step=steady_sync,
        steady_own_ms_per_step=steady_own,
        sync_call_ns=costs.sync_call_ns,
        sync_calls_steps=on,
        fetch_ns=costs.fetch_ns,
        passed_call_ns=costs.passed_call_ns,
        # What the calibrations after the script took (a busy machine's finish waits on them).
        calibration=costs.calibration or overhead.calibration,
        ms_per_step=total,
        fraction=fraction,
        # Worth a line when a typical step pays it, or when the pauses make the whole run pay it.
        material=max(fraction, steady_fraction) >= MATERIAL_OVERHEAD,
        # Each a count x a cost measured here (report/words/advice.py says each).
        counted=("phases", "own_work", "passed_calls", "sync_calls", "fetches", "sampler")
        + tuple(c for c in overhead.counted if c == "kernel_tracing"),
    )


def overhead_doc(overhead: Overhead) -> dict[str, Any]:
    """run.json's `overhead` of a part: the figures it has (one not measured is left out, as the reader
    takes a missing figure)."""
    return {k: v for k, v in to_doc(overhead).items() if v is not None}
