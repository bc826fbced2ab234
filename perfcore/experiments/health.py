"""Stage 1, health: a short run of the minimal loop (next batch -> forward -> loss, no optimizer),
device utilisation sampled alongside. The verdict is the one every command gives (verdict.decide on
the avoidable time per step); busy below 60% is shown next to it as the seed method's check."""

from __future__ import annotations

import dataclasses
from typing import Callable

from perfcore.analysis.command_results import BusyCheck, HealthResult, Heartbeat
from perfcore.analysis.verdict import judge
from perfcore.capture.sampler import heartbeat
from perfcore.experiments.measurement import Measurement, Runner, Trial
from perfcore.experiments.runner import as_runner
from perfcore.workloads import Workload

__all__ = ["health", "health_report", "HEALTHY_BUSY"]

HEALTHY_BUSY = 0.60


def health(
    runner: Runner | Workload,
    *,
    steps: int = 100,
    warmup: int = 5,
    interval_s: float = 0.1,
    progress: Callable[[int, int], None] | None = None,
    target: str | None = None,
    decide: bool = True,
) -> HealthResult:
    """One measured run of the loop (a workload's forward-only loop, or the script's own), judged: health's
    one result (health.json is its to_dict). target: how the next command names a workload; decide: False
    where a later stage decides the one verdict (the demo): the measurement only."""
    runner = as_runner(runner, target)
    m = runner.measure(Trial(steps=steps, warmup=warmup, train=False, interval_s=interval_s), progress)
    next_cmd = f"perfcore diagnose {runner.target}"
    return health_report(
        m, runner.name, next_cmd, forward_only=runner.forward_only, decide=decide, note=runner.health_note
    )


def health_report(
    m: Measurement,
    name: str,
    next_cmd: str,
    *,
    forward_only: bool = False,
    decide: bool = True,
    note: str | None = None,
) -> HealthResult:
    """health's result from one measured run (a workload's or a script's): the one verdict, busy against
    HEALTHY_BUSY, the next command when not healthy, and the heartbeat when the busy series has one.
    decide=False: the measurement only (undecided verdict; healthy from busy alone). Facts only: the
    words are report.words.verdict'; note: a code, what the loop leaves out."""
    verdict = judge(dataclasses.replace(m.verdict_evidence(), forward_only=forward_only)) if decide else None
    busy, busy_std = (m.busy_mean, m.busy_std) if m.busy_series else (0.0, 0.0)
    healthy = verdict.healthy if verdict is not None else bool(busy >= HEALTHY_BUSY)
    hb = heartbeat(list(m.busy_series), m.busy_spacing_s)
    return HealthResult(
        workload=name,
        device=m.device,
        steps=m.steps,
        step_ms=m.step_ms,
        samples_per_s=m.samples_per_s,
        busy_std=busy_std,
        busy_source=m.busy_source,
        cpu_percent=m.cpu_percent,
        breakdown_ms=dict(m.breakdown_ms),
        busy_mean=busy,
        healthy=healthy,
        verdict=verdict,
        # The seed method's busy check beside the verdict: the figures its line is made from.
        busy_check=BusyCheck(
            threshold=HEALTHY_BUSY,
            decided=decide,
            # Low device utilisation with nothing avoidable above a tier: the device's work is small.
            small_work=bool(healthy and busy < HEALTHY_BUSY and m.busy_source == "gpu_util"),
            # A forward-only loop's gain is larger than a training step's: said beside a named cause.
            forward_only=bool(forward_only and verdict is not None and verdict.named),
        ),
        next=None if healthy else next_cmd,
        busy_series=m.busy_series,
        busy_spacing_s=m.busy_spacing_s,
        heartbeat=Heartbeat(**hb) if hb else None,
        interference=m.interference,
        note=note or None,
        script_exit=m.failure,
    )
