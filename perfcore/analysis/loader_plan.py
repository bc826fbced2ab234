"""The DataLoader's side of the advice: which loader the loop trains on, how many batches it takes a
step, and the loader plan (how many workers would hide loading, and when workers already run and the
loop still waits, why), sized by the cores the loop's compute leaves free. Pure functions on documents."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from perfcore.analysis.script_facts import Decode, decode_of
from perfcore.analysis.status import Change, change_of
from perfcore.analysis.units import fmt_ms, fmt_x

__all__ = [
    "training_loader",
    "training_loader_index",
    "batches_per_step",
    "loader_plan",
    "contradicting_trial",
    "spare_cores",
    "where",
]
# A wait the epochs' worker restarts explain at least half of is blamed on them; a quarter is
# worth naming beside the main reason.
STARTUP_EXPLAINS = 0.5
STARTUP_CONTRIBUTES = 0.25
# A loop that waits this many times longer than a batch takes to make waits for the handover.
HANDOVER_RATIO = 2.0


def training_loader_index(loaders: Sequence[Mapping[str, Any]] | None) -> int | None:
    """Which loader the loop trains on: a train one (not one an evaluation drew from), the one it
    drew most batches from."""
    if not loaders:
        return None
    return max(
        range(len(loaders)), key=lambda i: (bool(loaders[i].get("training", True)), loaders[i].get("batches") or 0)
    )


def training_loader(loaders: Sequence[Mapping[str, Any]] | None) -> dict[str, Any] | None:
    """The loader the loop trains on (a script may build a validation loader too)."""
    i = training_loader_index(loaders)
    return None if i is None else dict(loaders[i])


def batches_per_step(doc: Mapping[str, Any]) -> tuple[float, str]:
    """Batches the loop takes per step: the run's own count when it has one, else batches fetched by
    the training loader over steps seen (rounded: prefetching adds a few), else 1."""
    if doc.get("batches_per_step"):
        return float(doc["batches_per_step"]), "counted by the run"
    n_steps = int(doc.get("steps") or 0) + int(doc.get("warmup_steps") or 0)
    ld = training_loader(doc.get("loaders")) or doc.get("workers") or {}
    if ld.get("batches") and n_steps and str(doc.get("step_source", "optimizer")).startswith("optimizer"):
        est = round(ld["batches"] / n_steps)
        if est >= 2:
            return float(est), f"{ld['batches']} batches over {n_steps} steps"
    return 1.0, "one batch per step assumed"


def _settings(ld: Mapping[str, Any]) -> str:
    keys = ("batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers")
    return ", ".join(f"{k}={ld[k]}" for k in keys if ld.get(k) is not None)


def where(ld: Mapping[str, Any]) -> str:
    """The user's DataLoader in words: its construction site (file:line) and settings, where known."""
    owner = f"the DataLoader made at {ld['site']}" if ld.get("site") else ld.get("owner") or "your DataLoader"
    return f"{owner} ({_settings(ld)})" if _settings(ld) else owner


SPARE_SLACK_CORES = 0.25


def spare_cores(cores: int, *, loop_cores: float | None = None, other_cores: float | None = None) -> float:
    """Cores a DataLoader worker could have to itself: the machine's, less what the loop's own compute
    keeps busy (its measured CPU, or torch's intra-op threads; one core when neither is known) and what
    other processes used during the run."""
    loop = 1.0 if loop_cores is None else max(float(loop_cores), 1.0)
    return max(float(cores) - loop - max(float(other_cores or 0.0), 0.0), 0.0)


def _cores_text(cores: int, loop_cores: float | None, other_cores: float | None, threads: int | None) -> str:
    parts = []
    if loop_cores is not None:
        parts.append(
            f"the loop's compute already uses {loop_cores:.1f} of the {cores} cores"
            + (f" ({threads} torch threads)" if threads else "")
        )
    elif threads:
        parts.append(f"torch runs the loop's compute on {threads} threads of the {cores} cores")
    else:
        parts.append(f"the loop keeps one of the {cores} cores busy")
    if other_cores and other_cores >= 0.1:
        parts.append(f"other processes used {other_cores:.1f}")
    return " and ".join(parts)


