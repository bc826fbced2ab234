"""What a command decides, typed: the verdict (bound, level, ranked causes with their ms per step, share,
interval and expected gain, and the findings it rests on: start-up, the machine's interference, a straggler
the job waits for, threads that outnumber the cores, diagnose's checks and what loading is) as frozen
dataclasses holding numbers, statuses and codes, no prose. verdict.judge makes one; a document holds it as
codec.to_doc writes it, and report.words.verdict says it."""

from __future__ import annotations

import dataclasses
import enum

from perfcore.analysis.checks import Check
from perfcore.analysis.script_facts import Oversubscription

__all__ = [
    "Level",
    "Gain",
    "Cause",
    "Startup",
    "Interference",
    "Straggle",
    "Loading",
    "Attributed",
    "Verdict",
    "BOUNDS",
    "UNDECIDED",
]

# The bound each avoidable label names when it is the verdict's.
BOUNDS = {"load": "input-bound", "transfer": "transfer-bound", "comm": "communication-bound", "host": "host-bound"}


class Level(str, enum.Enum):
    """How much a cause costs against the tiers, or the state of a whole verdict."""

    CRITICAL = "critical"
    WARN = "warn"
    BORDERLINE = "borderline"
    MINOR = "minor"
    HEALTHY = "healthy"
    UNKNOWN = "unknown"


@dataclasses.dataclass(frozen=True)
class Gain:
    """Removing a cause: the ms it saves per step, the step after, the speedup and its band (an end is None
    where nothing would be left of the step)."""

    saved_ms: float
    step_after_ms: float
    speedup: float | None
    band: tuple[float | None, float | None] | None = None


@dataclasses.dataclass(frozen=True)
class Cause:
    """One avoidable label's cost: ms per step, share of the step (and its interval), level, gain."""

    label: str
    bound: str
    ms_per_step: float
    share: float
    level: Level
    gain: Gain
    share_band: tuple[float, float] | None = None
    borderline_tier: float | None = None


@dataclasses.dataclass(frozen=True)
class Startup:
    """Start-up's cost against the run: time from launch to the end of the first step, less one steady
    step, as a share of the whole run (that plus the measured steps); dominant at STARTUP_DOMINATES."""

    ms: float
    time_to_first_step_ms: float
    share_of_run: float
    dominates: bool
    steady_step_ms: float = 0.0
    steps: int = 0
    first_step_ms: float | None = None


@dataclasses.dataclass(frozen=True)
class Interference:
    """Who else used the machine during the measured steps (analysis.interference's figures): cores used by
    this run's main process, its workers and other processes, the hypervisor's steal, the run queue, the
    main process's preemptions, other processes on the GPU; `reasons` (codes: others, steal, gpu) are what
    makes it material."""

    material: bool
    reasons: tuple[str, ...] = ()
    span_s: float | None = None
    samples: int | None = None
    cores: int | None = None
    others_cores: float | None = None
    others_share: float | None = None
    main_cores: float | None = None
    workers_cores: float | None = None
    idle_cores: float | None = None
    steal_share: float | None = None
    run_queue_mean: float | None = None
    run_queue_max: float | None = None
    main_nonvoluntary_per_s: float | None = None
    gpu_other_processes: int | None = None
    gpu_other_bytes: int | None = None
    main_processes: int | None = None


@dataclasses.dataclass(frozen=True)
class Straggle:
    """A job held up by one rank: the rank that waits longest in collectives (`wait_ms` of its `step_ms`),
    the slow rank it waits for, and why that one is slow (the label of its excess over the others)."""

    waiting_rank: int | None
    wait_ms: float
    step_ms: float
    slow_rank: int | None
    excess_label: str
    excess_ms: float
    work_ms: float
    others_work_ms: float
    slow_host: str | None = None  # where the slow rank and the waiting one ran (a job across machines)
    waiting_host: str | None = None

    @property
    def wait_share(self) -> float:
        return self.wait_ms / self.step_ms if self.step_ms > 0 else 0.0


@dataclasses.dataclass(frozen=True)
class Loading:
    """What diagnose found loading to be: kind decoder (experiment C's decoder measured material), unprofiled,
    crowded (off-CPU on a saturated host), io (off-CPU over half the time) or cpu (on-CPU: decode/augment,
    with the top function), with the figures that tell it."""

    kind: str
    decoder: str | None = None
    speedup: float | None = None
    cpu_to_wall: float | None = None
    cpu_percent: float | None = None
    top: str | None = None


@dataclasses.dataclass(frozen=True)
class Attributed:
    """What the attribution gave a label where an experiment's measurement replaced it in the verdict."""

    label: str
    ms_per_step: float
    share: float
    band_ms: tuple[float, float] | None = None


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The one decision: the bound (a label, "compute" when healthy, "straggler" when the job waits for a
    rank, "unknown" before any step), its level, every avoidable cause ranked by ms per step, and which of them
    are named (at or above the warn tier, or borderline there); beside it the facts its words need: the device
    (what each label's time is), the steps (what would settle a borderline cause), how a label was measured
    where an experiment replaced the attribution (a code: "synthetic"), whether the loop is forward-only (whose
    gain is larger than a training step's), start-up's cost, the machine's interference when material, the
    outlier steps set apart, the straggler and the rank the verdict was judged on, threads that outnumber the
    cores, and diagnose's checks of it with what loading is."""

    bound: str
    level: Level
    healthy: bool | None
    primary: str | None
    step_ms: float
    compute_ms: float
    ranked: tuple[Cause, ...]
    uncertain: bool = False
    on_gpu: bool = False
    steps: int = 0
    measured_by: dict[str, str] = dataclasses.field(default_factory=dict)
    forward_only: bool = False
    startup: Startup | None = None
    interference: Interference | None = None
    outliers: int = 0
    thresholds: tuple[float, float] = (0.10, 0.20)
    straggler: Straggle | None = None
    focus_rank: int | None = None
    oversubscribed: Oversubscription | None = None
    threads_busy: Oversubscription | None = None
    checks: tuple[Check, ...] = ()
    loading: Loading | None = None
    attributed: Attributed | None = None

    @property
    def decided(self) -> bool:
        """A verdict judged on measured steps (not the undecided one of a run with none)."""
        return self.bound != "unknown" and self.step_ms > 0

    @property
    def named(self) -> tuple[Cause, ...]:
        return tuple(c for c in self.ranked if c.level is not Level.MINOR)

    @property
    def avoidable_ms(self) -> dict[str, float]:
        return {c.label: c.ms_per_step for c in self.ranked}

    def cause(self, label: str | None) -> Cause | None:
        return next((c for c in self.ranked if c.label == label), None)


# The verdict of a document no step has been judged in (nothing measured yet).
UNDECIDED = Verdict(
    bound="unknown", level=Level.UNKNOWN, healthy=None, primary=None, step_ms=0.0, compute_ms=0.0, ranked=()
)
