"""The one interface every experiment runs on: a Runner measures a training loop under changed
DataLoader settings (or with its batches replayed: synthetic data) and hands back a Measurement.
Two runners: a Workload in this process (runner.WorkloadRunner) and an unmodified command under
`perfcore run` (scripts.ScriptRunner). health, diagnose and sweep are written once, over this."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

if TYPE_CHECKING:
    from perfcore.analysis.command_results import ScriptExit, WorkerProfile
    from perfcore.analysis.results import Interference, Verdict
    from perfcore.analysis.run_report import RunReport
    from perfcore.analysis.verdict import Evidence

__all__ = ["Measurement", "Settings", "Trial", "Runner", "Interrupted", "SETTINGS"]


class Interrupted(Exception):
    """Raised by a runner's measurement when the user pressed Ctrl-C (a child that ended on SIGINT)."""


@dataclass(frozen=True)
class Settings:
    """The loop's DataLoader settings as measured (None: not known; a script's batch size is the items its
    workers saw per batch, a mean)."""

    batch_size: int | float | None = None
    num_workers: int | None = None
    pin_memory: bool | None = None
    prefetch_factor: int | None = None


SETTINGS = tuple(f.name for f in fields(Settings))


@dataclass(frozen=True)
class Measurement:
    """One measured run of the loop: the numbers every experiment reads, from either runner, and the run as
    its runner decided it (`run`: its verdict, trimmed breakdown and interference; in this process, `table`
    its steps). oom: the loop ran out of memory before any measured step (no numbers); steps == 0 with no
    oom: the run ended in warm-up (exit_code, and `ended`: the run document's words for how)."""

    device: str
    steps: int
    step_ms: float
    settings: Settings = Settings()
    step_sem_ms: float | None = None
    samples_per_s: float = 0.0
    busy_source: str = "compute_share"
    busy_series: tuple[float, ...] = ()
    busy_spacing_s: float = 0.0
    cpu_percent: float | None = None
    peak_mem_bytes: int | None = None
    breakdown_ms: Mapping[str, float] = field(default_factory=dict)
    breakdown_fraction: Mapping[str, float] = field(default_factory=dict)
    decoder: str | None = None
    synthetic: bool = False
    oom: bool = False
    error: str | None = None
    failure: "ScriptExit | None" = None  # a script that failed after measured steps: its numbers are partial
    ended: str | None = None
    exit_code: int | None = None
    run: "RunReport | None" = None
    table: Any = None

    @property
    def verdict(self) -> "Verdict | None":
        """The run's own verdict where its runner decided one (a sweep's configuration)."""
        return self.run.verdict if self.run is not None and self.run.verdict.decided else None

    @property
    def interference(self) -> "Interference | None":
        return self.run.interference if self.run is not None else None

    @property
    def busy_mean(self) -> float:
        return sum(self.busy_series) / len(self.busy_series) if self.busy_series else math.nan

    @property
    def busy_std(self) -> float:
        if not self.busy_series:
            return math.nan
        m = self.busy_mean
        return math.sqrt(sum((b - m) ** 2 for b in self.busy_series) / len(self.busy_series))

    def verdict_evidence(self) -> "Evidence":
        """What a verdict on this run is judged on (analysis.verdict.judge's): its step and breakdown, trimmed
        where the run kept its robust breakdown, and what else used the machine."""
        from perfcore.analysis.verdict import evidence_of

        return evidence_of(
            self.step_ms,
            self.breakdown_ms,
            robust=self.run.breakdown_robust if self.run is not None else None,
            device=self.device,
            steps=self.steps,
            interference=self.interference,
        )


@dataclass(frozen=True)
class Trial:
    """What one measurement runs: steps after warm-up, with these changes to the loop. tag names a
    script's run folder (a workload keeps nothing on disk); decide: judge the run's own verdict (a
    sweep's configuration), not only measure it; train=False: health's forward-only loop."""

    steps: int
    warmup: int
    train: bool = True
    synthetic: bool = False
    overrides: Mapping[str, Any] | None = None
    decoder: str | None = None
    interval_s: float | None = None
    tag: str = "run"
    decide: bool = False


class Runner(Protocol):
    """What health, diagnose and sweep need of the thing they measure."""

    name: str  # as the documents name it
    target: str  # as a next command names it: `perfcore diagnose <target>`
    forward_only: bool  # health's loop is forward-only (a workload); a script runs its own loop
    health_note: str | None  # a code said by report.words.findings (NOTES): what health's loop leaves out
    decoder_skip: str  # why diagnose's experiment C is skipped with no other decoder: a code (NOTES)

    def measure(self, trial: Trial, progress: Callable[[int, int], None] | None = None) -> Measurement: ...

    # The loop's own DataLoader settings, which a sweep keeps on the axes not asked for (a script's); None:
    # every axis is set (a workload's loader, rebuilt per configuration).
    def own_settings(self) -> dict[str, Any] | None: ...

    def other_decoders(self) -> list[str]: ...

    def worker_profile(self, baseline: Measurement) -> "WorkerProfile": ...
