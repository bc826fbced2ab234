"""Advice keyed to the verdict's causes and to evidence, pointing at the user's own code (the DataLoader's
construction site and its settings). A zero-code user (perfcore run, the notebook magic) is never told
to add a perfcore call to the script; a StepTimer user may be. Pure functions on documents."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from perfcore.analysis.advice_findings import compute_ways, evaluation_advice, first_findings, threads_finding
from perfcore.analysis.gain import expected_gain
from perfcore.analysis.interference import valid_finding
from perfcore.analysis.loader_plan import (
    batches_per_step,
    contradicting_trial,
    loader_plan,
    training_loader,
    training_loader_index,
    where,
)
from perfcore.analysis.ranks import judge_straggle, straggle
from perfcore.analysis.results import Advice, Gain
from perfcore.analysis.script_facts import compiled, optimizer_of, oversubscription, threads_of
from perfcore.analysis.units import fmt_ms, fmt_share, fmt_x
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
    """Recommendations [{id, cause, text, evidence[, test]}], one per named cause (ranked as the
    verdict ranks them) plus the pageable-copy, memory and start-up findings."""
    ev = dict(evidence or {})
    recs: list[dict[str, Any]] = []
    ld = loader or {}
    at = where(ld)
    # What the script already does is never proposed again: a compiled model, pinned batches.
    is_compiled = bool(ev.get("compiled"))
    pinned = ld.get("pin_memory") is True

    def add(
        rid: str,
        cause: str | None,
        text: str,
        because: str,
        test: str | None = None,
        *,
        gain: Mapping[str, Any] | None = None,
        change: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        site = ld.get("site") if cause in ("load", "transfer") else None
        g = Gain(gain["saved_ms"], gain["step_after_ms"], gain["speedup"], gain.get("band")) if gain else None
        item = Advice(rid, cause, site=site, change=tuple((change or {}).items()), gain=g)
        r = {**item.to_dict(), "text": text, "evidence": because}
        if test:
            r["test"] = test
        recs.append(r)
        return r

    pageable = first_findings(add, decision, ev, at, pinned)
    for c in decision.get("causes", []):
        lb, because = c["label"], c["evidence"]
        g = c.get("expected_gain") or expected_gain(decision.get("step_ms") or 0.0, c["ms_per_step"])
        before = len(recs)
        gain = f" Expected: steps {g['text']}, {fmt_ms(g['step_after_ms'])} a step." if g["text"] else ""
        if lb == "load":
            if plan and plan.get("text"):
                own = g  # the cause's whole wait, unless the free cores allow less of it
                rid = {
                    "start-up each epoch": "persistent_workers",
                    "too slow per item": "cheaper_batches",
                    "handover from workers": "fewer_workers",
                    "no spare cores": "cheaper_batches",
                    "measured: workers do not help": "cheaper_batches",
                    "prefetch too shallow": "deeper_prefetch",
                    "pin in main process": "deeper_prefetch",
                }.get(plan.get("reason", ""), "more_workers")
                if rid == "cheaper_batches":
                    # What workers can hide is what is left to gain from them; a cheaper batch can save
                    # up to the whole wait, which is the bound the verdict's gain gives.
                    gain = (
                        f" Expected: a batch that costs nothing would make steps {g['text']}; more workers "
                        f"about {fmt_x(expected_gain(decision.get('step_ms') or 0.0, plan.get('achievable_ms') or 0.0)['speedup'])}."
                        if g["text"]
                        else ""
                    )
                elif plan.get("achievable_ms") is not None and plan["achievable_ms"] < c["ms_per_step"] - 1e-9:
                    a = expected_gain(decision.get("step_ms") or 0.0, plan["achievable_ms"])
                    own = a
                    gain = (
                        f" Expected: steps {a['text']}, {fmt_ms(a['step_after_ms'])} a step: what the free cores "
                        f"allow of the {fmt_x(g['speedup'])} that removing the wait would give."
                        if a["text"]
                        else ""
                    )
                rec = add(
                    rid,
                    lb,
                    plan["text"] + gain,
                    because,
                    "perfcore diagnose (synthetic data measures the step without loading)",
                    gain=own,
                    change=plan.get("set"),
                )
                if rid == "cheaper_batches":
                    rec["decode"] = plan.get("decode")
            else:
                n = int(ld.get("num_workers") or 0)
                ways = ["more workers (num_workers)"] + (
                    ["persistent_workers=True"] if n and not ld.get("persistent_workers") else []
                )
                add(
                    "more_workers",
                    lb,
                    f"Feed the loop faster in {at}: " + ", ".join(ways) + ", "
                    "cheaper work per item (transforms done once, data cached as tensors)." + gain,
                    because,
                    "perfcore diagnose (synthetic data measures the step without loading)",
                )
        elif lb == "transfer" and not pageable:
            add(
                "overlap_copies",
                lb,
                "Overlap copies with compute: "
                + ("" if pinned else f"pin_memory=True in {at}, ")
                + ".to(device, non_blocking=True), and copy the next batch while this one computes."
                + gain,
                because,
            )
        elif lb == "comm":
            add(
                "overlap_comm",
                lb,
                "Overlap communication with backward (DDP bucket_cap_mb, gradient accumulation "
                "with no_sync), or send less (bf16 gradients)." + gain,
                because,
            )
        elif lb == "host" and on_gpu:
            add(
                "launch_overhead",
                lb,
                "The GPU idles between kernels: remove .item()/.cpu()/print of tensors from the loop, capture "
                + (
                    "the step with CUDA Graphs (the model is compiled already: mode='reduce-overhead' does that)"
                    if is_compiled
                    else "the step with torch.compile(mode='reduce-overhead') or CUDA Graphs"
                )
                + ", and raise the batch size."
                + gain,
                because,
                "perfcore graph",
            )
        elif lb == "host":
            if zero_code:
                add(
                    "host_gaps",
                    lb,
                    "Look at what your loop does between optimizer.step() and the next batch, and "
                    "between forward and backward: loss and metric code outside the model, logging, .item() calls, "
                    "checkpointing. On a CPU this time also holds tensor math outside modules (a functional loss, "
                    "zero_grad, a manual p.data.add_ update): real compute, which a module (nn.MSELoss rather than "
                    f"F.mse_loss), torch.optim{'' if is_compiled else ', or torch.compile'} makes cheaper or at "
                    "least visible. A sampling "
                    "profiler (py-spy top -- python your_script.py) shows which lines." + gain,
                    because,
                )
            else:
                add(
                    "untimed_host_work",
                    lb,
                    "Time the rest of the step with timer.phase('name') to see what it is "
                    "(logging, metrics, checkpointing, Python overhead)." + gain,
                    because,
                )
        for r in recs[before:]:  # a cause's advice gains what removing the cause does, unless it says less
            r.setdefault("gain", Gain(g["saved_ms"], g["step_after_ms"], g["speedup"], g.get("band")).to_dict())
    threads_finding(add, ev)
    # Compute on the verdict's own basis (the trimmed estimate when there is one), so that it and
    # the step it is a share of are the same steps' figures.
    compute_ms = decision.get("compute_ms", breakdown_ms.get("compute", 0)) or 0.0
    ways = compute_ways(ev, on_gpu=on_gpu)
    if decision.get("healthy") and compute_ms >= 0.6 * (decision.get("step_ms") or math.inf) and ways:
        rec = add(
            "faster_compute",
            None,
            f"The step is {'GPU ' if on_gpu else ''}compute; what would make it faster: "
            + "; ".join(long for _, long in ways)
            + ".",
            f"compute is {fmt_ms(compute_ms)} of a {fmt_ms(decision.get('step_ms', 0))} step",
        )
        rec["ways"] = [short for short, _ in ways]  # the same ways, in a few words, for the "try" line
    for f in (memory or {}).get("findings", []):
        add(f["id"], "memory", f["advice"], f["sentence"])
    su = decision.get("startup")
    if su and su.get("dominates"):
        add(
            "startup",
            "startup",
            "Measure a longer run (--steps) before judging the steady state; to cut the "
            "start itself, build the dataset index once (cache it), keep workers (persistent_workers=True), and "
            "compile or warm up once.",
            su["sentence"],
        )
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
        decision["summary"] += f" on rank {f['rank']}; the other ranks wait for it in comm"
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
        kind = "torch" if over.source == "torch" else "OpenMP"
        # What inflated the steps comes before the verdict on them, not only "interference"; with the
        # script's fix only where its own threads outnumber its CPUs.
        if over.own:
            ev["oversubscribed"] = over.to_dict()
            decision["oversubscribed"] = over.to_dict()
            decision["summary"] = (
                f"{over.threads} {kind} threads on {over.cpus} CPU(s): OpenMP threads spin when cores are "
                f"oversubscribed, which can make steps many times slower: torch.set_num_threads({over.fits}). "
                f"{decision['summary']}"
            )
        else:
            decision["threads_busy"] = over.to_dict()
            decision["summary"] = (
                f"{over.threads} {kind} threads had {over.free_cores:.1f} free core(s) while other processes "
                f"used {over.others_cores:.1f} of {over.cpus} cores: their threads spin when cores are taken, "
                f"so these steps are slower than the script's own; measure on a quieter machine before "
                f"changing its thread count. {decision['summary']}"
            )
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
        # A measured share of the wall time comes before the generic ways to faster compute.
        recs = doc["recommendations"]
        at_compute = next((i for i, r in enumerate(recs) if r["id"] == "faster_compute"), len(recs))
        recs.insert(at_compute, evaluation)
    if plan:
        doc["loader_plan"] = plan
    return decision
