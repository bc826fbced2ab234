"""A run's measured parts, typed: its step statistics and breakdown (with the trimmed one), kernels and
copies, perfcore's overhead and the capture's statistics, memory, the monitor's samples, the user's lines,
start-up, evaluation and the compute split. analysis.run_report.RunReport is made of them (and of
run_context's); each is a frozen dataclass its document holds as codec.to_doc writes it."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from perfcore.analysis.codec import Count, Frac, Ms, Num, from_doc, to_doc
from perfcore.analysis.compute_split import BackwardFact, OptimizerFact, SplitShares
from perfcore.analysis.labels import LABELS
from perfcore.analysis.line_timeline import HostTimeline
from perfcore.analysis.lines import LabelLines

__all__ = [
    "StepTime",
    "LabelMs",
    "LabelShares",
    "OutlierWall",
    "Outliers",
    "Robust",
    "Kernel",
    "KernelCategory",
    "Copies",
    "Memcpy",
    "Calibrations",
    "Overhead",
    "Capture",
    "Tracing",
    "TracingCalibration",
    "Memory",
    "StepSpread",
    "Monitor",
    "Lines",
    "StartupFacts",
    "Evaluation",
    "ComputeFacts",
]


@dataclasses.dataclass(frozen=True)
class StepTime:
    """The measured steps' wall time: mean, median and 90th percentile; where outlier steps were set apart,
    the trimmed (robust) mean with its interval and the mean's standard error."""

    mean: Ms
    p50: Ms
    p90: Ms
    robust: float | None = None
    robust_band: tuple[float, float] | None = None
    sem: float | None = None


class _ByLabel:
    """A figure per label, read by the label's name."""

    def __getitem__(self, label: str) -> float:
        return getattr(self, label)

    def as_dict(self) -> dict[str, float]:
        return {lb: getattr(self, lb) for lb in LABELS}


@dataclasses.dataclass(frozen=True)
class LabelMs(_ByLabel):
    """ms per step of each label (they add up to the step)."""

    load: Ms = 0.0
    transfer: Ms = 0.0
    compute: Ms = 0.0
    comm: Ms = 0.0
    host: Ms = 0.0


@dataclasses.dataclass(frozen=True)
class LabelShares(_ByLabel):
    """Each label's share of the step (0..1)."""

    load: Frac = 0.0
    transfer: Frac = 0.0
    compute: Frac = 0.0
    comm: Frac = 0.0
    host: Frac = 0.0


@dataclasses.dataclass(frozen=True)
class OutlierWall:
    min: float
    max: float
    mean: float


@dataclasses.dataclass(frozen=True)
class Outliers:
    """The outlier steps set apart: how many, which, their wall time against the median step, and where their
    extra time went (the label that held most of it)."""

    count: int
    steps: tuple[int, ...] = ()
    wall_ms: OutlierWall | None = None
    ms_per_step: dict[str, float] = dataclasses.field(default_factory=dict)
    excess_share: dict[str, float] = dataclasses.field(default_factory=dict)
    median_step_ms: float | None = None
    excess_label: str | None = None


@dataclasses.dataclass(frozen=True)
class Robust:
    """The trimmed breakdown (analysis.uncertainty): outliers set apart, each label's ms and share with their
    block-bootstrap interval at `level`, over `blocks` blocks of consecutive steps."""

    step_ms: float
    ms: dict[str, float]
    blocks: int | None = None
    level: float = 0.95
    steps: int = 0
    kept_steps: int = 0
    step_ms_band: tuple[float, float] | None = None
    step_sem_ms: float | None = None
    ms_band: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    share: dict[str, float] = dataclasses.field(default_factory=dict)
    share_band: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    outliers: Outliers | None = None


@dataclasses.dataclass(frozen=True)
class Kernel:
    name: str
    count: int
    total_ms: float
    mean_us: float
    category: str | None = None


@dataclasses.dataclass(frozen=True)
class KernelCategory:
    share: Frac
    ms: Ms | None = None


