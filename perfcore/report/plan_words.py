"""The loader plan into words: why the loop waits for its data and the change in the user's DataLoader
(its sentence and text), made from the kind and figures analysis.loader_plan decides."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.loader_plan import PlanKind
from perfcore.analysis.run_context import LoaderPlan
from perfcore.analysis.status import Change
from perfcore.analysis.units import fmt_ms, fmt_x

__all__ = ["where_words", "plan_words", "plan_sentence", "plan_reason"]

# Why the loop waits, in a few words, by the plan's kind.
_REASON = {
    PlanKind.MEASURED_NO_HELP: "measured: workers do not help",
    PlanKind.MORE_WORKERS: "main process",
    PlanKind.MORE_WORKERS_CAPPED: "main process",
    PlanKind.NO_FREE_CORE: "no spare cores",
    PlanKind.PERSISTENT_WORKERS: "start-up each epoch",
    PlanKind.CHEAPER_FETCH: "too slow per item",
    PlanKind.TOO_FEW_WORKERS: "too few workers",
    PlanKind.HANDOVER: "handover from workers",
    PlanKind.DEEPER_PREFETCH: "prefetch too shallow",
}


# How to make a batch cheaper, by how its items are made: a decoder is named only where images are decoded.
_CHEAPER = {
    "pil": "make a batch cheaper: a faster decoder (torchvision.io.decode_jpeg rather than PIL), "
    "images pre-resized to the size the model takes, or data decoded once and cached as tensors",
    "fast": "make a batch cheaper: images pre-resized to the size the model takes, or data decoded "
    "once and cached as tensors",
    "none": "make a batch cheaper: the items are in memory already, so the time is the per-item "
    "transforms and collate: transform the whole tensor once up front, or index a batch at a time "
    "(a BatchSampler) rather than item by item",
    "unknown": "make a batch cheaper: less work per item in the dataset's __getitem__ (transforms "
    "done once up front, data prepared once and cached as tensors)",
}
# What a workers trial that turned the advice round measured, by its status: the word sits beside
# the number it describes, so a ratio above 1 is never called slower.
_TRIAL_WORDS = {
    (True, Change.SLOWER): "more workers made steps slower",
    (True, Change.WITHIN_NOISE): "more workers made steps no faster beyond the runs' noise",
    (False, Change.FASTER): "fewer workers made steps faster",
}


def where_words(ld: Mapping[str, Any]) -> str:
    """The user's DataLoader: its construction site (file:line) and settings, where known."""
    owner = (
        f"the DataLoader made at {ld['site']}"
        if ld.get("site")
        else f"the {ld['workload']} workload's DataLoader"
        if ld.get("workload")
        else ld.get("owner") or "your DataLoader"
    )
    keys = ("batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers")
    settings = ", ".join(f"{k}={ld[k]}" for k in keys if ld.get(k) is not None)
    return f"{owner} ({settings})" if settings else owner


def _cores(p: LoaderPlan) -> str:
    cores, loop, others, threads = p.cpu_count, p.loop_cores, p.other_cores, p.torch_threads
    if loop is not None:
        said = f"the loop's compute already uses {loop:.1f} of the {cores} cores" + (
            f" ({threads} torch threads)" if threads else ""
        )
    elif threads:
        said = f"torch runs the loop's compute on {threads} threads of the {cores} cores"
    else:
        said = f"the loop keeps one of the {cores} cores busy"
    return said + (f" and other processes used {others:.1f}" if others and others >= 0.1 else "")


