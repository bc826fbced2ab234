"""Findings beside the verdict into words: a probable leak or memory pressure (analysis.memory_findings'
figures) as a sentence and the advice that answers it; the evaluation passes set apart from the training
steps (attribution.evaluation_finding); what a step is (the step source, and how several optimizers
stepped) said once; why a run saw no step; the loader plan (why the loop waits for its data and the
change in the user's DataLoader, from the kind and figures analysis.loader_plan decides); and what a
stage's note or a skipped experiment's reason code means."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.loader_plan import WAITING_WORKER, PlanKind
from perfcore.analysis.run_context import LoaderPlan, NoStep
from perfcore.analysis.run_parts import Evaluation
from perfcore.analysis.run_report import RunReport
from perfcore.analysis.status import Change
from perfcore.analysis.units import fmt_ms, fmt_share, fmt_x

__all__ = [
    "memory_words",
    "memory_sentence",
    "evaluation_sentence",
    "optimizer_order_sentence",
    "other_steps_sentence",
    "step_source_words",
    "step_source_text",
    "no_step_sentence",
    "STEP_SOURCE_WORDS",
    "LOOKS_FOR",
    "where_words",
    "plan_words",
    "plan_sentence",
    "plan_reason",
    "note_words",
    "NOTES",
]


# What a step is, by the step source perfcore run chose.
STEP_SOURCE_WORDS = {
    "optimizer": "optimizer steps (torch.optim)",
    "backward": "backward passes on the main thread (no torch.optim optimizer stepped)",
    "batch": "training batch fetches (no optimizer step, no backward)",
    "forward": "top-level module calls (no optimizer step, no backward, no training DataLoader)",
}
LOOKS_FOR = (
    "perfcore looks for a step in: torch.optim optimizer.step(), else loss.backward() on the main "
    "thread, else a DataLoader batch fetch, else a top-level nn.Module call; none has happened yet. "
    "Force one with perfcore run --step-on optimizer|backward|batch|forward"
)

_ADVICE = {
    "memory_leak": "Something keeps tensors alive across steps: a loss or output appended to a list without "
    ".item() or .detach(), a growing cache, or a graph kept by retain_graph=True.",
    "memory_pressure": "Each retry synchronizes and frees cached blocks: lower the batch size, use activation "
    "checkpointing or bf16, or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
    "memory_near_capacity": "One larger batch or a longer sequence will not fit: keep headroom, or cut activation "
    "memory (checkpointing, bf16) before scaling up.",
}


def memory_words(f: Mapping[str, Any]) -> tuple[str, str]:
    """A memory finding's (sentence, advice) from its figures."""
    what = "device memory" if f.get("kind", "cuda_allocated") == "cuda_allocated" else "process memory (RSS)"
    fid = f["id"]
    if fid == "memory_leak":
        sentence = (
            f"probable leak: {what} rises {f['bytes_per_step'] / 2**20:.2f} MB per step from step {f['from_step']} "
            f"({f['growth_bytes'] / 2**20:.0f} MB over {f['over_steps']} steps, a straight-line "
            f"fit explains {100 * f['r2']:.0f}% of it)"
        )
    elif fid == "memory_pressure":
        sentence = f"memory pressure: the CUDA caching allocator had to free and retry {f['retries']} time(s)"
    else:
        peak, cap = f["peak_bytes"], f["capacity_bytes"]
        sentence = (
            f"memory pressure: peak {what} {peak / 2**30:.1f} GB is {100 * peak / cap:.0f}% of {cap / 2**30:.1f} GB"
        )
    return sentence, _ADVICE[fid]


def memory_sentence(f: Mapping[str, Any]) -> str:
    """A memory finding's sentence, from its figures."""
    return memory_words(f)[0]


def evaluation_sentence(ev: Evaluation | None) -> str:
    """The evaluation passes' cost, from their figures ("" without any, or where none was set apart)."""
    if ev is None or ev.ms_per_pass is None or ev.share_of_wall is None:
        return ""
    n, per = ev.passes, ev.ms_per_pass
    lo = ev.min_ms_per_pass if ev.min_ms_per_pass is not None else per
    hi = ev.max_ms_per_pass if ev.max_ms_per_pass is not None else per
    # Passes that differ (a last pass over fewer batches, a first one that warms up) are said as their
    # range: one mean "each" hid 0.40, 2.39 and 5.19 s behind "3.82 s each".
    size = f"of {fmt_ms(per)} each" if hi <= 1.25 * lo else f"of {fmt_ms(lo)} to {fmt_ms(hi)} ({fmt_ms(per)} mean)"
    return (
        f"{n} evaluation pass(es) {size} took "
        f"{fmt_share(ev.share_of_wall)} of the wall time ({fmt_ms(ev.total_ms)} in all); "
        "they are reported apart and are not in the step time, the breakdown or the verdict"
    )


_ORDER = {
    "sequence": "stepping in sequence, one stage after the other (layer-wise training, an LR finder before "
    "training): the step clock passed to each in turn, so every stage's steps are rows",
    "interleaved": "a step ends at the step of the optimizer that is stepping (one that steps twice with no "
    "step of the other between takes over), so an optimizer that steps once after it in an iteration (a GAN's "
    "generator after its discriminator) lands in the next row: row k holds its step of iteration k-1",
}