@dataclasses.dataclass(frozen=True)
class Copies:
    """Copies of one direction: how many, bytes and ms, and those from pageable memory."""

    bytes: float
    ms: float
    pageable_bytes: float
    count: int | None = None
    pageable_ms: float | None = None


@dataclasses.dataclass(frozen=True)
class Memcpy:
    by_direction: dict[str, Copies] = dataclasses.field(default_factory=dict)
    bytes: float | None = None
    pageable_bytes: float | None = None
    pageable_share: float | None = None


@dataclasses.dataclass(frozen=True)
class Calibrations:
    """What the training process's own calibrations after the script took (recording.phase_cost): how many,
    their seconds, their fewest pairs, and whether the time cap cut any short."""

    count: Count = 0
    seconds: Ms = 0.0
    pairs: Count = 0
    cut_short: bool = False


@dataclasses.dataclass(frozen=True)
class Overhead:
    """perfcore's own cost in the run: its phases (count x a phase's cost), own work inside the steps
    (settling, progress, checkpoints) and its pauses, the zero-code hooks' calls, the line sampler; per step
    and as a fraction of the step, over the whole run and over a typical (steady) step; `material` when the
    reports must show it; `counted`: the parts the figure counts (codes)."""

    ms_per_step: Ms
    fraction: Ms
    per_phase_ns: Ms = 0.0
    phases_per_step: float = 0.0
    material: bool = False
    counted: tuple[str, ...] = ()
    settle_ms_per_step: Ms | None = None
    own_ms_total: Ms | None = None
    own_ms_per_step: Ms | None = None
    pause_ms_total: Ms | None = None
    pauses: Count | None = None
    steady_ms_per_step: Ms | None = None
    steady_fraction: Ms | None = None
    sync_calls_ms_per_step: float | None = None
    fetch_ms_per_step: float | None = None
    passed_ms_per_step: float | None = None
    sampler_ms_per_step: float | None = None
    sampler_share: float | None = None
    sampler_steady_ms_per_step: float | None = None
    steady_sync_calls_ms_per_step: float | None = None
    steady_own_ms_per_step: float | None = None
    sync_call_ns: float | None = None
    sync_calls_steps: int | None = None
    fetch_ns: float | None = None
    passed_call_ns: float | None = None
    tracing_ms_per_step: float | None = None
    tracing_ns_per_launch: float | None = None
    launches_per_step: float | None = None
    calibration: Calibrations | None = None
    hooks: str | None = None  # "not included": a StepTimer's own count, without perfcore run's hooks


# A capture statistic: a count, a time, a flag or a code.
Stat = int | float | bool | str | None


@dataclasses.dataclass(frozen=True)
class TracingCalibration:
    """A launch's cost measured untraced and traced at the run's start (recording.tracing.probe)."""

    launches: Count
    untraced_ns: tuple[Ms, ...] | None = None
    traced_ns: tuple[Ms, ...] | None = None
    spread_ns: Ms | None = None
    measured: bool = False


@dataclasses.dataclass(frozen=True)
class Tracing:
    """Kernel tracing (recording.tracing): its mode (off, lean, full), the record kinds it kept, the steps it
    traced, how kernels found their phase (correlation or event_windows), the launches it counted and the
    calibration its cost per launch came from."""

    mode: str
    steps_traced: Count = 0
    kinds: tuple[str, ...] = ()
    launches: Count = 0
    backend: str | None = None
    placement: str | None = None
    calibration: TracingCalibration | None = None


