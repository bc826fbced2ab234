"""The DataLoader's side of the advice: which loader the loop trains on, how many batches it takes a
step, and the loader plan (how many workers would hide loading, and when workers already run and the
loop still waits, why), sized by the cores the loop's compute leaves free. Pure functions on typed facts."""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from perfcore.analysis.advice_evidence import RunFacts, WorkerTrial, read
from perfcore.analysis.codec import to_doc
from perfcore.analysis.run_context import Loader, LoaderPlan, Restart, Workers, training_loader
from perfcore.analysis.script_facts import decode_of
from perfcore.analysis.status import Change, change_of

__all__ = [
    "training_loader_index",
    "loader_of",
    "batches_per_step",
    "loader_plan",
    "PlanEvidence",
    "contradicting_trial",
    "spare_cores",
    "loader_facts",
    "PlanKind",
]
# A wait the epochs' worker restarts explain at least half of is blamed on them; a quarter is
# worth naming beside the main reason.
STARTUP_EXPLAINS = 0.5
STARTUP_CONTRIBUTES = 0.25
# A loop that waits this many times longer than a batch takes to make waits for the handover.
HANDOVER_RATIO = 2.0


def training_loader_index(loaders: Sequence[Mapping[str, Any]] | None) -> int | None:
    """Which of a part's loaders (as its run.json holds them) the loop trains on."""
    typed = [read(Loader, ld) for ld in loaders or ()]
    return typed.index(training_loader(typed)) if typed else None


def loader_of(loaders: Sequence[Loader], workers: Workers | None) -> Loader | None:
    """The training loader with its workers' own time to make a batch where the run has it (their files);
    the workers alone where no loader was recorded."""
    ld = training_loader(loaders)
    if workers is None:
        return ld
    if ld is None:
        return Loader(num_workers=workers.num_workers, worker_batch_ms=workers.fetch_ms_mean, batches=workers.batches)
    return ld if ld.worker_batch_ms is not None else dataclasses.replace(ld, worker_batch_ms=workers.fetch_ms_mean)


def batches_per_step(facts: RunFacts) -> tuple[float, str]:
    """Batches the loop takes per step and how that is known: "counted" (the run's own count), else
    "estimated" (batches fetched by the training loader over steps seen, rounded: prefetching adds a
    few), else "assumed" (1)."""
    if facts.batches_per_step:
        return float(facts.batches_per_step), "counted"
    n_steps = facts.steps + facts.warmup_steps
    ld = training_loader(facts.loaders) or facts.workers
    if ld is not None and ld.batches and n_steps and facts.step_source.startswith("optimizer"):
        est = round(ld.batches / n_steps)
        if est >= 2:
            return float(est), "estimated"
    return 1.0, "assumed"


# The DataLoader settings the advice names, in the order said.
LOADER_SETTINGS = ("batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers")


def loader_facts(ld: Loader) -> dict[str, Any]:
    """The user's DataLoader as the advice points at it: its construction site (file:line), the workload
    it belongs to where no site is known, and its settings."""
    return {k: getattr(ld, k) for k in (*LOADER_SETTINGS, "site", "workload") if getattr(ld, k) not in (None, "")}


SPARE_SLACK_CORES = 0.25


def spare_cores(cores: int, *, loop_cores: float | None = None, other_cores: float | None = None) -> float:
    """Cores a DataLoader worker could have to itself: the machine's, less what the loop's own compute
    keeps busy (its measured CPU, or torch's intra-op threads; one core when neither is known) and what
    other processes used during the run."""
    loop = 1.0 if loop_cores is None else max(float(loop_cores), 1.0)
    return max(float(cores) - loop - max(float(other_cores or 0.0), 0.0), 0.0)


def contradicting_trial(trials: Sequence[WorkerTrial], n: int, more: bool) -> dict[str, Any] | None:
    """A measured configuration (diagnose B, a sweep row: num_workers and its speedup against this
    run's settings) that says the opposite of the advice: more workers measured not faster, or fewer
    workers measured faster. The strongest such measurement (its figures and its change), or None."""
    best = None
    for t in trials:
        w, x = t.num_workers, t.speedup
        if not x or x != x or (t.relative_to is not None and t.relative_to != n):
            continue  # a ratio against other settings than this run's says nothing about its change
        # The measurement's own noise, as a share of the step, decides faster / slower / within noise.
        change = change_of(x, t.noise_share)
        # How strongly it says the opposite: the slowdown of more workers (or no gain beyond the
        # noise), the speed-up of fewer.
        if more and w > n and change is not Change.FASTER:
            score = 1.0 / x
        elif more and w < n and change is Change.FASTER:
            score = x
        else:
            continue
        if best is None or score > best[0]:
            best = (score, {**{k: v for k, v in to_doc(t).items() if v is not None}, "change": change.value})
    return best[1] if best else None


