"""Advice keyed to the verdict's causes and to evidence, pointing at the user's own code (the DataLoader's
construction site and its settings). A zero-code user (perfcore run, the notebook magic) is never told
to add a perfcore call to the script; a StepTimer user may be. Pure functions on documents."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

from perfcore.analysis.advice_findings import compute_ways, evaluation_advice, first_findings, threads_finding
from perfcore.analysis.codec import from_doc
from perfcore.analysis.findings import Finding, FindingKind, Site
from perfcore.analysis.gain import expected_gain
from perfcore.analysis.interference import valid_finding
from perfcore.analysis.loader_plan import (
    PlanEvidence,
    PlanKind,
    batches_per_step,
    contradicting_trial,
    loader_facts,
    loader_plan,
    training_loader,
    training_loader_index,
)
from perfcore.analysis.ranks import judge_straggle, straggle
from perfcore.analysis.results import Gain, Level, Verdict
from perfcore.analysis.run_context import LoaderPlan
from perfcore.analysis.run_report import Decision
from perfcore.analysis.script_facts import compiled, optimizer_of, oversubscription, threads_of
from perfcore.analysis.verdict import WARN_SHARE, decide_run

# The loader's side lives in loader_plan; its names stay importable here, where advice is asked for.
__all__ = [
    "training_loader",
    "training_loader_index",
    "loader_plan",
    "contradicting_trial",
    "advise",
    "advise_run",
    "batches_per_step",
    "Decision",
]


# The advice each loader plan kind gives (its id in run.json).
_PLAN_ADVICE = {
    PlanKind.PERSISTENT_WORKERS: "persistent_workers",
    PlanKind.CHEAPER_FETCH: "cheaper_batches",
    PlanKind.HANDOVER: "fewer_workers",
    PlanKind.NO_FREE_CORE: "cheaper_batches",
    PlanKind.MEASURED_NO_HELP: "cheaper_batches",
    PlanKind.DEEPER_PREFETCH: "deeper_prefetch",
}
# The perfcore command that tests a piece of advice (report.words.advice.TEST_WORDS says it).
_DIAGNOSE, _GRAPH = "diagnose", "graph"


def _gain_facts(g: Gain) -> dict[str, Any]:
    return {"speedup": g.speedup, "band": list(g.band) if g.band else None, "step_after_ms": g.step_after_ms}


def _gain(g: Mapping[str, Any]) -> Gain:
    return Gain(g["saved_ms"], g["step_after_ms"], g["speedup"], tuple(g["band"]) if g.get("band") else None)


def advise(
    decision: Verdict,
    breakdown_ms: Mapping[str, float],
    *,
    on_gpu: bool,
    zero_code: bool,
    evidence: Mapping[str, Any] | None = None,
    plan: Mapping[str, Any] | None = None,
    loader: Mapping[str, Any] | None = None,
    memory: Mapping[str, Any] | None = None,
) -> list[Finding]:
    """Findings, one per named cause (ranked as the verdict ranks them) plus the pageable-copy, threads,
    compute, memory and start-up findings: kinds and figures, which report.words.advice puts into words
    (with the loader plan's, for a load cause's advice)."""
    ev = dict(evidence or {})
    out: list[Finding] = []
    ld = loader or {}
    facts_of_ld = loader_facts(ld)
    # What the script already does is never proposed again: a compiled model, pinned batches.
    is_compiled = bool(ev.get("compiled"))
    pinned = ld.get("pin_memory") is True
    step = decision.step_ms

    def add(
        kind: str,
        cause: str | None,
        facts: Mapping[str, Any],
        test: str | None = None,
        *,
        gain: Gain | None = None,
        change: Mapping[str, Any] | None = None,
        level: Level = Level.WARN,
    ) -> None:
        site = Site.parse(ld.get("site")) if cause in ("load", "transfer") else None
        out.append(
            Finding(
                FindingKind(kind),
                level=level,
                cause=cause,
                figures=dict(facts),
                site=site,
                gain=gain,
                change=dict(change or {}),
                test=test,
            )
        )

    pageable = first_findings(add, decision, ev, facts_of_ld)
    for c in decision.named:
        lb = c.label
        g = c.gain
        # Every cause's advice says what removing the cause gives (the cause's evidence is the verdict's).
        cause_facts = {
            "label": c.label,
            "ms_per_step": c.ms_per_step,
            "share": c.share,
            "share_band": list(c.share_band) if c.share_band else None,
            "step_ms": step,
            "on_gpu": on_gpu,
            "measured_by": decision.measured_by.get(lb),
        }
        base = {"cause_gain": _gain_facts(g), "cause_facts": cause_facts}
        # A cause's advice gains what removing the cause does, unless it says less.
        mine = {"gain": g, "level": c.level}
        if lb == "load":
            kind = PlanKind(plan["kind"]) if plan and plan.get("kind") else None
            if kind is not None:
                own = g  # the cause's whole wait, unless the free cores allow less of it
                rid = _PLAN_ADVICE.get(kind, "more_workers")
                facts = {**base, "plan": True}
                if rid == "cheaper_batches":
                    # What workers can hide is what is left to gain from them; a cheaper batch can save
                    # up to the whole wait, which is the bound the verdict's gain gives.
                    facts["workers_speedup"] = expected_gain(step, plan.get("achievable_ms") or 0.0)["speedup"]
                    facts["decode"] = plan.get("decode")
                elif plan.get("achievable_ms") is not None and plan["achievable_ms"] < c.ms_per_step - 1e-9:
                    own = _gain(expected_gain(step, plan["achievable_ms"]))
                    facts["achievable_gain"] = _gain_facts(own)  # what the free cores allow of the cause's
                add(rid, lb, facts, _DIAGNOSE, gain=own, change=plan.get("set"), level=c.level)
            else:
                n = int(ld.get("num_workers") or 0)
                persistent = bool(n and not ld.get("persistent_workers"))
                add(
                    "more_workers",
                    lb,
                    {**base, "loader": facts_of_ld, "persistent_workers": persistent},
                    _DIAGNOSE,
                    **mine,
                )
        elif lb == "transfer" and not pageable:
            add("overlap_copies", lb, {**base, "pinned": pinned, "loader": facts_of_ld}, **mine)
        elif lb == "comm":
            add("overlap_comm", lb, base, **mine)
        elif lb == "host" and on_gpu:
            add("launch_overhead", lb, {**base, "compiled": is_compiled}, _GRAPH, **mine)
        elif lb == "host":
            add("host_gaps" if zero_code else "untimed_host_work", lb, {**base, "compiled": is_compiled}, **mine)
    threads_finding(add, ev)
    # Compute on the verdict's own basis (the trimmed estimate when there is one), so that it and
    # the step it is a share of are the same steps' figures.
    compute_ms = decision.compute_ms if decision.decided else breakdown_ms.get("compute", 0) or 0.0
    ways = compute_ways(ev, on_gpu=on_gpu)
    if decision.healthy and compute_ms >= 0.6 * (step or math.inf) and ways:
        facts = {"on_gpu": on_gpu, "compute_ms": compute_ms, "step_ms": step, "ways": ways}
        add("faster_compute", None, facts, level=Level.MINOR)
    for f in (memory or {}).get("findings", []):
        add(f["id"], "memory", dict(f))  # the finding's figures: its words are its advice's
    su = decision.startup
    if su and su.dominates:
        add("startup", "startup", {"startup": dataclasses.asdict(su)})
    return out


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
    default the run itself). `evidence` adds to the run's own. `decision`: a verdict already reached on more
    evidence (diagnose's, checked by its experiments) instead of the run's."""
    f = focus if focus is not None else doc
    verdict = decision if decision is not None else decide_run(f)
    job = straggle(doc)
    if job is not None:
        verdict = judge_straggle(verdict, job)
    elif f is not doc and f.get("rank") is not None:
        verdict = dataclasses.replace(verdict, focus_rank=f["rank"])  # the slowest rank's: the others wait for it
    ev = {"cpu_count": None, **dict(doc.get("advice_facts") or {}), **dict(evidence or {})}
    intf = valid_finding(doc.get("interference")) or {}
    threads, source, cpus = threads_of(doc, ev)
    if threads and not ev.get("torch_threads") and source == "torch":
        ev["torch_threads"] = threads  # the script's own setting, recorded by the child
    ev["compiled"] = ev.get("compiled") or compiled(doc)
    ev.setdefault("optimizer_fact", optimizer_of(doc)[1])
    if isinstance(doc.get("bf16_supported"), bool):
        ev.setdefault("bf16_supported", doc["bf16_supported"])
    over = oversubscription(threads, cpus or ev.get("cpu_count"), intf.get("others_cores"), source=source)
    if over is not None and verdict.step_ms:
        # What inflated the steps is said before the verdict on them (report.words.verdict), not only
        # "interference"; with the script's fix only where its own threads outnumber its CPUs.
        if over.own:
            ev["oversubscribed"] = over.to_dict()
            verdict = dataclasses.replace(verdict, oversubscribed=over)
        else:
            verdict = dataclasses.replace(verdict, threads_busy=over)
    plan = _plan(doc, f, verdict, ev, intf)
    findings = advise(
        verdict,
        f["breakdown_ms"],
        on_gpu=str(doc.get("device", "cpu")) != "cpu",
        zero_code=zero_code,
        evidence=ev,
        plan=plan,
        loader=_loader(doc),
        memory=memory,
    )
    evaluation = evaluation_advice(doc.get("evaluation"))
    if evaluation:
        # A measured share of the wall time comes before the generic ways to faster compute, and before
        # start-up's "measure a longer run" (a longer run evaluates as often).
        last = (FindingKind.FASTER_COMPUTE, FindingKind.STARTUP)
        at = next((i for i, r in enumerate(findings) if r.kind in last), len(findings))
        findings.insert(at, evaluation)
    return Decision(verdict, tuple(findings), from_doc(LoaderPlan, plan, "loader_plan") if plan else None)