@dataclasses.dataclass(frozen=True)
class Capture:
    """What the capture recorded and lost (recording.gpu.capture_stats): every statistic by its name, in the
    order it was recorded, with the handover to torch.profiler, the guards applied and the tracing's own
    figures apart. The named properties are those the reports read."""

    stats: dict[str, Stat] = dataclasses.field(default_factory=dict)
    handed_over: dict[str, Stat] | None = None
    guards: tuple[str, ...] = ()
    torch_profiler: dict[str, Any] | None = None
    tracing: Tracing | None = None

    _APART = ("handed_over", "guards", "torch_profiler", "tracing")

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = dict(self.stats)
        for k in self._APART:
            v = getattr(self, k)
            if v:
                doc[k] = to_doc(v)
        return doc

    @classmethod
    def from_doc(cls, value: Any, where: str) -> "Capture":
        if not isinstance(value, dict):
            return from_doc(dict[str, Any], value, where)  # says what it is instead
        stats = {k: from_doc(Stat, v, f"{where}.{k}") for k, v in value.items() if k not in cls._APART}
        hints = typing.get_type_hints(cls)
        # The figures kept apart, as to_doc writes them: only those that hold something.
        apart = {k: from_doc(hints[k], value[k], f"{where}.{k}") for k in cls._APART if value.get(k)}
        return cls(stats=stats, **apart)

    def count(self, name: str) -> int:
        v = self.stats.get(name)
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0

    @property
    def backend(self) -> str | None:
        v = self.stats.get("backend")
        return v if isinstance(v, str) else None


@dataclasses.dataclass(frozen=True)
class Memory:
    """Memory over the run: what was sampled (kind: cuda_allocated or peak_rss), its peak against capacity,
    growth per step and where a probable leak starts (its finding is among the run's findings)."""

    kind: str | None = None
    peak_bytes: Count | None = None
    capacity_bytes: Count | None = None
    growth_bytes_per_step: float | None = None
    probable_leak: bool = False
    leak_from_step: int | None = None
    pressure: bool = False
    r2: float | None = None
    alloc_retries: int | None = None


@dataclasses.dataclass(frozen=True)
class StepSpread:
    mean: Num
    min: Num
    max: Num
    steps: Count


@dataclasses.dataclass(frozen=True)
class Monitor:
    """--monitor's samples: means over them, the GPU's power and temperature (mean, max), and the spread of
    the per-step means over the measured steps that hold a sample."""

    samples: Count
    cpu_percent_mean: Ms | None = None
    gpu_util_mean: Frac | None = None
    power_w_mean: Ms | None = None
    power_w_max: Ms | None = None
    temp_c_mean: Num | None = None
    temp_c_max: Num | None = None
    per_step: dict[str, StepSpread] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Lines:
    """The user's lines per label (analysis.lines: the training thread's stack sampled), the sampler's own
    cost, and host time by function over the run (the chart's timeline)."""

    steps: Count
    samples: Count
    interval_ms: Ms
    labels: tuple[LabelLines, ...] = ()
    sampler_ms_per_step: float | None = None
    sampler_held_ms_per_step: float | None = None
    sampler_wakes: int | None = None
    handoff_us: float | None = None
    missed: int | None = None
    dropped: int | None = None
    timeline: HostTimeline | None = None

    def label(self, name: str | None) -> LabelLines | None:
        return next((lb for lb in self.labels if lb.label == name), None)


@dataclasses.dataclass(frozen=True)
class StartupFacts:
    """From launch to the end of the first step, the first step itself and a steady one, and the workers'
    start-up."""

    time_to_first_step_ms: Ms
    first_step_ms: Ms | None = None
    steady_step_ms: Ms | None = None
    worker_startup_ms: float | None = None
    worker_startup_total_ms: float | None = None


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """Evaluation passes between training steps, set apart (attribution.evaluation_finding, or the passes of
    processes that only evaluated): how many, their cost, their share of the wall time. Passes seen where no
    row was set apart (apart false: a run that only evaluated) have their count and total only."""

    passes: int
    total_ms: float
    ms_per_pass: float | None = None
    share_of_wall: float | None = None
    min_ms_per_pass: float | None = None
    max_ms_per_pass: float | None = None
    rows: int | tuple[int, ...] | None = None
    rows_ms: float | None = None
    apart: bool = True
    processes: tuple[int | None, ...] = ()


@dataclasses.dataclass(frozen=True)
class ComputeFacts:
    """The forward / backward / optimizer split and the facts read from it (analysis.compute_split)."""

    split: SplitShares | None = None
    optimizer: OptimizerFact | None = None
    backward: BackwardFact | None = None