class PlanKind(str, enum.Enum):
    """What the loader plan changes, and why: the status the words are chosen from."""

    MEASURED_NO_HELP = "measured_no_help"  # a measured trial said more workers do not help
    MORE_WORKERS = "more_workers"  # loading in the main process; enough free cores for the workers needed
    MORE_WORKERS_CAPPED = "more_workers_capped"  # as many workers as cores are free: fewer than needed
    NO_FREE_CORE = "no_free_core"  # loading in the main process and no core free for a worker
    PERSISTENT_WORKERS = "persistent_workers"  # the epochs' worker restarts explain the wait
    CHEAPER_FETCH = "cheaper_fetch"  # workers cannot keep up and more would not fit
    TOO_FEW_WORKERS = "too_few_workers"  # more workers fit and would hide the wait
    HANDOVER = "handover"  # the wait is the handover from workers, not the making of a batch
    DEEPER_PREFETCH = "deeper_prefetch"  # enough workers on average: the queue runs out in bursts


@dataclass(frozen=True)
class PlanEvidence:
    """What the loader plan weighs beside the loader's own facts: the loop's step and its wait for batches
    (ms, per step), batches a step (measured_batches: over the measured steps), and the cores: the machine's,
    the loop's own measured CPU (loop_cores), other processes' (other_cores), torch's intra-op threads and the
    host's CPU percent; trials: measured configurations (num_workers, speedup against this run); collate_ms:
    the workers' time to collate a batch."""

    step_ms: float
    load_ms: float
    per_step: float
    cpu_count: int | None
    on_gpu: bool
    measured_batches: float | None = None
    cpu_percent: float | None = None
    loop_cores: float | None = None
    other_cores: float | None = None
    torch_threads: int | None = None
    trials: Sequence[WorkerTrial] = ()
    collate_ms: float | None = None
    workers_cores: float | None = None  # the CPU the loader's worker processes used during the run, in cores


# A worker's CPU a batch over its making time, read no lower than this: the sampler's ticks are coarse and a
# share near zero would let the free cores hold any number of workers.
MIN_WORKER_CPU_SHARE = 0.05
# A worker on a CPU for less than this share of its batch time mostly waits (sleep, I/O, a remote read).
WAITING_WORKER = 0.5


def worker_cpu_share(ev: PlanEvidence, make_ms: float, n: int) -> float | None:
    """The share of a worker's time to make a batch spent on a CPU (1.0: a core all the time; 0.1: it waits on
    sleep, I/O or a remote read for nine tenths of it), from the workers' measured CPU over the batches they
    made (as many as the loop used: `per_step` a step). None where no worker ran or their CPU was not measured."""
    if n <= 0 or ev.workers_cores is None or make_ms <= 0 or ev.step_ms <= 0:
        return None
    cpu_ms_per_batch = ev.workers_cores * ev.step_ms / max(ev.per_step, 1.0)
    return min(max(cpu_ms_per_batch / make_ms, MIN_WORKER_CPU_SHARE), 1.0)


