"""A run, typed: RunReport and its parts, the one model of what `perfcore run`, StepTimer.result(), the
notebook magic and the trainer callbacks produce. Its document is run.json `perfcore.run/2` (to_dict: the
codec's, field by field: figures, codes and sites, no words); from_dict reads one back, checked all the way
down. A part of a run (one process's, before the parent decides) is a RunReport whose verdict is undecided.

The step: the interval between two step ends the step source recorded (`step_source`), less perfcore's own
work inside it; `steps` are those measured after the first `warmup_steps`, evaluation passes set apart, and
every figure of step_time_ms, breakdown_ms and breakdown_fraction is over them. The five labels of each step
add up to its wall time."""

from __future__ import annotations

import dataclasses
from typing import Any

from perfcore.analysis.codec import Count, Ms, from_doc, to_doc
from perfcore.analysis.findings import Finding
from perfcore.analysis.nodes import Alignment, JobNodes
from perfcore.analysis.results import UNDECIDED, Interference, Verdict
from perfcore.analysis.run_context import (
    Checkpoint,
    Exit,
    Loader,
    LoaderPlan,
    NoStep,
    Note,
    Outcome,
    Overrides,
    Processes,
    ProcessRow,
    RankRow,
    Seen,
    Straggler,
    Synthetic,
    Threads,
    Waiting,
    Workers,
    training_loader,
)
from perfcore.analysis.run_parts import (
    Capture,
    ComputeFacts,
    Evaluation,
    Kernel,
    KernelCategory,
    LabelMs,
    LabelShares,
    Lines,
    Memcpy,
    Memory,
    Monitor,
    Overhead,
    Robust,
    StartupFacts,
    StepTime,
)
from perfcore.analysis.starvation import Starvation
from perfcore.analysis.verdict import Evidence, evidence_of

__all__ = ["SCHEMA", "RunReport", "Decision", "Steady"]

SCHEMA = "perfcore.run/2"


@dataclasses.dataclass(frozen=True)
class Steady:
    """The figures the verdict judges a run on, as every report quotes them: the steady step (its mean, less
    the outlier steps where the trimmed breakdown set some apart), each label's ms of it, and how many steps
    were set apart."""

    step_ms: float
    ms: dict[str, float]
    outliers: int = 0


@dataclasses.dataclass(frozen=True)
class Decision:
    """A command's one decision on all of its evidence (advice.advise_run): the verdict, the findings (advice
    first as the verdict ranks its causes, then the findings beside them) and, for a loop that waits on its
    loader, the loader plan."""

    verdict: Verdict
    findings: tuple[Finding, ...] = ()
    loader_plan: LoaderPlan | None = None


