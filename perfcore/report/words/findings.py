"""Findings beside the verdict into words: a probable leak or memory pressure (analysis.memory_findings'
figures) as a sentence and the advice that answers it; the evaluation passes set apart from the training
steps (attribution.evaluation_finding); what a step is (the step source, and how several optimizers
stepped) said once; the loader plan (why the loop waits for its data and the
change in the user's DataLoader, from the kind and figures analysis.loader_plan decides); what a stage's
note or a skipped experiment's reason code means; and the user's lines, for run.json's "lines" and
"starvation": the user's function and line that held the verdict's label (host, or load when the loader
runs in the training process), with the syncing calls counted there, loader starvation in numbers, and the
sweep's DataLoader change (the call as it would read at its file:line, and the patch)."""

from __future__ import annotations

import dataclasses
import os
import shlex
from typing import Any, Mapping

from perfcore.analysis.codec import fields_of
from perfcore.analysis.lines import (
    FunctionCost,
    LabelLines,
    LineCost,
    SiteCalls,
    enough_samples,
    min_samples,
    package_of,
)
from perfcore.analysis.loader_patch import PATCH_NAME
from perfcore.analysis.loader_plan import WAITING_WORKER, PlanKind
from perfcore.analysis.run_context import Loader, LoaderPlan
from perfcore.analysis.run_parts import Evaluation
from perfcore.analysis.run_report import RunReport
from perfcore.analysis.status import Change
from perfcore.analysis.units import WIDTH, fmt_ms, fmt_share, fmt_x

__all__ = [
    "memory_words",
    "memory_sentence",
    "evaluation_sentence",
    "optimizer_order_sentence",
    "other_steps_sentence",
    "step_source_words",
    "step_source_text",
    "STEP_SOURCE_WORDS",
    "where_words",
    "CHEAPER",
    "plan_words",
    "plan_sentence",
    "plan_reason",
    "note_words",
    "NOTES",
    "lines_text",
    "patch_text",
    "where",
    "BACKWARD_WORDS",
]


# What a step is, by the step source perfcore run chose.
STEP_SOURCE_WORDS = {
    "optimizer": "optimizer steps (torch.optim)",
    "backward": "backward passes on the main thread (no torch.optim optimizer stepped)",
    "batch": "training batch fetches (no optimizer step, no backward)",
    "forward": "top-level module calls (no optimizer step, no backward, no training DataLoader)",
}
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


def step_source_text(r: RunReport, brief: bool = False) -> str:
    """What a row is: the step source perfcore run chose (and how several optimizers stepped; brief: only
    how many, for a tile), or a StepTimer's own ("timer.step()", its step_on)."""
    if r.seen is None:  # a StepTimer's result: its step_on
        return str(r.step_source or "")
    text, n = STEP_SOURCE_WORDS.get(r.step_source or "", "none"), r.seen.optimizers
    if r.optimizer_order is not None and n >= 2:
        text += f"; {n} optimizers" if brief else "; " + optimizer_order_sentence(r.optimizer_order, n)
    return text


def step_source_words(r: RunReport) -> str:
    """The step source once (what a row is; how several optimizers stepped), with the other optimizers'
    steps against the rows where some stepped inside them."""
    others = other_steps_sentence(r)
    return step_source_text(r) + (f"; {others}" if others else "")


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


