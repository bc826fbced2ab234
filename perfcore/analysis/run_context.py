"""A run's context, typed: the processes that made it (DataLoaders, their workers and the loader plan, the
ranks of a job with its stragglers, processes that trained side by side) and the script around them (how it
ended, what the hooks saw, why no step, its threads and the settings a triage run changed, notes, a
checkpoint). analysis.run_report.RunReport is made of them (and of run_parts'); each is a frozen dataclass its
document holds as codec.to_doc writes it."""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from perfcore.analysis.codec import fields_of, from_doc, to_doc
from perfcore.analysis.run_parts import LabelMs, LabelShares, StepTime

__all__ = [
    "Loader",
    "Workers",
    "Restart",
    "LoaderPlan",
    "RankRow",
    "Straggler",
    "Waiting",
    "ProcessRow",
    "Processes",
    "Exit",
    "Outcome",
    "Seen",
    "Threads",
    "Overrides",
    "Synthetic",
    "Note",
    "NoteFigures",
    "NoteProcess",
    "NoStep",
    "Checkpoint",
    "training_loader",
]


@dataclasses.dataclass(frozen=True)
class Loader:
    """One DataLoader the script made (run.child.loaders): its call site, settings, dataset class, what it
    was used for (role: train / eval), batches drawn, workers' start-up per epoch and time to make a batch."""

    site: str | None = None
    batch_size: int | None = None
    num_workers: int | None = None
    pin_memory: bool | None = None
    prefetch_factor: int | None = None
    persistent_workers: bool | None = None
    dataset: str | None = None
    made: int | None = None
    batches: int | None = None
    eval_batches: int | None = None
    worker_startup_ms: tuple[float, ...] = ()
    worker_batch_ms: float | None = None
    role: str | None = None
    training: bool = True
    folded: int | None = None
    persistent_workers_would_save_ms: float | None = None
    workload: str | None = None  # a built-in workload's loader (in-process experiments): its name
    decoder: str | None = None


def training_loader(loaders: Sequence[Loader]) -> Loader | None:
    """The loader the loop trains on (a script may build a validation loader too)."""
    # A train loader (not one an evaluation drew from) before others, then the one most batches were drawn from.
    return max(loaders, key=lambda ld: (ld.training, ld.batches or 0)) if loaders else None


@dataclasses.dataclass(frozen=True)
class Workers:
    """How fast the training loader's workers made batches (their own files, run/parent/finish)."""

    num_workers: int
    fetch_ms_mean: float
    getitem_ms_mean: float
    collate_ms_mean: float
    batches: int | None = None
    items_per_batch: float | None = None


@dataclasses.dataclass(frozen=True)
class Restart:
    """Workers started again every epoch: how many restarts, each one's cost beyond making the first batch,
    that spread over the batches, and whether it is named beside the plan's main reason."""

    restarts: int
    each_ms: float
    per_batch_ms: float
    contributes: bool = False


@dataclasses.dataclass(frozen=True)
class LoaderPlan:
    """The workers plan for a loop that waits on its loader (analysis.loader_plan): its kind (a PlanKind),
    the figures it is sized by, and the settings it changes."""

    kind: str
    num_workers: int | None = None
    worker_batch_ms: float | None = None
    batches_per_step: float | None = None
    batches_per_step_source: str | None = None
    loop_ms_per_batch: float | None = None
    wait_ms_per_batch: float | None = None
    workers_needed: int | None = None
    cpu_count: int | None = None
    spare_cores: float | None = None
    spare_workers: int | None = None
    worker_cpu_share: float | None = None  # a worker's CPU over its time to make a batch (None: not measured)
    loop_cores: float | None = None
    other_cores: float | None = None
    torch_threads: int | None = None
    achievable_ms: float | None = None
    decode: str | None = None
    loader: dict[str, Any] = dataclasses.field(default_factory=dict)
    set: dict[str, Any] = dataclasses.field(default_factory=dict)
    fewer_threads: int | None = None
    restart: Restart | None = None
    trial: dict[str, Any] | None = None
    prefetch_factor: int | None = None
    pin_in_main: bool | None = None
    collate_ms: float | None = None
    cpu_percent: float | None = None


@dataclasses.dataclass(frozen=True)
class RankRow:
    """One rank of a job: its steps' figures, how it ended and where."""

    rank: int | None
    step_time_ms: StepTime
    breakdown_ms: LabelMs
    breakdown_fraction: LabelShares | None = None
    steps: int = 0
    exit: str | None = None
    host: str | None = None
    workers: Workers | None = None


