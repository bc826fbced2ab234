"""Writing one process's part of a run (PERFCORE_RUN_DIR/parts/<rank or pid>/): run.json, steps.csv
and trace.npz, from the instrumentation's StepTimer and what its hooks saw; `perfcore run`'s parent
turns the parts into the run folder. A process that saw no step still writes what it saw."""
from __future__ import annotations

import os
import socket
import sys
from typing import Any

import numpy as np

from perfcore.report import jsonio
from perfcore.run.child.exits import uncaught_reason
from perfcore.run.child.steps import DESCRIBE, LOOKS_FOR
from perfcore.run.protocol import WORKERS, part_dir, part_key

__all__ = ["write_part", "memory_trend", "startup_summary"]


def write_part(inst) -> None:
    inst.exit_reason = uncaught_reason(inst.exit_reason)  # before finalize decides how to die
    counts = dict(inst.sources.counts)
    timer = inst.timer
    source = inst.sources.finish()
    part = part_dir(inst.run_dir, part_key(inst.rank))
    part.mkdir(parents=True, exist_ok=True)
    common = _common(inst, source, counts)
    if timer is None or not timer.engine.boundaries:
        if timer is not None:
            timer.engine.close_open_phases()
            timer.close()
        clock = inst.torch_hooks.clock
        common["no_step"] = no_step_sentence(counts, (inst.now_ns() - inst.t_start) / 1e9, clock is not None,
                                             forced=inst.sources.forced,
                                             optimizer_stepped=bool(clock is not None and clock.clocked))
        jsonio.write(part / "run.json", {"schema": "perfcore.run/1", "steps": 0, "warmup_steps": 0, **common})
        return
    _write_steps(inst, timer, part, common)


def no_step_sentence(counts: dict[str, int], wall_s: float, torch_instrumented: bool = True,
                     forced: str | None = None, optimizer_stepped: bool = False) -> str:
    if not torch_instrumented:
        if "torch" in sys.modules:
            return (f"no step seen in {wall_s:.1f} s: torch was loaded in a way perfcore could not instrument "
                    "(a custom import finder?); time the loop with perfcore.StepTimer instead")
        # --step-on cannot help a script that has no torch loop to find a step in.
        return f"no step seen in {wall_s:.1f} s: the script never imported torch, so there was no training loop to time"
    seen = (f"{counts.get('forward', 0)} top-level forward call(s), {counts.get('backward', 0)} backward pass(es), "
            f"{counts.get('batch_all', 0)} DataLoader batch(es), "
            f"{'optimizer steps' if optimizer_stepped else 'no optimizer step'}")
    if forced:
        # The source that would have given steps, in the automatic choice's order.
        works = next((s for s, ok in (("optimizer", optimizer_stepped), ("backward", counts.get("backward", 0) > 0),
                                      ("batch", counts.get("batch_all", 0) > 1),
                                      ("forward", counts.get("forward", 0) > 1)) if ok and s != forced), None)
        fix = (f"--step-on {works} would find steps here (or leave --step-on out for the automatic choice)"
               if works else "nothing else looked like a step either")
        return f"no step seen in {wall_s:.1f} s with --step-on {forced}: seen {seen}; {fix}"
    return (f"no step seen in {wall_s:.1f} s: {counts.get('forward', 0)} top-level forward call(s), "
            f"{counts.get('backward', 0)} backward pass(es), {counts.get('batch_all', 0)} DataLoader batch(es), "
            f"no optimizer step. {LOOKS_FOR.split('; none')[0]}. Force one with --step-on "
            "optimizer|backward|batch|forward")


def _source_text(inst, source: str | None) -> str:
    text = DESCRIBE.get(source or "", "none")
    if source == "optimizer" and inst.sources.optimizers_made > 1:
        # Rows follow the first optimizer to step; say what that means for the others' work.
        text += (f"; {inst.sources.optimizers_made} optimizers: a step ends at the step of the first one to step, "
                 "so an optimizer that steps after it in an iteration (a GAN's generator after its discriminator) "
                 "lands in the next row: row k holds its step of iteration k-1")
    return text


def _common(inst, source: str | None, counts: dict[str, int]) -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "rank": int(inst.rank) if inst.rank is not None else None,
        "nested_in": inst.nested_in,
        "world_size": int(os.environ["WORLD_SIZE"]) if os.environ.get("WORLD_SIZE") else None,
        "host": socket.gethostname(),
        "argv": list(sys.argv),
        "exit": {"reason": inst.exit_reason, "exception": inst.exception,
                 "usage_error": getattr(inst, "usage_error", None)},
        "step_source": source,
        "step_source_text": _source_text(inst, source),
        # Counted until the step source was chosen (then the hooks stop calling Python for them).
        "seen": {**counts, "optimizers": inst.sources.optimizers_made, "counted_until": source or "the end",
                 "wall_ms": (inst.now_ns() - inst.t_start) / 1e6},
        "loaders": inst.loaders.summary(inst.run_dir / WORKERS),
        "dataloader_overrides": {"asked": inst.overrides, "applied": inst.overrides_applied},
        "synthetic": {"keep": inst.synthetic, "replayed": inst.replayed},
    }


