"""What health, diagnose, sweep and the demo each find, as one frozen result made of typed parts: their
measurements, the verdict decided once with its checks, the findings, and (the demo) the files written.
health.json, diagnose.json, sweep.json and demo.json are these results' documents (to_dict: the codec's,
facts and codes only), read back through from_dict, which checks every value (codec.BadDocument names the
first that is not what it should be); analysis.migrate turns an older document into this shape first."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from perfcore.analysis.checks import Busy, Experiment
from perfcore.analysis.codec import from_doc, to_doc
from perfcore.analysis.findings import Finding
from perfcore.analysis.results import Interference, Verdict
from perfcore.analysis.run_context import Exit, LoaderPlan, Outcome
from perfcore.analysis.run_report import RunReport

__all__ = [
    "HealthResult",
    "DiagnoseResult",
    "SweepResult",
    "DemoResult",
    "ScriptExit",
    "BusyCheck",
    "Heartbeat",
    "ExperimentRow",
    "Skipped",
    "WorkerProfile",
    "ProfileRow",
    "DemoWorkload",
]


@dataclasses.dataclass(frozen=True)
class ScriptExit:
    """A script that failed after measured steps (its results are partial): its exit code, the measured steps,
    which of diagnose's runs failed (baseline, synthetic, workers; None for health's) with the settings it
    changed, whether it ran out of memory, and how it ended (its own end and perfcore run's outcome)."""

    code: int
    steps: int = 0
    run: str | None = None
    settings: dict[str, Any] | None = None
    oom: bool = False
    exit: Exit | None = None
    outcome: Outcome | None = None


@dataclasses.dataclass(frozen=True)
class BusyCheck:
    """The seed method's busy check beside the verdict: the threshold, whether health decided a verdict of
    its own, low utilisation with nothing avoidable above a tier (small work), and a forward-only loop's
    named cause (whose gain is larger than a training step's)."""

    threshold: float = 0.6
    decided: bool = True
    small_work: bool = False
    forward_only: bool = False


@dataclasses.dataclass(frozen=True)
class Heartbeat:
    """A regular swing of the busy series between busy and near-idle (capture.sampler.heartbeat)."""

    period_s: float
    period_samples: int | None = None
    amplitude: float | None = None
    correlation: float | None = None


class _Document:
    """A command's result whose document is its SCHEMA and its fields, read back checked (codec.from_doc)."""

    SCHEMA: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        return {"schema": self.SCHEMA, **to_doc(self)}

    @classmethod
    def from_dict(cls, d: Any) -> Any:
        return from_doc(cls, d)


@dataclasses.dataclass(frozen=True)
class HealthResult(_Document):
    """health's result: one measured run of the minimal loop (its figures and breakdown), the verdict (None
    where a later stage decides, the demo's), the seed method's busy check beside it, the next command when
    not healthy, the busy series (for the chart) and the heartbeat found in it."""

    SCHEMA = "perfcore.health/2"

    workload: str
    device: str | None = None
    steps: int | None = None
    step_ms: float | None = None
    samples_per_s: float | None = None
    busy_std: float | None = None
    busy_source: str | None = None
    cpu_percent: float | None = None
    breakdown_ms: dict[str, float] | None = None
    busy_mean: float | None = None
    healthy: bool | None = None
    verdict: Verdict | None = None
    busy_check: BusyCheck = BusyCheck()
    next: str | None = None
    busy_series: tuple[float | None, ...] = ()
    busy_spacing_s: float | None = None
    heartbeat: Heartbeat | None = None
    interference: Interference | None = None
    note: str | None = None  # a code report.words.findings says: what health's loop leaves out
    script_exit: ScriptExit | None = None


@dataclasses.dataclass(frozen=True)
class ExperimentRow:
    """One row of diagnose's table: an experiment's measurement against the baseline's step (speedup = base /
    this), or why it gave none; what else used the machine during it, measured."""

    experiment: Experiment
    name: str
    step_ms: float | None = None
    speedup: float | None = None
    batch_size: int | float | None = None  # a script's: the items its workers saw per batch, a mean
    num_workers: int | None = None
    pin_memory: bool | None = None
    prefetch_factor: int | None = None
    decoder: str | None = None
    synthetic: bool = False
    samples_per_s: float | None = None
    busy_mean: float | None = None
    busy_std: float | None = None
    cpu_percent: float | None = None
    peak_mem_bytes: int | None = None
    oom: bool = False
    error: str | None = None
    breakdown_ms: dict[str, float] | None = None
    step_sem_ms: float | None = None
    steps: int | None = None
    interference: Busy | None = None


@dataclasses.dataclass(frozen=True)
class Skipped:
    name: str
    reason: str  # a code report.words.findings says


@dataclasses.dataclass(frozen=True)
class ProfileRow:
    function: str
    self_ms_per_item: float | None = None
    total_ms_per_item: float | None = None
    calls: int | None = None


@dataclasses.dataclass(frozen=True)
class WorkerProfile:
    """Where __getitem__ spends its time in the main process: per item, its CPU/wall ratio, the top
    functions; a note (a code) where it could not be profiled."""

    items: int | None = None
    ms_per_item: float | None = None
    cpu_to_wall: float | None = None
    top: tuple[ProfileRow, ...] = ()
    note: str | None = None


@dataclasses.dataclass(frozen=True)
class DiagnoseResult(_Document):
    """diagnose's result: each experiment's row against the baseline, what was skipped and why, __getitem__'s
    profile, the verdict decided once on the baseline and checked by experiment A (its checks and what loading
    is), the predicted and measured gain of removing loading, the findings after what the experiments
    measured (None where the baseline kept no run to advise on), the loader plan and the first script
    failure."""

    SCHEMA = "perfcore.diagnose/2"

    workload: str
    device: str
    experiments: tuple[ExperimentRow, ...]
    verdict: Verdict
    predicted_speedup: float | None = None
    measured_speedup: float | None = None
    skipped: tuple[Skipped, ...] = ()
    worker_profile: WorkerProfile = WorkerProfile()
    findings: tuple[Finding, ...] | None = None
    loader_plan: LoaderPlan | None = None
    interference: Interference | None = None
    script_exit: ScriptExit | None = None

    def row(self, experiment: Experiment) -> ExperimentRow | None:
        return next((e for e in self.experiments if e.experiment is experiment), None)


@dataclasses.dataclass(frozen=True)
class SweepResult(_Document):
    """sweep's result: the grid and every configuration's row (settings, numbers, status, and for a failed one
    its reason), the best (only from configurations that measured fine; from the last round under a budget),
    each batch size's knee, the worker trials advice checks against, and whether the sweep is complete. A
    script's sweep adds its own settings, the ones it kept and the patch to the best. The rows are the
    sweep table's (experiments.sweep_results)."""

    SCHEMA = "perfcore.sweep/2"

    workload: str
    grid: dict[str, Any]
    steps: int
    configs: tuple[dict[str, Any], ...]
    best: dict[str, Any] | None
    knees: tuple[dict[str, Any], ...] = ()
    worker_trials: tuple[dict[str, Any], ...] = ()
    failed: int = 0
    complete: bool = True
    interrupted: bool = False
    elapsed_s: float = 0.0
    rounds: tuple[dict[str, Any], ...] = ()
    script_settings: dict[str, Any] | None = None
    kept: dict[str, Any] | None = None
    patch: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        doc = super().to_dict()
        if self.script_settings is None:  # a script's own settings only for a script's sweep
            for k in ("script_settings", "kept", "patch"):
                doc.pop(k)
        return doc


@dataclasses.dataclass(frozen=True)
class DemoWorkload:
    """The demo's workload as summary.md describes it."""

    name: str
    images: int
    decoder: str | None
    batch_size: int | None
    num_workers: int | None
    device: str


@dataclasses.dataclass(frozen=True)
class DemoResult(_Document):
    """The demo's result: health's measurement (a forward-only loop; it decides nothing of its own), the run
    as measured with the one verdict and its findings (diagnose's: the run checked by its experiments),
    diagnose's result, the files written into the folder and how long it took."""

    SCHEMA = "perfcore.experiments.demo/2"

    health: HealthResult
    run: RunReport
    diagnose: DiagnoseResult
    files: tuple[str, ...]
    elapsed_s: float
    workload: DemoWorkload | None = None