@dataclasses.dataclass(frozen=True)
class Straggler:
    """A rank whose own work (wall less comm) is longest on most steps: its excess over the others' median,
    and the label that holds it."""

    rank: int | None
    excess_label: str
    excess_ms: float
    work_ms: float
    others_work_ms: float
    step_ms: float
    slowest_share: float | None = None
    host: str | None = None


@dataclasses.dataclass(frozen=True)
class Waiting:
    """A rank that waits in collectives for the stragglers."""

    rank: int | None
    comm_ms: float
    step_ms: float
    waits_for: tuple[int | None, ...] = ()


@dataclasses.dataclass(frozen=True)
class ProcessRow:
    """One process that trained side by side with others (Hogwild): its own figures."""

    pid: int | None
    steps: int
    step_time_ms: StepTime
    breakdown_ms: LabelMs
    warmup_steps: int = 0
    breakdown_fraction: LabelShares | None = None
    exit: str | None = None


@dataclasses.dataclass(frozen=True)
class Processes:
    training: tuple[ProcessRow, ...] = ()


@dataclasses.dataclass(frozen=True)
class Exit:
    """How the script's process ended as it saw it: a reason code, the exception's first line (the user's own
    words), a usage error's message, when it was raised, and where its traceback is kept."""

    reason: str | None = None
    exception: str | None = None
    usage_error: str | None = None
    t_exception_ns: int | None = None
    traceback: str | None = None


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How the script ended as `perfcore run` saw it: the exit code, a reason code and the signal."""

    code: int | None = None
    reason: str | None = None
    signal: str | None = None


@dataclasses.dataclass(frozen=True)
class Seen:
    """What the hooks saw until the step source was chosen: calls of each kind, the optimizers made and how
    the optimizer clock went, and the wall time."""

    forward: int = 0
    backward: int = 0
    batch: int = 0
    batch_all: int = 0
    optimizers: int = 0
    optimizer_handovers: int = 0
    other_optimizer_steps: int = 0
    counted_until: str | None = None
    wall_ms: float | None = None


@dataclasses.dataclass(frozen=True)
class Threads:
    torch: int | None = None
    omp_env: str | None = None
    cpus: int | None = None


@dataclasses.dataclass(frozen=True)
class Overrides:
    """The DataLoader settings a triage run asked for, and how many loaders they were applied to."""

    asked: dict[str, Any] = dataclasses.field(default_factory=dict)
    applied: int = 0


@dataclasses.dataclass(frozen=True)
class Synthetic:
    keep: int = 0
    replayed: int = 0


@dataclasses.dataclass(frozen=True)
class NoteProcess:
    """A process a note names: its pid and the steps it made."""

    pid: int | None = None
    steps: int = 0


@dataclasses.dataclass(frozen=True)
class NoteFigures:
    """The figures a note's code carries (evaluation_only: pids; measured_apart: processes; from_checkpoint:
    steps; finished_afterwards: exit_code)."""

    pids: tuple[int, ...] = ()
    processes: tuple[NoteProcess, ...] = ()
    steps: int | None = None
    exit_code: int | None = None


@dataclasses.dataclass(frozen=True)
class Note:
    """A note on the run: a code with its figures. A note its maker still words itself (the recording's and
    the instrumented process's: a CUPTI that could not start, a hook that could not time a call) is its
    text, code "text"; the document keeps such a note as that string."""

    code: str
    figures: dict[str, Any] = dataclasses.field(default_factory=dict)
    text: str | None = None

    @property
    def facts(self) -> "NoteFigures":
        """Its figures, typed: each read on its own, so a damaged one costs that one only."""
        return NoteFigures(**fields_of(NoteFigures, self.figures))

    def to_doc(self) -> Any:
        return self.text if self.code == "text" else {"code": self.code, "figures": to_doc(self.figures)}

    @classmethod
    def from_doc(cls, value: Any, where: str) -> "Note":
        if isinstance(value, str):
            return cls("text", text=value)
        code = from_doc(str, value.get("code") if isinstance(value, dict) else value, f"{where}.code")
        return cls(code, from_doc(dict[str, Any], value.get("figures", {}), f"{where}.figures"))


@dataclasses.dataclass(frozen=True)
class NoStep:
    """Why a run has no step: what the hooks saw (seen), for how long, whether torch could be instrumented
    and imported, whether an optimizer stepped, and the step source the user forced (a code)."""

    wall_s: float
    torch_instrumented: bool = True
    torch_imported: bool = True
    optimizer_stepped: bool = False
    forced: str | None = None
    forward: int = 0
    backward: int = 0
    batch_all: int = 0


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A part that is its process's last checkpoint (the process died before writing its results)."""

    steps: int | None = None
    table: str | None = None
    columns: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    table_bytes: int | None = None
    csv_bytes: int | None = None