def _write_steps(inst, timer, part, common: dict[str, Any]) -> None:
    import pandas as pd
    import psutil

    timer.engine.close_open_phases()  # a crash inside a phase: close it at the crash
    if inst.on_gpu:
        import torch

        try:
            torch.cuda.synchronize()
        except Exception:
            pass
    cpu_util = psutil.cpu_percent(None)
    table = timer.engine.summary()
    # One summary of the run: the evaluation rows are set apart in it (out of the step statistics,
    # the robust breakdown and the verdict) and their cost is a finding of its own.
    doc = dict(timer.engine.document(settle=False, evaluation_rows=inst.eval_rows))
    timer.close()
    full = timer.engine.step_table()
    evaluation = _evaluation(inst, full, table)
    if evaluation:
        # The rows' indices and the passes seen by the step source are this side's; the cost per row
        # and the share of the wall time are the analysis's.
        doc["evaluation"] = {**(doc.get("evaluation") or {}), **evaluation}
    n = len(full)
    mem = np.full(n, -1, dtype=np.int64)  # -1: not sampled at that step
    at, sampled = inst.mem_samples.arrays()
    inside = (at >= 0) & (at < n)
    mem[at[inside]] = sampled[inside]
    table["mem_bytes"] = mem
    training = ~table["warmup"].to_numpy() & ~table.get("evaluation", pd.Series(False, index=table.index)).to_numpy()
    steps_total = int(doc["steps"] + doc["warmup_steps"])
    batches = inst.loaders.training_batches()
    doc.update(common)
    doc.update({
        "cpu_util_percent": cpu_util,
        "memory": {"kind": inst.mem_kind, **memory_trend(mem[training & (mem >= 0)]),
                   **memory_limits(inst.mem_kind)},
        "compute_split_ms": {ph: float(table.loc[training, f"{ph}_ms"].mean())
                             for ph in ("forward", "backward", "optimizer") if f"{ph}_ms" in table and training.any()},
        "compute_split_gpu_ms": {ph: float(table.loc[training, f"{ph}_gpu_ms"].mean())
                                 for ph in ("forward", "backward", "optimizer")
                                 if f"{ph}_gpu_ms" in table and training.any()},
        "skipped_boundaries": inst.torch_hooks.clock.skipped if inst.torch_hooks.clock is not None else 0,
        "batches_per_step": (batches / steps_total) if batches and steps_total else None,
        "scaler_skipped_steps": inst.sources.scaler_skips,
        "startup": startup_summary(inst.t_start, full, common["loaders"], doc["steps"]),
    })
    from perfcore._C import hook_errors

    untimed = hook_errors()
    if untimed:
        inst.notes.append(f"{untimed} hooked call(s) could not be timed (a phase would not open or "
                          "close there); they ran untimed")
    if inst.backend_note:
        doc["capture"] = {**(doc.get("capture") or {}), "requested_backend": inst.backend, "note": inst.backend_note}
    if doc.get("overhead"):
        # The estimate covers the timer's phases; the zero-code hooks around them cost more.
        doc["overhead"] = dict(doc["overhead"], hooks="not included")
    stop_note = inst.stop_note()
    if stop_note:
        inst.notes.append(stop_note)
    if inst.notes or timer.notes:
        doc["notes"] = list(dict.fromkeys(inst.notes + timer.notes))
    jsonio.write_csv(part / "steps.csv", table)
    _write_trace(timer, full, part)
    jsonio.write(part / "run.json", doc)


def _evaluation(inst, full, table) -> dict[str, Any] | None:
    """Rows that are evaluation passes: flagged in both tables, summed apart."""
    rows = [r for r in inst.eval_rows if r < len(full)]
    full["evaluation"] = False
    table["evaluation"] = False
    if not rows:
        passes = inst.sources.eval_passes
        return {"passes": len(passes), "total_ms": sum(b - a for a, b in passes) / 1e6,
                "apart": False} if passes else None
    full.loc[rows, "evaluation"] = True
    table.loc[rows, "evaluation"] = True
    passes = inst.sources.eval_passes
    return {"passes": len(passes), "total_ms": sum(b - a for a, b in passes) / 1e6,
            "rows": rows, "rows_ms": float(full.loc[rows, "wall_ns"].sum() / 1e6), "apart": True}


