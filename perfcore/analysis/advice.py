"""Advice keyed to the verdict's causes and to evidence, pointing at the user's own code (the DataLoader's
construction site and its settings). A zero-code user (perfcore run, the notebook magic) is never told
to add a perfcore call to the script; a StepTimer user may be. Pure functions on documents."""

from __future__ import annotations

import math
from typing import Any, Mapping

from perfcore.analysis.advice_findings import compute_ways, evaluation_advice, first_findings, threads_finding
from perfcore.analysis.gain import expected_gain
from perfcore.analysis.interference import valid_finding
from perfcore.analysis.loader_plan import (
    PlanKind,
    batches_per_step,
    contradicting_trial,
    loader_facts,
    loader_plan,
    training_loader,
    training_loader_index,
)
from perfcore.analysis.ranks import judge_straggle, straggle
from perfcore.analysis.results import Advice, Gain
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
# The perfcore command that tests a piece of advice (report.advice_words.TEST_WORDS says it).
_DIAGNOSE, _GRAPH = "diagnose", "graph"


def _gain_facts(g: Mapping[str, Any]) -> dict[str, Any]:
    return {"speedup": g["speedup"], "band": g.get("band"), "step_after_ms": g["step_after_ms"]}


def advise(  # noqa: C901, PLR0912
    decision: Mapping[str, Any],
    breakdown_ms: Mapping[str, float],
    *,
    on_gpu: bool,
    zero_code: bool,
    evidence: Mapping[str, Any] | None = None,
    plan: Mapping[str, Any] | None = None,
    loader: Mapping[str, Any] | None = None,
    memory: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Recommendations [{id, cause, facts, set, gain[, test_with]}], one per named cause (ranked as the
    verdict ranks them) plus the pageable-copy, memory and start-up findings: facts, which
    report.advice_words puts into words (with the loader plan's, for a load cause's advice)."""
    ev = dict(evidence or {})
    recs: list[dict[str, Any]] = []
    ld = loader or {}
    facts_of_ld = loader_facts(ld)
    # What the script already does is never proposed again: a compiled model, pinned batches.
    is_compiled = bool(ev.get("compiled"))
    pinned = ld.get("pin_memory") is True
    step = decision.get("step_ms") or 0.0

    def add(
        rid: str,
        cause: str | None,
        facts: Mapping[str, Any],
        test: str | None = None,
        *,
        gain: Mapping[str, Any] | None = None,
        change: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        site = ld.get("site") if cause in ("load", "transfer") else None
        g = Gain(gain["saved_ms"], gain["step_after_ms"], gain["speedup"], gain.get("band")) if gain else None
        item = Advice(rid, cause, site=site, change=tuple((change or {}).items()), gain=g, facts=tuple(facts.items()))
        r = item.to_dict()
        if test:
            r["test_with"] = test
        recs.append(r)
        return r

    pageable = first_findings(add, decision, ev, facts_of_ld)
    for c in decision.get("causes", []):
        lb = c["label"]
        g = c.get("expected_gain") or expected_gain(step, c["ms_per_step"])
        # Every cause's advice says what removing the cause gives (the cause's evidence is the verdict's).
        cause_facts = {k: c.get(k) for k in ("label", "ms_per_step", "share", "share_band")}
        cause_facts.update(step_ms=step, on_gpu=on_gpu, measured_by=(decision.get("measured_by") or {}).get(lb))
        base = {"cause_gain": _gain_facts(g), "cause_facts": cause_facts}
        before = len(recs)
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
                elif plan.get("achievable_ms") is not None and plan["achievable_ms"] < c["ms_per_step"] - 1e-9:
                    own = expected_gain(step, plan["achievable_ms"])
                    facts["achievable_gain"] = _gain_facts(own)  # what the free cores allow of the cause's
                rec = add(rid, lb, facts, _DIAGNOSE, gain=own, change=plan.get("set"))
                if rid == "cheaper_batches":
                    rec["decode"] = plan.get("decode")
            else:
                n = int(ld.get("num_workers") or 0)
                persistent = bool(n and not ld.get("persistent_workers"))
                add("more_workers", lb, {**base, "loader": facts_of_ld, "persistent_workers": persistent}, _DIAGNOSE)
        elif lb == "transfer" and not pageable:
            add("overlap_copies", lb, {**base, "pinned": pinned, "loader": facts_of_ld})
        elif lb == "comm":
            add("overlap_comm", lb, base)
        elif lb == "host" and on_gpu:
            add("launch_overhead", lb, {**base, "compiled": is_compiled}, _GRAPH)
        elif lb == "host":
            add("host_gaps" if zero_code else "untimed_host_work", lb, {**base, "compiled": is_compiled})
        for r in recs[before:]:  # a cause's advice gains what removing the cause does, unless it says less
            r.setdefault("gain", Gain(g["saved_ms"], g["step_after_ms"], g["speedup"], g.get("band")).to_dict())
    threads_finding(add, ev)
    # Compute on the verdict's own basis (the trimmed estimate when there is one), so that it and
    # the step it is a share of are the same steps' figures.
    compute_ms = decision.get("compute_ms", breakdown_ms.get("compute", 0)) or 0.0
    ways = compute_ways(ev, on_gpu=on_gpu)
    if decision.get("healthy") and compute_ms >= 0.6 * (step or math.inf) and ways:
        facts = {"on_gpu": on_gpu, "compute_ms": compute_ms, "step_ms": decision.get("step_ms", 0), "ways": ways}
        add("faster_compute", None, facts)
    for f in (memory or {}).get("findings", []):
        add(f["id"], "memory", {"memory": dict(f)})  # the finding's figures: its words are its advice's
    su = decision.get("startup")
    if su and su.get("dominates"):
        add("startup", "startup", {"startup": dict(su)})
    return recs


def advise_run(
    doc: dict[str, Any],
    *,
    zero_code: bool,
    focus: Mapping[str, Any] | None = None,
    evidence: Mapping[str, Any] | None = None,
    memory: Mapping[str, Any] | None = None,
    decision: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The verdict, the loader plan and the advice of a run document, set on `doc` in place
    (verdict, recommendations, loader_plan). `focus`: whose numbers drive them (the slowest rank of
    a job; default the document itself). `evidence` adds to the document's own. `decision`: a verdict
    already reached on more evidence (diagnose's, checked by its experiments) instead of the document's."""
    f = focus if focus is not None else doc
    decision = dict(decision) if decision is not None else decide_run(f)
    job = straggle(doc)
    if job is not None:
        decision = judge_straggle(decision, job)
    elif f is not doc and f.get("rank") is not None:
        decision["focus_rank"] = f["rank"]  # the slowest rank's verdict: the others wait for it in comm
    ev = {"cpu_count": None, **dict(doc.get("evidence") or {}), **dict(evidence or {})}
    intf = valid_finding(doc.get("interference")) or {}
    threads, source, cpus = threads_of(doc, ev)
    if threads and not ev.get("torch_threads") and source == "torch":
        ev["torch_threads"] = threads  # the script's own setting, recorded by the child
    ev["compiled"] = ev.get("compiled") or compiled(doc)
    ev.setdefault("optimizer_fact", optimizer_of(doc)[1])
    if isinstance(doc.get("bf16_supported"), bool):
        ev.setdefault("bf16_supported", doc["bf16_supported"])
    over = oversubscription(threads, cpus or ev.get("cpu_count"), intf.get("others_cores"), source=source)
    if over is not None and decision.get("step_ms"):
        # What inflated the steps is said before the verdict on them (verdict_words), not only
        # "interference"; with the script's fix only where its own threads outnumber its CPUs.
        if over.own:
            ev["oversubscribed"] = over.to_dict()
            decision["oversubscribed"] = over.to_dict()
        else:
            decision["threads_busy"] = over.to_dict()
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
    per_step, per_step_how = batches_per_step(doc)
    step = decision["step_ms"]
    load = float(f["breakdown_ms"].get("load") or 0.0)
    plan = None
    if ld and step and load / step >= WARN_SHARE:
        plan = loader_plan(
            ld,
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
        )
        if plan:
            plan["batches_per_step_source"] = per_step_how
    doc["verdict"] = decision
    doc["recommendations"] = advise(
        decision,
        f["breakdown_ms"],
        on_gpu=str(doc.get("device", "cpu")) != "cpu",
        zero_code=zero_code,
        evidence=ev,
        plan=plan,
        loader=ld,
        memory=memory,
    )
    evaluation = evaluation_advice(doc.get("evaluation"))
    if evaluation:
        # A measured share of the wall time comes before the generic ways to faster compute, and before
        # start-up's "measure a longer run" (a longer run evaluates as often).
        recs = doc["recommendations"]
        at = next((i for i, r in enumerate(recs) if r["id"] in ("faster_compute", "startup")), len(recs))
        recs.insert(at, evaluation)
    if plan:
        doc["loader_plan"] = plan
    return decision
