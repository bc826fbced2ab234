"""The evidence advice is keyed to, typed and read once: the run's facts the rules weigh (RunFacts, read from a
run's document value by value), what the caller measured beside them (CallerFacts: cores, torch's threads,
pageable copies, measured worker trials) and, made of both, the one frozen AdviceEvidence every rule reads by
attribute (analysis.advice_findings). No words."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from perfcore.analysis.codec import fields_of
from perfcore.analysis.findings import Finding
from perfcore.analysis.results import Interference, Verdict
from perfcore.analysis.run_context import Loader, LoaderPlan, RankRow, Straggler, Threads, Waiting, Workers
from perfcore.analysis.run_parts import ComputeFacts, Evaluation, LabelMs

__all__ = ["WorkerTrial", "CallerFacts", "RunFacts", "AdviceEvidence", "read"]


def read(cls: Any, doc: Mapping[str, Any] | None) -> Any:
    """`cls` from an object of facts, each value on its own: a missing or damaged one is its default (the
    advice weighs what a run recorded, and says nothing of what it did not)."""
    return cls(**fields_of(cls, doc))


@dataclasses.dataclass(frozen=True)
class WorkerTrial:
    """A measured worker count (diagnose's experiment B, a sweep's row): its speed against the settings it is
    relative to (this run's where None), and the noise of that ratio as a share of the step."""

    num_workers: int
    speedup: float
    noise_share: float | None = None
    relative_to: int | None = None
    experiment: str | None = None


@dataclasses.dataclass(frozen=True)
class CallerFacts:
    """What the caller measured beside the run's document (and the run kept as its advice_facts): the
    machine's CPUs, torch's intra-op threads, the cores the loop's compute and other processes kept busy, the
    pageable host-to-device copies a step, and worker counts an experiment measured."""

    cpu_count: int | None = None
    torch_threads: int | None = None
    loop_cpu_cores: float | None = None
    other_cpu_cores: float | None = None
    pageable_h2d_bytes_per_step: float = 0.0
    pageable_h2d_ms_per_step: float = 0.0
    worker_trials: tuple[WorkerTrial, ...] = ()


@dataclasses.dataclass(frozen=True)
class RunFacts:
    """The facts of a run (a part's, the merged run's, a workload's) that advice weighs, as run.json holds
    them; `focus`: the facts of the process whose numbers drive the advice (the slowest rank)."""

    device: str = "cpu"
    steps: int = 0
    warmup_steps: int = 0
    rank: int | None = None
    breakdown_ms: LabelMs = LabelMs()
    batches_per_step: float | None = None
    step_source: str = "optimizer"
    loaders: tuple[Loader, ...] = ()
    workers: Workers | None = None
    threads: Threads = Threads()
    torch_compile: bool | None = None
    compiled_graphs: int | None = None
    bf16_supported: bool | None = None
    compute_facts: ComputeFacts | None = None
    cpu_util_percent: float | None = None
    interference: Interference | None = None
    evaluation: Evaluation | None = None
    advice_facts: dict[str, Any] = dataclasses.field(default_factory=dict)
    ranks: tuple[RankRow, ...] = ()  # a job's: who waits in collectives for whom (analysis.ranks)
    stragglers: tuple[Straggler, ...] = ()
    waiting: tuple[Waiting, ...] = ()

    @property
    def on_gpu(self) -> bool:
        return self.device != "cpu"

    @property
    def compiled(self) -> bool:
        """Whether the script compiles its model: it called torch.compile (the child counts the calls), or
        dynamo compiled at least one graph in the run (the child counts its graphs)."""
        return self.torch_compile is True or (self.compiled_graphs or 0) > 0


@dataclasses.dataclass(frozen=True)
class AdviceEvidence:
    """Everything a rule of the advice reads: the verdict (with its ranked causes, straggler, threads and
    start-up), the compute on the verdict's basis, whether the user's code is unmodified (zero_code: never
    told to add a perfcore call), the run's facts (where it ran, what the script already does, evaluation)
    and the caller's (pageable copies), the training loader (its workers' timing folded in) with the loader
    plan for it, and memory's findings."""

    verdict: Verdict
    compute_ms: float
    zero_code: bool
    run: RunFacts = RunFacts()
    caller: CallerFacts = CallerFacts()
    loader: Loader = Loader()  # none recorded: a loader of no known settings
    plan: LoaderPlan | None = None
    memory: tuple[Finding, ...] = ()