def startup_summary(t_start: int, full, loaders: list[dict[str, Any]], measured: int) -> dict[str, Any]:
    """Time to the first step's end from interpreter start, the first step against steady state,
    and the training DataLoader's first-epoch worker start-up."""
    walls = full["wall_ns"].to_numpy() / 1e6
    first = full.iloc[0]
    first_end_ns = int(first["start_ns"] + first["wall_ns"] + first.get("perfcore_ns", 0))  # wall leaves it out
    rest = full.iloc[1:]  # steady state: never the first step itself (a one-step run has none)
    rest = rest[~rest["warmup"]] if measured else rest
    if "evaluation" in rest:
        rest = rest[~rest["evaluation"]]
    starts = [s for ld in loaders if ld.get("training") for s in ld["worker_startup_ms"]]
    starts = starts or [s for ld in loaders for s in ld["worker_startup_ms"]]
    return {
        "time_to_first_step_ms": (first_end_ns - t_start) / 1e6,
        "first_step_ms": float(walls[0]),
        "steady_step_ms": float(np.median(rest["wall_ns"].to_numpy()) / 1e6) if len(rest) else None,
        "worker_startup_ms": float(starts[0]) if starts else None,
        "worker_startup_total_ms": float(sum(starts)) if starts else None,
    }


def _write_trace(timer, full, part) -> None:
    detail = timer.engine.trace_tables()  # the kept steps' detail: bounded however long the run
    spans = detail["spans"]
    names = timer.engine.phase_names()
    # Strings go in as fixed-width unicode arrays: np.load(allow_pickle=False) must read them back.
    raw: dict[str, Any] = {
        "span_phase": spans["phase_id"].to_numpy(), "span_start_ns": spans["start_ns"].to_numpy(),
        "span_end_ns": spans["end_ns"].to_numpy(), "span_thread": spans["thread_id"].to_numpy(),
        "span_step": spans["step"].to_numpy(),
        "phase_ids": np.array(list(names), dtype=np.int32), "phase_names": np.array(list(names.values()), dtype=str),
        "step_start_ns": full["start_ns"].to_numpy(), "step_wall_ns": full["wall_ns"].to_numpy(),
    }
    # Which steps those intervals cover, and the cap that bounded them (the trace says so).
    # Imported here, not at the top: a process that never imported torch writes its part at
    # interpreter shutdown, when pandas (which the engine brings) can no longer be imported.
    from perfcore.recording.engine import detail_steps

    kept = detail_steps(timer.engine)
    raw.update(detail_through=np.int64(kept["through"]), detail_settled=np.int64(kept["settled"]),
               detail_window=np.array(kept["window"], dtype=np.int64), detail_cap_steps=np.int64(kept["cap_steps"]),
               detail_cap_rows=np.int64(kept["cap_rows"]))
    k, c, ev = detail["kernels"], detail["copies"], detail["events"]
    if len(k):
        raw.update(kernel_start_ns=k["start_ns"].to_numpy(), kernel_end_ns=k["end_ns"].to_numpy(),
                   kernel_stream=k["stream_id"].to_numpy(), kernel_name=k["name"].to_numpy(dtype=str))
    m = c[c["kind"] == "memcpy"]
    if len(m):
        raw.update(memcpy_start_ns=m["start_ns"].to_numpy(), memcpy_end_ns=m["end_ns"].to_numpy(),
                   memcpy_stream=m["stream_id"].to_numpy(), memcpy_bytes=m["size_bytes"].to_numpy(),
                   memcpy_direction=m["direction"].to_numpy(dtype=str), memcpy_pageable=m["pageable"].to_numpy())
    if len(ev) and not timer.engine.kernels_traced:
        raw.update(event_phase=ev["phase_id"].to_numpy(), event_start_ns=ev["start_ns"].to_numpy(),
                   event_end_ns=ev["end_ns"].to_numpy())
    with jsonio.atomic_path(part / "trace.npz") as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, **raw)  # a file object: given a path, numpy would append ".npz" to it


def memory_limits(kind: str) -> dict:
    """What memory pressure is judged by: the allocator's retries and the device's capacity on a GPU,
    the machine's RAM for peak RSS."""
    try:
        if kind == "cuda_allocated":
            import torch

            return {"alloc_retries": int(torch.cuda.memory_stats().get("num_alloc_retries", 0)),
                    "capacity_bytes": int(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)}
        import psutil

        return {"capacity_bytes": int(psutil.virtual_memory().total)}
    except Exception:  # a missing figure only means no pressure finding
        return {}


def memory_trend(mem) -> dict:
    """Peak memory per step and its growth: a steady rise over steps is reported as a probable leak."""
    if len(mem) < 3:
        return {"peak_bytes": int(mem.max()) if len(mem) else None, "growth_bytes_per_step": 0.0, "probable_leak": False}
    x = np.arange(len(mem), dtype=np.float64)
    y = mem.astype(np.float64)
    slope, intercept = np.polyfit(x, y, 1)
    fit = slope * x + intercept
    ss_res, ss_tot = float(((y - fit) ** 2).sum()), float(((y - y.mean()) ** 2).sum())
    r2 = 1 - ss_res / ss_tot if ss_tot > 0 else 0.0
    total_growth = slope * (len(mem) - 1)
    leak = bool(slope > 0 and r2 > 0.8 and total_growth > max(8 * 2**20, 0.05 * y[0]))
    return {"peak_bytes": int(mem.max()), "first_bytes": int(mem[0]), "last_bytes": int(mem[-1]),
            "growth_bytes_per_step": float(slope), "r2": r2, "probable_leak": leak}
