"""Advice keyed to the verdict's causes and to evidence, pointing at the user's own code (the DataLoader's
construction site and its settings). A zero-code user (perfcore run, the notebook magic) is never told
to add a perfcore call to the script; a StepTimer user may be. The run's facts are read once into one
AdviceEvidence, which the rules (advice_findings) read by attribute."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from perfcore.analysis.advice_evidence import AdviceEvidence, CallerFacts, RunFacts, read
from perfcore.analysis.advice_findings import advise
from perfcore.analysis.findings import Finding, FindingKind
from perfcore.analysis.loader_plan import PlanEvidence, batches_per_step, loader_of, loader_plan
from perfcore.analysis.ranks import judge_straggle, straggle
from perfcore.analysis.results import Verdict
from perfcore.analysis.run_context import Loader, LoaderPlan
from perfcore.analysis.run_report import Decision
from perfcore.analysis.script_facts import oversubscription, threads_of
from perfcore.analysis.verdict import WARN_SHARE, decide_run

__all__ = ["advise_run", "gather"]


def advise_run(
    doc: Mapping[str, Any],
    *,
    zero_code: bool,
    focus: Mapping[str, Any] | None = None,
    evidence: Mapping[str, Any] | None = None,
    memory: Mapping[str, Any] | None = None,
    decision: Verdict | None = None,
) -> Decision:
    """The run's one decision on all of its evidence: the verdict, the findings and the loader plan, from the
    run's facts (a part's or the merged run's). `focus`: whose numbers drive them (the slowest rank of a job;
    default the run itself). `evidence` adds to the run's own (CallerFacts). `memory`: memory_findings' facts.
    `decision`: a verdict already reached on more evidence (diagnose's, checked by its experiments) instead
    of the run's."""
    f = focus if focus is not None else doc
    verdict = decision if decision is not None else decide_run(f)
    run = read(RunFacts, doc)
    job = straggle(run.stragglers, run.waiting, run.ranks)
    own = run if f is doc else read(RunFacts, f)
    if job is not None:
        verdict = judge_straggle(verdict, job)
    elif f is not doc and own.rank is not None:
        verdict = dataclasses.replace(verdict, focus_rank=own.rank)  # the slowest rank's: the others wait for it
    ev = gather(run, own, verdict, read(CallerFacts, {**run.advice_facts, **(evidence or {})}), zero_code)
    memory_found = tuple(
        Finding(FindingKind(m["id"]), cause="memory", figures=dict(m)) for m in (memory or {}).get("findings", ())
    )
    ev = dataclasses.replace(ev, memory=memory_found)
    return Decision(ev.verdict, tuple(advise(ev)), ev.plan)


def gather(run: RunFacts, focus: RunFacts, verdict: Verdict, caller: CallerFacts, zero_code: bool) -> AdviceEvidence:
    """The one evidence the rules read: the run's facts, the focus's numbers, what the caller measured; the
    verdict with what inflated its steps (threads that outnumber the cores) said on it."""
    intf = run.interference
    threads, source, cpus = threads_of(run.threads, caller.torch_threads, caller.cpu_count)
    over = oversubscription(threads, cpus, intf.others_cores if intf else None, source=source)
    if over is not None and verdict.step_ms:
        # What inflated the steps is said before the verdict on them (report.words.verdict), not only
        # "interference"; with the script's fix only where its own threads outnumber its CPUs.
        verdict = dataclasses.replace(verdict, **{"oversubscribed" if over.own else "threads_busy": over})
    loader = loader_of(run.loaders, run.workers) or Loader()  # none recorded: no known settings
    # Compute on the verdict's own basis (the trimmed estimate when there is one), so that it and the step
    # it is a share of are the same steps' figures.
    compute_ms = verdict.compute_ms if verdict.decided else focus.breakdown_ms.compute
    plan = _plan(run, focus, verdict, caller, loader, threads if source == "torch" else None)
    return AdviceEvidence(verdict, compute_ms or 0.0, zero_code, run, caller, loader, plan)


def _plan(
    run: RunFacts,
    focus: RunFacts,
    verdict: Verdict,
    caller: CallerFacts,
    loader: Loader,
    torch_threads: int | None,
) -> LoaderPlan | None:
    """The loader plan, for a loop that waits on its loader at least the warn tier."""
    per_step, per_step_how = batches_per_step(run)
    step, load = verdict.step_ms, focus.breakdown_ms.load
    if not (step and load / step >= WARN_SHARE):
        return None
    intf = run.interference
    plan = loader_plan(
        loader,
        PlanEvidence(
            step_ms=step,
            load_ms=load,
            per_step=per_step,
            cpu_count=caller.cpu_count,
            on_gpu=run.on_gpu,
            measured_batches=(focus.steps * per_step) or None,
            cpu_percent=run.cpu_util_percent,
            loop_cores=caller.loop_cpu_cores if caller.loop_cpu_cores is not None else intf and intf.main_cores,
            other_cores=caller.other_cpu_cores if caller.other_cpu_cores is not None else intf and intf.others_cores,
            torch_threads=torch_threads,
            trials=caller.worker_trials,
            collate_ms=run.workers.collate_ms_mean if run.workers is not None and not run.loaders else None,
            workers_cores=intf.workers_cores if intf is not None else None,
        ),
    )
    return dataclasses.replace(plan, batches_per_step_source=per_step_how) if plan else None