def plan_words(p: LoaderPlan) -> tuple[str, str]:
    """The loader plan's (sentence, text): why the loop waits, and the change in the user's DataLoader."""
    kind = PlanKind(p.kind)
    n, make, wait, needed, spare = (
        p.num_workers,
        p.worker_batch_ms,
        p.wait_ms_per_batch,
        p.workers_needed,
        p.spare_workers,
    )
    at = where_words(p.loader)
    per = p.batches_per_step
    rate = f"a batch takes {fmt_ms(make)} to make and the loop uses one every {fmt_ms(p.loop_ms_per_batch)}" + (
        f", {per:g} batches per step" if per > 1 else ""
    )
    cheaper = _CHEAPER.get(str(p.decode), _CHEAPER["unknown"])
    fewer = (
        f"; or leave a core to a worker: torch.set_num_threads({p.fewer_threads}) with num_workers=1 "
        "(compute then runs on one thread fewer; measure both)"
        if p.fewer_threads
        else ""
    )
    rs = p.restart
    restart = (
        f"the workers start again every epoch: {fmt_ms(rs.each_ms)} each time beyond making the first batch, "
        f"over {rs.restarts} restart(s) {fmt_ms(rs.per_batch_ms)} per batch of the {fmt_ms(wait)} the loop waits"
        if rs
        else ""
    )
    if kind is PlanKind.MEASURED_NO_HELP:
        t = p.trial
        said = _TRIAL_WORDS[(t["num_workers"] > n, Change(t["change"]))]
        s = (
            f"{t.get('experiment', 'an experiment')} measured num_workers={t['num_workers']} at {fmt_x(t['speedup'])} "
            f"of these settings' speed: {said} on this machine ({_cores(p)}); {rate}"
        )
        return s, f"In {at}: {cheaper}{fewer}. Not more workers: {s}."
    if kind in (PlanKind.MORE_WORKERS, PlanKind.MORE_WORKERS_CAPPED, PlanKind.NO_FREE_CORE):
        s = f"loading runs in the main process (num_workers=0): {rate}, so about {needed} worker(s) would hide it" + (
            f"; collate alone is {fmt_ms(p.collate_ms)} of each batch" if p.collate_ms else ""
        )
        if kind is PlanKind.NO_FREE_CORE:
            s += f", but no core is free for one: {_cores(p)}"
            return s, f"In {at}: {cheaper}{fewer}. Workers would not help as things are: {s}."
        if kind is PlanKind.MORE_WORKERS_CAPPED:
            return s, (
                f"In {at}: set num_workers={spare} and persistent_workers=True. {rate[0].upper()}{rate[1:]}, so "
                f"hiding it needs about {needed} workers, more than the {spare} core(s) free beside the loop "
                f"({_cores(p)}): if __getitem__ computes (decode, augment) rather than waits on I/O, also {cheaper}."
            )
        return s, f"In {at}: set num_workers={needed} and persistent_workers=True; {rate}."
    if kind is PlanKind.PERSISTENT_WORKERS:
        return restart, f"In {at}: set persistent_workers=True; {restart}."
    if kind is PlanKind.CHEAPER_FETCH:
        s = (
            f"{n} worker(s) cannot keep up and more would not fit: {rate}, so about {needed} workers "
            f"would be needed, and {_cores(p)}, leaving {spare} core(s) for workers"
        )
        text = f"In {at}: {cheaper}, rather than adding workers; {s}."
    elif kind is PlanKind.TOO_FEW_WORKERS:
        s = (
            f"{n} worker(s) make a batch every {fmt_ms(make / n)} together, the loop uses one every "
            f"{fmt_ms(p.loop_ms_per_batch)} and waits {fmt_ms(wait)} per batch: about {needed} would hide it"
        )
        text = f"In {at}: set num_workers={needed}; {s}."
    elif kind is PlanKind.HANDOVER:
        cpu = p.cpu_percent
        busy = f" (host CPU {cpu:.0f}%: processes wait for a core)" if cpu else ""
        s = (
            f"{n} worker(s) make a batch in {fmt_ms(make)} but the loop waits {fmt_ms(wait)} for "
            f"each: the handover from the worker processes costs the rest{busy}"
        )
        text = (
            f"In {at}: with batches this cheap set num_workers=0 (the loop would spend about "
            f"{fmt_ms(make)} making each one itself); {s}."
        )
    else:
        pf, pin = p.prefetch_factor, p.pin_in_main
        s = (
            f"{n} worker(s) are enough on average ({rate}; about {needed} needed) yet the loop waits "
            f"{fmt_ms(wait)} per batch: batches arrive in bursts and the {pf * n} queued "
            f"(prefetch_factor={pf} x {n}) run out"
        ) + (
            "; pin_memory=True also copies every batch in a thread of the main process, "
            "which competes with the loop for the interpreter"
            if pin
            else ""
        )
        text = (
            f"In {at}: raise prefetch_factor to {max(pf * 2, 4)}"
            + (" or try pin_memory=False" if pin else "")
            + f"; {s}."
        )
    if rs is not None and rs.contributes:
        s += f"; besides, {restart}"
        text = text[:-1] + f"; besides, {restart}: also set persistent_workers=True."
    return s, text


def plan_reason(p: LoaderPlan) -> str:
    """Why the loop waits, in a few words (a deeper prefetch where pin_memory's thread in the main process
    competes with the loop says so)."""
    kind = PlanKind(p.kind)
    return "pin in main process" if kind is PlanKind.DEEPER_PREFETCH and p.pin_in_main else _REASON[kind]


def plan_sentence(plan: LoaderPlan | None) -> str:
    """The loader plan's sentence ("" without a plan)."""
    return plan_words(plan)[0] if plan is not None else ""