def contradicting_trial(trials: Sequence[Mapping[str, Any]] | None, n: int, more: bool) -> dict[str, Any] | None:
    """A measured configuration (diagnose B, a sweep row: num_workers and its speedup against this
    run's settings) that says the opposite of the advice: more workers measured not faster, or fewer
    workers measured faster. The strongest such measurement, or None."""
    best = None
    for t in trials or []:
        w, x = t.get("num_workers"), t.get("speedup")
        if w is None or not x or x != x or t.get("relative_to", n) != n:
            continue  # a ratio against other settings than this run's says nothing about its change
        # The measurement's own noise, as a share of the step, decides faster / slower / within noise.
        change = change_of(x, t.get("noise_share"))
        # How strongly it says the opposite: the slowdown of more workers (or no gain beyond the
        # noise), the speed-up of fewer.
        if more and w > n and change is not Change.FASTER:
            score = 1.0 / x
        elif more and w < n and change is Change.FASTER:
            score = x
        else:
            continue
        if best is None or score > best[0]:
            best = (score, {**t, "change": change.value})
    return dict(best[1]) if best else None


# What a workers trial that turned the advice round measured, by its status: the word sits beside
# the number it describes, so a ratio above 1 is never called slower.
_TRIAL_WORDS = {
    (True, Change.SLOWER): "more workers made steps slower",
    (True, Change.WITHIN_NOISE): "more workers made steps no faster beyond the runs' noise",
    (False, Change.FASTER): "fewer workers made steps faster",
}


# How to make a batch cheaper, by how its items are made: a decoder is named only where images are decoded.
_CHEAPER = {
    Decode.PIL: "make a batch cheaper: a faster decoder (torchvision.io.decode_jpeg rather than PIL), "
    "images pre-resized to the size the model takes, or data decoded once and cached as tensors",
    Decode.FAST: "make a batch cheaper: images pre-resized to the size the model takes, or data decoded "
    "once and cached as tensors",
    Decode.NONE: "make a batch cheaper: the items are in memory already, so the time is the per-item "
    "transforms and collate: transform the whole tensor once up front, or index a batch at a time "
    "(a BatchSampler) rather than item by item",
    Decode.UNKNOWN: "make a batch cheaper: less work per item in the dataset's __getitem__ (transforms "
    "done once up front, data prepared once and cached as tensors)",
}


def cheaper_batch(decode: Decode) -> str:
    """What makes a batch cheaper, for items made as `decode` says."""
    return _CHEAPER[decode]