def loader_plan(ld: Loader, ev: PlanEvidence) -> LoaderPlan | None:
    """How many workers would hide loading, and when workers already run and the loop still waits,
    why: facts and a kind (PlanKind), no words. ld: num_workers, worker_batch_ms (a worker's time to
    make one batch), and where known site, pin_memory, prefetch_factor, persistent_workers,
    worker_startup_ms (per epoch), batches. None without a per-batch worker time.

    Workers only help on cores the loop's compute leaves free: loop_cores (the main process's measured
    CPU), torch_threads and other_cores (other processes' CPU during the run) size the spare cores, and
    `achievable_ms` is the wait that many workers can hide (the expected gain is the achievable one).
    trials: measured configurations (num_workers, speedup against this run); one that measured the
    opposite of the advice turns it round to what does help."""
    make_ms = ld.worker_batch_ms
    if make_ms is None:
        return None
    step_ms, load_ms, loop_cores, torch_threads = ev.step_ms, ev.load_ms, ev.loop_cores, ev.torch_threads
    n = int(ld.num_workers or 0)
    per_step = max(ev.per_step, 1.0)
    consume_ms = max(step_ms - load_ms, 1e-6) / per_step  # the loop's time per batch when data is ready
    wait_ms = load_ms / per_step
    needed = max(1, math.ceil(make_ms / consume_ms))
    cores = ev.cpu_count or 1
    # Measured CPU of the loop wins; torch's intra-op thread count says as much before anything ran.
    # With num_workers=0 the main process also made the batches (about one core while it waits):
    # what its compute uses is the rest of its CPU over the rest of the step.
    if loop_cores is not None and n == 0 and step_ms > load_ms > 0:
        wait = load_ms / step_ms
        loop_cores = min(max((loop_cores - wait) / (1 - wait), 0.0), float(cores))
    loop_est = loop_cores if loop_cores is not None else (float(min(torch_threads, cores)) if torch_threads else None)
    free = spare_cores(cores, loop_cores=loop_est, other_cores=ev.other_cores)
    # Workers beyond the free cores share them with the loop and each other: they hide at most
    # free / needed of the wait (none when no core is free). A core three quarters free counts as
    # free: measured CPU carries a few percent of noise (an idle shell, the sampler), and a worker on
    # 0.996 of a core loses almost nothing, where flooring it to none would flip the advice. A worker
    # that mostly waits (sleep, I/O) needs only its measured share of a core: the free cores hold
    # that many more of them (a tenth of a core each: ten to a core).
    busy = worker_cpu_share(ev, make_ms, n)
    per_worker = 1.0 if busy is None else busy
    spare = max(int(math.floor((free + SPARE_SLACK_CORES) / per_worker)), 0)
    hide = min(1.0, (free if busy is None else spare) / needed) if needed else 1.0
    plan = LoaderPlan(
        kind="",
        num_workers=n,
        worker_batch_ms=make_ms,
        batches_per_step=per_step,
        loop_ms_per_batch=consume_ms,
        wait_ms_per_batch=wait_ms,
        workers_needed=needed,
        cpu_count=cores,
        spare_cores=free,
        spare_workers=spare,  # the workers the free cores hold
        worker_cpu_share=busy,
        loop_cores=loop_cores,
        other_cores=ev.other_cores,
        torch_threads=torch_threads,
        achievable_ms=load_ms * hide,
        decode=decode_of(ld).value,
        loader=loader_facts(ld),
        # A core left to a worker, where compute does not run on that few threads already.
        fewer_threads=max(cores - 1, 1) if cores > 1 and (torch_threads is None or torch_threads > cores - 1) else None,
    )
    trial = contradicting_trial(ev.trials, n, more=True)
    if trial is not None and (n == 0 or needed > n):
        return _kind(plan, PlanKind.MEASURED_NO_HELP, achievable_ms=0.0, trial=trial)
    if n == 0:
        plan = dataclasses.replace(plan, collate_ms=ev.collate_ms or None)
        if spare < 1:
            return _kind(plan, PlanKind.NO_FREE_CORE, achievable_ms=0.0)
        capped = needed > spare
        change = {"num_workers": spare if capped else needed, "persistent_workers": True}
        return _kind(plan, PlanKind.MORE_WORKERS_CAPPED if capped else PlanKind.MORE_WORKERS, set=change)
    # Each epoch's start-up (iter() to its first batch) less the making of that batch; the first
    # epoch pays it whatever the settings, later ones only without persistent_workers.
    starts = ld.worker_startup_ms
    restarts = len(starts) - 1 if not ld.persistent_workers else 0
    again_ms = sum(max(0.0, s - make_ms) for s in starts[1:]) if restarts > 0 else 0.0
    # Restarts after the first epoch fall in the measured steps: spread them over the batches measured.
    startup_per_batch = again_ms / max(ev.measured_batches or ld.batches or 1, 1)
    restart = Restart(restarts, again_ms / restarts, startup_per_batch) if restarts > 0 else None
    if restart is not None and wait_ms > 0 and startup_per_batch >= STARTUP_EXPLAINS * wait_ms:
        return _kind(plan, PlanKind.PERSISTENT_WORKERS, restart=restart, set={"persistent_workers": True})
    more: dict[str, Any] = {}
    change: dict[str, Any] = {}
    waits = busy is not None and busy < WAITING_WORKER
    if needed > n and (needed <= spare or (waits and spare > n)):
        # Too few workers, and the free cores hold them; workers that mostly wait are added up to what the
        # cores hold even short of hiding it all (each costs little: a batch's CPU is a cheap one already).
        kind = PlanKind.TOO_FEW_WORKERS
        change = {"num_workers": min(needed, spare)}
    elif needed > spare and not waits:
        # Too few cores for the workers needed (in number, enough of them may run already): they and the
        # loop share the cores, so no worker count hides it.
        kind = PlanKind.CHEAPER_FETCH
        more["achievable_ms"] = ev.load_ms * min(1.0, free / needed) if n < spare else 0.0
    elif wait_ms > HANDOVER_RATIO * make_ms:
        # Waiting far longer than a batch takes to make: the time goes in handing it over (the worker
        # scheduled, the queue, unpickling in the main process), not in making it.
        kind = PlanKind.HANDOVER
        if ev.cpu_percent and ev.cpu_percent >= 90:  # processes wait for a core
            more["cpu_percent"] = ev.cpu_percent
        change = {"num_workers": 0}
    else:
        kind = PlanKind.DEEPER_PREFETCH
        pf = ld.prefetch_factor or 2
        # pin_memory copies every batch in a thread of the main process, competing with the loop.
        more.update(prefetch_factor=pf, pin_in_main=bool(ev.on_gpu and ld.pin_memory))
        change = {"prefetch_factor": max(pf * 2, 4)}
    if restart is not None and wait_ms > 0 and startup_per_batch >= STARTUP_CONTRIBUTES * wait_ms:
        restart = dataclasses.replace(restart, contributes=True)  # named beside the main reason, with its setting
        change = {**change, "persistent_workers": True}
    return _kind(plan, kind, restart=restart, set=change, **more)


def _kind(plan: LoaderPlan, kind: PlanKind, **figures: Any) -> LoaderPlan:
    return dataclasses.replace(plan, kind=kind.value, **figures)