# A cheaper batch, by how the loader's items are made (a decoder is named only where images are decoded):
# the "try" line's few words, and the loader plan's change.
CHEAPER = {
    "pil": (
        "cheaper batches (decode_jpeg, not PIL; pre-resized or cached images)",
        "make a batch cheaper: a faster decoder (torchvision.io.decode_jpeg rather than PIL), images "
        "pre-resized to the size the model takes, or data decoded once and cached as tensors",
    ),
    "fast": (
        "cheaper batches (pre-resized or cached images)",
        "make a batch cheaper: images pre-resized to the size the model takes, or data decoded once and "
        "cached as tensors",
    ),
    "none": (
        "cheaper batches (transforms once on the whole tensor, batch indexing)",
        "make a batch cheaper: the items are in memory already, so the time is the per-item transforms and "
        "collate: transform the whole tensor once up front, or index a batch at a time (a BatchSampler) "
        "rather than item by item",
    ),
    "unknown": (
        "cheaper batches (less work per item, data cached as tensors)",
        "make a batch cheaper: less work per item in the dataset's __getitem__ (transforms done once up "
        "front, data prepared once and cached as tensors)",
    ),
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
    cheaper = CHEAPER.get(str(p.decode), CHEAPER["unknown"])[1]
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


# -- the user's lines ----------------------------------------------------------------------------------------------


BACKWARD_WORDS = {
    "activation_checkpointing": "activation checkpointing (forward recomputed in backward)",
    "requires_grad_on_frozen_layers": "gradients computed for layers meant to be frozen (requires_grad left on)",
    "scatter_or_index_backward": "indexing or embedding backward that scatters (index_add, dense embedding grads)",
    "backward_hooks": "hooks that run in backward",
}


def _printable(text: str) -> str:
    # A document may come from someone else: no control character reaches the terminal.
    return "".join(c if c.isprintable() else "?" for c in str(text))


def where(file: str, line: int, cwd: str | None = None) -> str:
    """file:line, relative to `cwd` (default: the current folder) when the file lies under it."""
    cwd = os.getcwd() if cwd is None else cwd
    rel = os.path.relpath(file, cwd) if os.path.isabs(file) else file
    return _printable(f"{file if rel.startswith('..') else rel}:{int(line)}")


SYNCING = ("item", "cpu", "tolist")  # read a value back to Python: on a GPU each waits for the device
LOOP_FUNCTIONS_PREFIX = "__"  # a Dataset's own methods (__getitem__, __call__ of a transform) are dunders


def _calls(calls: tuple[SiteCalls, ...]) -> str:
    # Fewer than one call a step is not what holds a step's time (and rounds to "0 calls").
    shown = [c for c in calls if c.per_step >= 1.0][:2]
    text = "".join(f"; {c.per_step:.0f} `.{_printable(c.method)}()` a step" for c in shown)
    if any(c.method in SYNCING for c in shown):
        text += ": keep on device, read every N steps"
    return text


def _span(lb: LabelLines, f: FunctionCost, cwd: str | None) -> str:
    # A function's total belongs to the function: its name and the lines its samples fell on.
    mine = [int(x.line) for x in lb.lines if (x.file, x.function) == (f.file, f.function)]
    lo, hi = min(mine + [int(f.line)]), max(mine + [int(f.line)])
    at = where(f.file, lo, cwd)
    return f"{_printable(f.function)} at {at}" + (f"-{hi}" if hi > lo else "")


def _site(x: LineCost | FunctionCost, cwd: str | None) -> str:
    fn = "" if x.function == "<module>" else f"{_printable(x.function)} at "  # the script's top level
    return f"{fn}{where(x.file, x.line, cwd)}"


def _loop_wait(r: RunReport, label: str, x: LineCost | FunctionCost) -> Loader | None:
    # Load time at a line of the loop itself (not a Dataset's method) is the loader's next(): the batch is
    # made in library code (a library Dataset, collate, workers), so the change is the DataLoader's settings.
    if label != "load" or not x.user or str(x.function).startswith(LOOP_FUNCTIONS_PREFIX):
        return None
    loader = r.training_loader
    return loader if loader and loader.site else None


# The loader plan's kinds that rule workers out (its words say why, in the loading line and --explain).
_NO_WORKERS = {k.value for k in (PlanKind.NO_FREE_CORE, PlanKind.CHEAPER_FETCH, PlanKind.MEASURED_NO_HELP)}


def _loader_text(loader: Loader, figure: str, plan: LoaderPlan | None) -> str:
    # The loop's own line only shows where it waits; the change is the loader's settings, at its line, and
    # it is the loader plan's change: this line never advises workers the plan has ruled out.
    workers = int(loader.num_workers or 0)
    kind = plan.kind if plan is not None else ""
    if kind in _NO_WORKERS:
        change = "cheaper batches, not workers"
    elif kind == PlanKind.PERSISTENT_WORKERS.value:
        change = "set persistent_workers=True"
    else:
        change = "add workers" if not workers else "more workers or cheaper batches"
    return f"DataLoader at {_printable(loader.site)} (num_workers={workers}): {figure} waiting; {change}"


def _library_line(x: LineCost, label: str, cwd: str | None) -> str | None:
    """A user's line that holds a label's time only because it calls into a library (trainer.train()):
    the share of the label at the deepest frame of that library where the time went, by file and line
    (its own lines are for py-spy or the library's profiler; perfcore does not guess its settings)."""
    inside = x.inside
    # Counted syncing calls at the line (as _calls shows them) are its change already: keep values on the device.
    if not inside or x.share < 0.5 or not x.user or _calls(x.calls):
        return None
    lib = package_of(inside[0])
    share = fmt_share(float(x.share) * float(x.inside_share or 0))
    of = _printable(lib) + ("'" if lib.endswith("s") else "'s")
    at = f"{os.path.basename(inside[0])}:{int(inside[2])}"
    return f"  try: {_site(x, cwd)}: {share} of {label} is in {of} {_printable(inside[1])} ({_printable(at)})"


def _try_line(r: RunReport, lb: LabelLines, label: str, cwd: str | None) -> str:
    # The label's ms are the breakdown's (the table above); the samples give a site's share of them (a
    # sampler starved of CPU sees less time, not a different split). A site is sized only when its samples
    # are enough for its share (enough_samples); else the function, else the counts alone.
    # The label's ms as the table above quotes it (the verdict's steady estimate, outliers set apart).
    label_ms = r.steady().ms.get(label) or lb.ms_per_step
    n = int(lb.samples or 0)
    f = lb.functions[0]
    x = lb.lines[0] if lb.lines else LineCost(f.file, f.function, f.line, f.ms_per_step, f.share, f.samples, f.user)
    loader = _loop_wait(r, label, x)

    def sized(share: float, note: str = "") -> str:
        # The sample counts stay in --explain and report.html: the short line keeps the figure and its share.
        return f"{fmt_ms(share * label_ms)} a step ({fmt_share(share)} of {label}{note})"

    if enough_samples(x.share, n):
        if loader:
            return f"  try: {_loader_text(loader, sized(x.share), r.loader_plan)}"
        inside = _library_line(x, label, cwd)
        if inside:
            return inside
        # A line with no call to change is named with what to do: the time on it is the step's to cut.
        verb = "" if _calls(x.calls) else "speed up "
        return f"  try: {verb}{_site(x, cwd)}: {sized(x.share)}{_calls(x.calls)}"
    calls = tuple(c for y in lb.lines if (y.file, y.function) == (f.file, f.function) for c in y.calls)
    if enough_samples(f.share, n):
        verb = "" if _calls(calls) else "speed up "
        return f"  try: {verb}{_span(lb, f, cwd)}: {sized(f.share, '; no one line stands out')}{_calls(calls)}"
    counted = _calls(calls)
    # With counted calls the line's action is theirs; the sample counts would only push it past the width.
    few = (
        "too few samples to time it"
        if counted
        else f"too few samples to time it ({f.samples} of {n} {label}; a time needs {min_samples(f.share)}, "
        "a longer run has more)"
    )
    # Without counted calls there is no change to make at the line: a caveat, said as a note.
    return f"  {'try' if counted else 'note'}: {_span(lb, f, cwd)}: {few}{counted}"


def lines_text(r: RunReport, cwd: str | None = None) -> list[str]:
    out = []
    causes = r.verdict.named
    label = causes[0].label if causes else None
    lb = r.lines.label(label) if r.lines is not None and label in ("host", "load") else None
    if lb is not None and lb.functions:
        out.append(_try_line(r, lb, label, cwd))
    out += _compute_text(r)
    s = r.starvation
    if s is not None and s.starved:
        out.append(
            f"  steps that waited on the loader: {fmt_share(s.share)} ({s.starved} of {s.steps}, "
            f"waits over {fmt_ms(s.threshold_ms)}): their p50 wait {fmt_ms(s.p50_wait_ms)}, "
            f"p95 {fmt_ms(s.p95_wait_ms)}, "
            f"longest run {s.longest_run} steps from step {s.longest_run_first_step}"
        )
    return out


def _compute_text(r: RunReport) -> list[str]:
    facts = r.compute_facts
    out = []
    o = facts.optimizer if facts is not None else None
    if o:
        lo, hi = o.saved_ms
        saves = f"saves {fmt_ms(lo)}-{fmt_ms(hi)} a step" if o.measured else f"saves up to {fmt_ms(hi)} a step"
        at = f"{_printable(o.site)}: " if o.site else ""
        share = f" (optimizer {fmt_ms(o.optimizer_ms)}, {fmt_share(o.share)})"
        line = f"  try: {at}{_printable(o.snippet)}: {saves}"
        out.append(line + share if len(line + share) <= WIDTH else line)  # the figures give way to the width
    b = facts.backward if facts is not None else None
    if b:
        why = "; ".join(BACKWARD_WORDS.get(c, _printable(c)) for c in b.likely[:3])
        out.append(
            f"  backward is {b.ratio:.1f}x forward ({fmt_ms(b.backward_ms)} against "
            f"{fmt_ms(b.forward_ms)}; ~2x is usual, {fmt_ms(b.excess_ms)} a step above it): "
            f"look for {why}"
        )
    return out


@dataclasses.dataclass(frozen=True)
class _Patch:
    """What the sweep's document says of its DataLoader patch (experiments.sweep_patch), each fact read on its
    own: written (the patch's file name, the call as patched, at file:line) or why none was."""

    status: str = ""
    reason: str | None = None
    patch: str | None = None
    at: str = ""
    call: str = ""
    through_kwargs: bool = False
    site: Any = None
    cwd: Any = None
    error: str | None = None
    speedup: float | None = None
    noise_share: float | None = None


def _no_patch(p: _Patch) -> str:
    """Why the sweep wrote no patch, from its reason (an older document's reason is its words)."""
    if p.reason == "no_site":
        return "no DataLoader call site or no best configuration"
    if p.reason == "own_is_best":
        return "the best configuration is the script's own"
    if p.reason == "within_noise":
        x, noise = p.speedup, p.noise_share
        ahead = f" ({x:.2f}x its rate, noise +-{100 * noise:.0f}%)" if x and noise is not None else ""
        return f"the best configuration is no faster than the script's own beyond the runs' noise{ahead}"
    if p.reason == "not_under_cwd":
        return f"the DataLoader at {p.site} is not a file under {p.cwd}"
    if p.reason == "cannot_patch":
        return p.error or ""
    if p.reason == "failed_try":
        return f"not offered: {p.error or 'the patched script failed its try'}"
    return p.reason or ""


def patch_text(patch: Mapping[str, Any] | None, folder: str = "<sweep folder>") -> list[str]:
    """The sweep's DataLoader change: the call as it would read at its file:line, and the patch to apply."""
    if not patch:
        return []
    p = _Patch(**fields_of(_Patch, patch))
    if p.status != "written":
        return [f"  no DataLoader patch: {_printable(_no_patch(p))}"]
    if p.patch != PATCH_NAME:  # a document's name is never a path handed to `git apply`
        return [f"  no DataLoader patch: the document names it {_printable(str(p.patch)[:60])!r}, not {PATCH_NAME}"]
    return [
        f"  change at {_printable(p.at)}: {_printable(p.call)}",
        f"  git apply {_printable(shlex.quote(os.path.join(folder, p.patch)))}"
        + ("  (the call also passes **kwargs: check they do not set these)" if p.through_kwargs else ""),
    ]