def loader_plan(  # noqa: PLR0913, PLR0915
    ld: Mapping[str, Any],
    *,
    step_ms: float,
    load_ms: float,
    per_step: float,
    cpu_count: int | None,
    on_gpu: bool,
    measured_batches: float | None = None,
    cpu_percent: float | None = None,
    loop_cores: float | None = None,
    other_cores: float | None = None,
    torch_threads: int | None = None,
    trials: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """How many workers would hide loading, and when workers already run and the loop still waits,
    why. ld: num_workers, worker_batch_ms (a worker's time to make one batch), and where known
    site, pin_memory, prefetch_factor, persistent_workers, worker_startup_ms (per epoch), batches,
    collate_ms. None without a per-batch worker time.

    Workers only help on cores the loop's compute leaves free: loop_cores (the main process's measured
    CPU), torch_threads and other_cores (other processes' CPU during the run) size the spare cores, and
    `achievable_ms` is the wait that many workers can hide (the expected gain is the achievable one).
    trials: measured configurations (num_workers, speedup against this run); one that measured the
    opposite of the advice turns it round to what does help."""
    make_ms = ld.get("worker_batch_ms")
    if make_ms is None:
        return None
    n = int(ld.get("num_workers") or 0)
    per_step = max(per_step, 1.0)
    consume_ms = max(step_ms - load_ms, 1e-6) / per_step  # the loop's time per batch when data is ready
    wait_ms = load_ms / per_step
    needed = max(1, math.ceil(make_ms / consume_ms))
    cores = cpu_count or 1
    # Measured CPU of the loop wins; torch's intra-op thread count says as much before anything ran.
    # With num_workers=0 the main process also made the batches (about one core while it waits):
    # what its compute uses is the rest of its CPU over the rest of the step.
    if loop_cores is not None and n == 0 and step_ms > load_ms > 0:
        wait = load_ms / step_ms
        loop_cores = min(max((loop_cores - wait) / (1 - wait), 0.0), float(cores))
    loop_est = loop_cores if loop_cores is not None else (float(min(torch_threads, cores)) if torch_threads else None)
    free = spare_cores(cores, loop_cores=loop_est, other_cores=other_cores)
    plan: dict[str, Any] = {
        "num_workers": n,
        "worker_batch_ms": make_ms,
        "batches_per_step": per_step,
        "loop_ms_per_batch": consume_ms,
        "wait_ms_per_batch": wait_ms,
        "workers_needed": needed,
        "cpu_count": cores,
        "spare_cores": free,
        "loop_cores": loop_cores,
        "other_cores": other_cores,
        "torch_threads": torch_threads,
        "set": {},  # the settings the plan changes in the user's DataLoader call, as numbers
    }
    rate = f"a batch takes {fmt_ms(make_ms)} to make and the loop uses one every {fmt_ms(consume_ms)}" + (
        f", {per_step:g} batches per step" if per_step > 1 else ""
    )
    # Workers beyond the free cores share them with the loop and each other: they hide at most
    # free / needed of the wait (none when no core is free). A core three quarters free counts as
    # free: measured CPU carries a few percent of noise (an idle shell, the sampler), and a worker on
    # 0.996 of a core loses almost nothing, where flooring it to none would flip the advice.
    spare = max(int(math.floor(free + SPARE_SLACK_CORES)), 0)
    hide = min(1.0, free / needed) if needed else 1.0
    plan["achievable_ms"] = load_ms * hide
    cores_text = _cores_text(cores, loop_cores, other_cores, torch_threads)
    decode = decode_of(ld)
    plan["decode"] = decode.value
    more_cheaper = cheaper_batch(decode)
    fewer_threads = (
        f"or leave a core to a worker: torch.set_num_threads({max(cores - 1, 1)}) with num_workers=1 "
        "(compute then runs on one thread fewer; measure both)"
        if cores > 1 and (torch_threads is None or torch_threads > cores - 1)  # not a count it already has
        else ""
    )
    at = where(ld)
    trial = contradicting_trial(trials, n, more=True)
    if trial is not None and (n == 0 or needed > n):
        plan["reason"] = "measured: workers do not help"
        plan["achievable_ms"] = 0.0
        plan["trial"] = trial
        said = _TRIAL_WORDS[(trial["num_workers"] > n, Change(trial["change"]))]
        plan["sentence"] = (
            f"{trial.get('experiment', 'an experiment')} measured num_workers={trial['num_workers']} "
            f"at {fmt_x(trial['speedup'])} of these settings' speed: {said}"
            + f" on this machine ({cores_text}); {rate}"
        )
        plan["text"] = (
            f"In {at}: {more_cheaper}"
            + (f"; {fewer_threads}" if fewer_threads else "")
            + f". Not more workers: {plan['sentence']}."
        )
        return plan
    if n == 0:
        collate = ld.get("collate_ms")
        plan["reason"] = "main process"
        plan["sentence"] = (
            f"loading runs in the main process (num_workers=0): {rate}, so about {needed} worker(s) "
            "would hide it" + (f"; collate alone is {fmt_ms(collate)} of each batch" if collate else "")
        )
        if spare < 1:
            plan["reason"] = "no spare cores"
            plan["achievable_ms"] = 0.0
            plan["sentence"] += f", but no core is free for one: {cores_text}"
            plan["text"] = (
                f"In {at}: {more_cheaper}"
                + (f"; {fewer_threads}" if fewer_threads else "")
                + f". Workers would not help as things are: {plan['sentence']}."
            )
        elif needed > spare:
            plan["set"] = {"num_workers": spare, "persistent_workers": True}
            plan["text"] = (
                f"In {at}: set num_workers={spare} and persistent_workers=True. {rate[0].upper()}"
                f"{rate[1:]}, so hiding it needs about {needed} workers, more than the {spare} core(s) "
                f"free beside the loop ({cores_text}): if __getitem__ computes (decode, augment) "
                f"rather than waits on I/O, also {more_cheaper}."
            )
        else:
            plan["set"] = {"num_workers": needed, "persistent_workers": True}
            plan["text"] = f"In {at}: set num_workers={needed} and persistent_workers=True; {rate}."
        return plan
    # Each epoch's start-up (iter() to its first batch) less the making of that batch; the first
    # epoch pays it whatever the settings, later ones only without persistent_workers.
    starts = [float(s) for s in (ld.get("worker_startup_ms") or []) if s is not None]
    restarts = len(starts) - 1 if not ld.get("persistent_workers") else 0
    again_ms = sum(max(0.0, s - make_ms) for s in starts[1:]) if restarts > 0 else 0.0
    # Restarts after the first epoch fall in the measured steps: spread them over the batches measured.
    startup_per_batch = again_ms / max(measured_batches or ld.get("batches") or 1, 1)
    restart = (
        f"the workers start again every epoch: {fmt_ms(again_ms / max(restarts, 1))} each time beyond making "
        f"the first batch, over {restarts} restart(s) {fmt_ms(startup_per_batch)} per batch of the "
        f"{fmt_ms(wait_ms)} the loop waits"
    )
    if restarts > 0 and wait_ms > 0 and startup_per_batch >= STARTUP_EXPLAINS * wait_ms:
        plan["reason"] = "start-up each epoch"
        plan["sentence"] = restart
        plan["set"] = {"persistent_workers": True}
        plan["text"] = f"In {at}: set persistent_workers=True; {plan['sentence']}."
    elif needed > spare:
        plan["reason"] = "too slow per item"
        plan["achievable_ms"] = load_ms * min(1.0, free / needed) if n < spare else 0.0
        plan["sentence"] = (
            f"{n} worker(s) cannot keep up and more would not fit: {rate}, so about {needed} workers "
            f"would be needed, and {cores_text}, leaving {spare} core(s) for workers"
        )
        plan["text"] = f"In {at}: {more_cheaper}, rather than adding workers; {plan['sentence']}."
    elif needed > n:
        plan["reason"] = "too few workers"
        plan["sentence"] = (
            f"{n} worker(s) make a batch every {fmt_ms(make_ms / n)} together, the loop uses one every "
            f"{fmt_ms(consume_ms)} and waits {fmt_ms(wait_ms)} per batch: about {needed} would hide it"
        )
        plan["set"] = {"num_workers": needed}
        plan["text"] = f"In {at}: set num_workers={needed}; {plan['sentence']}."
    elif wait_ms > HANDOVER_RATIO * make_ms:
        # Waiting far longer than a batch takes to make: the time goes in handing it over (the worker
        # scheduled, the queue, unpickling in the main process), not in making it.
        busy = f" (host CPU {cpu_percent:.0f}%: processes wait for a core)" if cpu_percent and cpu_percent >= 90 else ""
        plan["reason"] = "handover from workers"
        plan["sentence"] = (
            f"{n} worker(s) make a batch in {fmt_ms(make_ms)} but the loop waits {fmt_ms(wait_ms)} for "
            f"each: the handover from the worker processes costs the rest{busy}"
        )
        plan["set"] = {"num_workers": 0}
        plan["text"] = (
            f"In {at}: with batches this cheap set num_workers=0 (the loop would spend about "
            f"{fmt_ms(make_ms)} making each one itself); {plan['sentence']}."
        )
    else:
        pf = ld.get("prefetch_factor") or 2
        pin = on_gpu and ld.get("pin_memory")
        plan["reason"] = "pin in main process" if pin else "prefetch too shallow"
        plan["sentence"] = (
            f"{n} worker(s) are enough on average ({rate}; about {needed} needed) yet the loop waits "
            f"{fmt_ms(wait_ms)} per batch: batches arrive in bursts and the {pf * n} queued "
            f"(prefetch_factor={pf} x {n}) run out"
        )
        if pin:
            plan["sentence"] += (
                "; pin_memory=True also copies every batch in a thread of the main process, "
                "which competes with the loop for the interpreter"
            )
        plan["set"] = {"prefetch_factor": max(pf * 2, 4)}
        plan["text"] = (
            f"In {at}: raise prefetch_factor to {max(pf * 2, 4)}"
            + (" or try pin_memory=False" if pin else "")
            + f"; {plan['sentence']}."
        )
    if (
        plan["reason"] != "start-up each epoch"
        and restarts > 0
        and wait_ms > 0
        and startup_per_batch >= STARTUP_CONTRIBUTES * wait_ms
    ):
        plan["sentence"] += f"; besides, {restart}"
        plan["set"] = {**plan["set"], "persistent_workers": True}
        plan["text"] = plan["text"][:-1] + f"; besides, {restart}: also set persistent_workers=True."
    return plan
