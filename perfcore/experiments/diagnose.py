"""Stage 2, diagnose: differential experiments against the baseline, and the bottleneck named.

(A) synthetic data (batches already fetched, replayed from device memory: no loading at all),
(B) num_workers=0 (or, when the baseline already uses 0, as many workers as cores),
(C) the other decoder, where the workload declares one;
plus a profile of where __getitem__ spends its time in the main process (top functions).
"""
from __future__ import annotations

import cProfile
import os
import pstats
import time
from typing import Any, Callable

from perfcore.workloads import Workload
from perfcore.experiments.runner import measure

__all__ = ["diagnose", "worker_profile"]


def worker_profile(workload: Workload, items: int = 48, top: int = 8) -> dict[str, Any]:
    """cProfile of dataset[i] for a few items, in this process, plus its CPU/wall ratio: a ratio
    far below 1 means __getitem__ waits (I/O), near 1 means it computes (decode, augment)."""
    ds = workload.dataset
    n = min(items, len(ds))
    prof = cProfile.Profile()
    c0, w0 = time.process_time(), time.perf_counter()
    prof.enable()
    for i in range(n):
        ds[i]
    prof.disable()
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    stats = pstats.Stats(prof)
    rows = []
    for (file, line, func), (cc, nc, tt, ct, callers) in stats.stats.items():
        rows.append({"function": f"{func} ({os.path.basename(file)}:{line})" if file != "~" else func,
                     "self_ms_per_item": tt / n * 1e3, "total_ms_per_item": ct / n * 1e3, "calls": nc})
    rows.sort(key=lambda r: r["self_ms_per_item"], reverse=True)
    return {"items": n, "ms_per_item": wall / n * 1e3, "cpu_to_wall": cpu / wall if wall else 0.0, "top": rows[:top]}


def _summary(row: dict[str, Any], name: str, base_ms: float) -> dict[str, Any]:
    keep = ("batch_size", "num_workers", "pin_memory", "decoder", "synthetic", "step_ms", "samples_per_s",
            "busy_mean", "busy_std", "cpu_percent", "peak_mem_bytes", "oom", "breakdown_ms")
    out = {"name": name, **{k: row.get(k) for k in keep}}
    out["speedup"] = base_ms / row["step_ms"] if row.get("step_ms") and row["step_ms"] == row["step_ms"] else None
    return out


def diagnose(workload: Workload, *, steps: int = 30, warmup: int = 3,
             progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    say = progress or (lambda msg: None)
    say("baseline")
    base = measure(workload, steps=steps, warmup=warmup)
    b_ms = base["step_ms"]
    exps = [_summary(base, "baseline", b_ms)]
    say("A: synthetic data")
    exps.append(_summary(measure(workload, steps=steps, warmup=warmup, synthetic=True), "A: synthetic data", b_ms))
    cores = os.cpu_count() or 1
    if workload.num_workers > 0:
        b_name, b_over = "B: num_workers=0", {"num_workers": 0}
    else:
        b_name, b_over = f"B: num_workers={cores} (baseline uses 0)", {"num_workers": cores}
    say(b_name)
    exps.append(_summary(measure(workload, steps=steps, warmup=warmup, overrides=b_over), b_name, b_ms))
    skipped = []
    others = [d for d in workload.decoders if d != workload.decoder]
    if others:
        say(f"C: decoder {others[0]}")
        exps.append(_summary(measure(workload.with_decoder(others[0]), steps=steps, warmup=warmup),
                             f"C: decoder {others[0]}", b_ms))
    else:
        skipped.append({"name": "C: other decoder", "reason": "the workload declares no other decoder"})
    say("worker profile")
    prof = worker_profile(workload)
    verdict, predicted = diagnose_verdict(base, exps, prof, on_gpu=base["device"] == "cuda")
    return {"schema": "perfcore.diagnose/1", "workload": workload.name, "device": base["device"],
            "experiments": exps, "skipped": skipped, "worker_profile": prof, "verdict": verdict,
            "predicted_speedup": predicted, "measured_speedup": exps[1]["speedup"]}


def diagnose_verdict(base: dict, exps: list[dict], prof: dict, on_gpu: bool) -> tuple[dict[str, str], float]:
    frac, ms = base["breakdown_fraction"], base["breakdown_ms"]
    step = base["step_ms"]
    # Removing loading entirely would save the exposed load time: that is the prediction (A) tests.
    predicted = step / max(step - ms["load"], 1e-9)
    a = exps[1]["speedup"] or 1.0
    dev = "GPU" if on_gpu else "the loop"
    by_name = {e["name"]: e for e in exps}
    decoder = next((e for n, e in by_name.items() if n.startswith("C:")), None)
    if frac["load"] >= 0.2 and a >= 1.15:
        if decoder and (decoder["speedup"] or 0) >= 1.10:
            cause = "CPU decode"
            how = (f"The {decoder['decoder']} decoder alone is {decoder['speedup']:.2f}x faster per step: "
                   f"switch to it")
        elif prof["cpu_to_wall"] is None:
            cause = "data loading"
            how = "Workers' __getitem__ dominates; a workload factory lets diagnose split decode from I/O"
        elif prof["cpu_to_wall"] is not None and prof["cpu_to_wall"] < 0.5:
            cause = "I/O"
            how = (f"__getitem__ spends {100 * (1 - prof['cpu_to_wall']):.0f}% of its time waiting, not computing: "
                   "faster storage, caching, or more workers to overlap the waits")
        else:
            cause = "CPU decode/augment"
            top = prof["top"][0]["function"] if prof["top"] else "?"
            how = f"__getitem__ is CPU-bound (top: {top}): cheaper decode/augment, or more workers if cores are free"
        return ({"bound": "load", "cause": cause,
                 "summary": f"input-bound ({cause}): {100 * frac['load']:.0f}% of each step {dev} waits for data; "
                            f"without loading a step would be {predicted:.2f}x faster (predicted), synthetic data "
                            f"measured {a:.2f}x. {how}."}, predicted)
    if frac["transfer"] >= 0.15:
        return ({"bound": "transfer", "cause": "transfer",
                 "summary": f"transfer-bound: {100 * frac['transfer']:.0f}% of each step copies to the device; "
                            "pin_memory=True with non_blocking=True"}, predicted)
    if frac["compute"] >= 0.5:
        return ({"bound": "compute", "cause": "GPU compute" if on_gpu else "compute",
                 "summary": f"compute-bound: {100 * frac['compute']:.0f}% of each step is compute; data is not the "
                            f"problem (synthetic data: {a:.2f}x). Faster model code: mixed precision, "
                            "torch.compile, larger batches"}, predicted)
    return ({"bound": "host", "cause": "host overhead",
             "summary": f"host-bound: {100 * frac['host']:.0f}% of each step is neither loading nor compute "
                        "(Python, launches, syncs)"}, predicted)