def _loader(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """The training loader's settings and figures, with the workers' own timing where the run has it."""
    ld = training_loader(doc.get("loaders"))
    w = doc.get("workers") or {}
    if ld is None and w:
        ld = {
            "num_workers": w.get("num_workers"),
            "worker_batch_ms": w.get("fetch_ms_mean"),
            "batches": w.get("batches"),
            "collate_ms": w.get("collate_ms_mean"),
        }
    elif ld is not None and ld.get("worker_batch_ms") is None and w:
        ld["worker_batch_ms"] = w.get("fetch_ms_mean")
    return ld


def _plan(
    doc: Mapping[str, Any], f: Mapping[str, Any], verdict: Verdict, ev: Mapping[str, Any], intf: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The loader plan, for a loop that waits on its loader at least the warn tier."""
    ld = _loader(doc)
    per_step, per_step_how = batches_per_step(doc)
    step = verdict.step_ms
    load = float(f["breakdown_ms"].get("load") or 0.0)
    if not (ld and step and load / step >= WARN_SHARE):
        return None
    plan = loader_plan(
        ld,
        PlanEvidence(
            step_ms=step,
            load_ms=load,
            per_step=per_step,
            cpu_count=ev.get("cpu_count"),
            on_gpu=str(doc.get("device", "cpu")) != "cpu",
            measured_batches=(int(f.get("steps") or 0) * per_step) or None,
            cpu_percent=doc.get("cpu_util_percent"),
            loop_cores=ev.get("loop_cpu_cores", intf.get("main_cores")),
            other_cores=ev.get("other_cpu_cores", intf.get("others_cores")),
            torch_threads=ev.get("torch_threads"),
            trials=ev.get("worker_trials"),
        ),
    )
    if plan:
        plan["batches_per_step_source"] = per_step_how
    return plan or None