def optimizer_order_sentence(order: str, optimizers: int) -> str:
    """Several optimizers, by how they stepped (sequence, interleaved or both), for the step source's line."""
    if order == "both":
        return f"{optimizers} optimizers, some {_ORDER['sequence']}; within a stage, {_ORDER['interleaved']}"
    return f"{optimizers} optimizers " + (
        _ORDER[order] if order == "sequence" else f"stepping in one iteration: {_ORDER[order]}"
    )


def other_steps_sentence(r: RunReport) -> str | None:
    """Where several optimizers stepped in one iteration (a GAN's D and G): the other optimizers' steps
    against the rows. The count is said to match the script's iterations only when every other step fits
    one to a row; None when no other optimizer stepped inside the rows."""
    seen = r.seen
    if r.step_source != "optimizer" or seen is None or seen.optimizers < 2 or not seen.other_optimizer_steps:
        return None
    others, rows = seen.other_optimizer_steps, r.steps + r.warmup_steps
    if others == rows and not seen.optimizer_handovers:
        return "one per row: the count matches the script's iterations"
    return f"{others} steps of other optimizers against {rows} rows: they are inside rows, not counted as steps"


def step_source_text(r: RunReport) -> str:
    """What a row is: the step source perfcore run chose (and how several optimizers stepped), or a
    StepTimer's own ("timer.step()", its step_on)."""
    if r.seen is None:  # a StepTimer's result: its step_on
        return str(r.step_source or "")
    text = STEP_SOURCE_WORDS.get(r.step_source or "", "none")
    if r.optimizer_order is not None and r.seen.optimizers >= 2:
        text += "; " + optimizer_order_sentence(r.optimizer_order, r.seen.optimizers)
    return text


def step_source_words(r: RunReport) -> str:
    """The step source once (what a row is; how several optimizers stepped), with the other optimizers'
    steps against the rows where some stepped inside them."""
    others = other_steps_sentence(r)
    return step_source_text(r) + (f"; {others}" if others else "")


def no_step_sentence(n: NoStep) -> str:
    """Why a run saw no step, from what the hooks saw."""
    if not n.torch_instrumented:
        if n.torch_imported:
            return (
                f"no step seen in {n.wall_s:.1f} s: torch was loaded in a way perfcore could not instrument "
                "(a custom import finder?); time the loop with perfcore.StepTimer instead"
            )
        # --step-on cannot help a script that has no torch loop to find a step in.
        return (
            f"no step seen in {n.wall_s:.1f} s: the script never imported torch, so there was no training loop to time"
        )
    seen = (
        f"{n.forward} top-level forward call(s), {n.backward} backward pass(es), "
        f"{n.batch_all} DataLoader batch(es), "
        f"{'optimizer steps' if n.optimizer_stepped else 'no optimizer step'}"
    )
    if n.forced:
        # The source that would have given steps, in the automatic choice's order.
        works = next(
            (
                s
                for s, ok in (
                    ("optimizer", n.optimizer_stepped),
                    ("backward", n.backward > 0),
                    ("batch", n.batch_all > 1),
                    ("forward", n.forward > 1),
                )
                if ok and s != n.forced
            ),
            None,
        )
        fix = (
            f"--step-on {works} would find steps here (or leave --step-on out for the automatic choice)"
            if works
            else "nothing else looked like a step either"
        )
        return f"no step seen in {n.wall_s:.1f} s with --step-on {n.forced}: seen {seen}; {fix}"
    return (
        f"no step seen in {n.wall_s:.1f} s: {n.forward} top-level forward call(s), "
        f"{n.backward} backward pass(es), {n.batch_all} DataLoader batch(es), "
        f"no optimizer step. {LOOKS_FOR.split('; none')[0]}. Force one with --step-on "
        "optimizer|backward|batch|forward"
    )


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
            if needed > n
            else f"{n} worker(s) are enough in number ({rate}) but share the cores with the loop: {_cores(p)}, "
            f"leaving {spare} core(s) for workers"
        )
        text = f"In {at}: {cheaper}, rather than adding workers; {s}."
    elif kind is PlanKind.TOO_FEW_WORKERS:
        to = int((p.set or {}).get("num_workers") or needed)
        s = (
            f"{n} worker(s) make a batch every {fmt_ms(make / n)} together, the loop uses one every "
            f"{fmt_ms(p.loop_ms_per_batch)} and waits {fmt_ms(wait)} per batch: about {needed} would hide it"
            + (f"; the free cores hold {to}" if to < needed else "")
        )
        busy = p.worker_cpu_share
        if busy is not None and busy < WAITING_WORKER:  # why more workers fit where the cores look taken
            s += f"; a worker is on a CPU {fmt_share(busy)} of the time it takes to make a batch (it waits on the rest)"
        text = f"In {at}: set num_workers={to}; {s}."
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


# What a stage's note or a skipped experiment's reason code means.
NOTES = {
    "script_loop": "a script runs its own loop (optimizer included); health of a workload factory omits the optimizer",
    "no_other_decoder": "the workload declares no other decoder",
    "script_decoders": "a script declares no decoders; use a workload factory with decoders={...} for this experiment",
    "timed_per_batch": "a script's workers are timed per batch (__getitem__ vs collate); for a function-level "
    "profile, point diagnose at a workload factory",
}


def note_words(code: object) -> str:
    """A note or a skip reason in words, from its code."""
    return NOTES.get(str(code), str(code or ""))