@dataclasses.dataclass(frozen=True)
class RunReport:
    """One run: its measured steps (step_time_ms over `steps`, the breakdown over the same steps, the trimmed
    breakdown beside it), the verdict and the findings decided once on all of its evidence, and the facts
    the reports show (kernels, copies, loaders and workers, ranks or processes, overhead, capture, start-up,
    memory, monitor, the user's lines, evaluation, notes, files)."""

    steps: Count
    warmup_steps: Count
    step_time_ms: StepTime
    breakdown_ms: LabelMs
    breakdown_fraction: LabelShares
    backend: str
    device: str
    verdict: Verdict = UNDECIDED
    findings: tuple[Finding, ...] = ()
    schema: str = SCHEMA
    workload: str | None = None  # the built-in workload measured (perfcore demo's)
    warmup_step_time_ms: Ms | None = None
    breakdown_robust: Robust | None = None
    kernels: tuple[Kernel, ...] = ()
    kernel_categories: dict[str, KernelCategory] = dataclasses.field(default_factory=dict)
    memcpy: Memcpy | None = None
    overhead: Overhead | None = None
    capture: Capture | None = None
    advice_facts: dict[str, Any] = dataclasses.field(default_factory=dict)  # what the advice is keyed to
    step_source: str | None = None
    optimizer_order: str | None = None
    pid: int | None = None
    rank: int | None = None
    nested_in: int | None = None
    started_by: str | None = None
    world_size: int | None = None
    host: str | None = None
    argv: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    exit_code: int | None = None
    exit: Exit | None = None
    outcome: Outcome | None = None
    seen: Seen | None = None
    no_step: NoStep | None = None
    torch_compile: bool | None = None
    compiled_graphs: int | None = None
    bf16_supported: bool | None = None
    threads: Threads | None = None
    loaders: tuple[Loader, ...] = ()
    dataloader_overrides: Overrides | None = None
    synthetic: Synthetic | None = None
    workers: Workers | None = None
    loader_plan: LoaderPlan | None = None
    batches_per_step: float | None = None
    skipped_boundaries: int = 0
    scaler_skipped_steps: int = 0
    cpu_util_percent: Ms | None = None
    memory: Memory | None = None
    monitor: Monitor | None = None
    compute_split_ms: dict[str, float] = dataclasses.field(default_factory=dict)
    compute_split_gpu_ms: dict[str, float] = dataclasses.field(default_factory=dict)
    compute_facts: ComputeFacts | None = None
    startup: StartupFacts | None = None
    starvation: Starvation | None = None
    lines: Lines | None = None
    evaluation: Evaluation | None = None
    interference: Interference | None = None
    ranks: tuple[RankRow, ...] = ()
    stragglers: tuple[Straggler, ...] = ()
    waiting: tuple[Waiting, ...] = ()
    missing_ranks: tuple[int, ...] = ()
    clock_offsets_ns: dict[str, int] = dataclasses.field(default_factory=dict)
    clocks: Alignment | None = None  # ranks on several hosts: how each host's clock was put on the job's
    nodes: JobNodes | None = None  # ranks on several hosts: the job per node, and the slow node
    processes: Processes | None = None
    checkpoint: Checkpoint | None = None
    steps_table: str | None = None
    notes: tuple[Note, ...] = ()
    files: dict[str, str] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """run.json: perfcore.run/2."""
        return to_doc(self)

    @classmethod
    def from_dict(cls, doc: Any) -> "RunReport":
        """A perfcore.run/2 document read back, every value checked (codec.BadDocument names the first that
        is not what it should be). Older documents go through analysis.migrate first."""
        return from_doc(cls, doc, "")

    @classmethod
    def of(cls, facts: dict[str, Any], decision: Decision | None = None) -> "RunReport":
        """A run from its facts (summarize's, a part's, the merged run's: perfcore.run/2 without a decision),
        checked as they are read, with the decision made on them (none: undecided)."""
        report = cls.from_dict({k: v for k, v in facts.items() if k not in ("verdict", "findings", "loader_plan")})
        if decision is None:
            return report
        return dataclasses.replace(
            report, verdict=decision.verdict, findings=decision.findings, loader_plan=decision.loader_plan
        )

    @property
    def measured(self) -> bool:
        return self.steps > 0

    def evidence(self) -> Evidence:
        """What the verdict on this run is judged on, from its typed parts (verdict.evidence_of)."""
        return evidence_of(
            self.step_time_ms.mean,
            self.breakdown_ms.as_dict(),
            robust=self.breakdown_robust,
            device=self.device,
            steps=self.steps,
            startup=self.startup,
            interference=self.interference,
            step_sem_ms=self.step_time_ms.sem,
        )

    def steady(self) -> Steady:
        ev = self.evidence()
        return Steady(ev.step_ms, ev.label_ms, ev.outliers)

    @property
    def trainers(self) -> tuple[ProcessRow, ...]:
        """The processes that trained side by side with their own figures (none for a run of one process)."""
        return self.processes.training if self.processes is not None else ()

    @property
    def training_loader(self) -> Loader | None:
        """The loader the loop trains on (run_context.training_loader)."""
        return training_loader(self.loaders)
