"""Trace -> per-step breakdown, verdict and advice. Pure functions on arrays and DataFrames: no I/O,
no plots, no torch.

The one definition (shared/DESIGN.md): within a step's wall interval every instant gets exactly
one label, by precedence compute > comm > transfer > load, and `host` for instants no labelled
interval covers. So the five labels sum to the step's wall time exactly, for every step.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd

__all__ = ["LABELS", "PRECEDENCE", "CPU_PRECEDENCE", "attribute", "step_table", "verdict", "recommendations", "summarize",
           "kernel_category", "SCHEMA"]

SCHEMA = "perfcore.run/1"
LABELS = ("load", "transfer", "compute", "comm", "host")
PRECEDENCE = ("compute", "comm", "transfer", "load")  # highest first; host is what is left
# Without a GPU the labels come from host phases, and a collective is a wait *inside* a compute
# phase (DDP's all-reduce ends backward): the inner, more specific phase wins, so comm > compute.
CPU_PRECEDENCE = ("comm", "compute", "transfer", "load")
_INDEX = {label: i for i, label in enumerate(LABELS)}

Intervals = Mapping[str, tuple[np.ndarray, np.ndarray]]


def attribute(step_start_ns: np.ndarray, step_end_ns: np.ndarray, intervals: Intervals,
              precedence: tuple[str, ...] = PRECEDENCE) -> np.ndarray:
    """ns per (step, label): an int64 array of shape (steps, 5) in LABELS order.

    Steps are [start, end) and must not overlap. `intervals` maps a label (not host) to
    (start_ns, end_ns) arrays; intervals may overlap each other, cross step boundaries, or lie
    outside every step. Vectorised: one sort of all boundaries, no loop over intervals.
    """
    s0 = np.asarray(step_start_ns, dtype=np.int64)
    s1 = np.asarray(step_end_ns, dtype=np.int64)
    n = len(s0)
    if n == 0:
        return np.zeros((0, len(LABELS)), dtype=np.int64)
    if np.any(s1 < s0) or np.any(s0[1:] < s1[:-1]):
        raise ValueError("steps must be ordered, non-overlapping [start, end) intervals")
    if sorted(precedence) != sorted(PRECEDENCE):
        raise ValueError(f"precedence must order {PRECEDENCE}")
    for label in intervals:
        if label not in PRECEDENCE:
            raise ValueError(f"unknown label {label!r}; intervals take one of {PRECEDENCE}")
    clean = {}
    for label, (a, b) in intervals.items():
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        keep = b > a
        clean[label] = (a[keep], b[keep])
    points = np.unique(np.concatenate([s0, s1] + [x for ab in clean.values() for x in ab]))
    seg_start, seg_len = points[:-1], np.diff(points)
    label_of = np.full(len(seg_start), _INDEX["host"], dtype=np.int64)
    for label in reversed(precedence):  # lowest precedence first, so higher ones overwrite
        if label not in clean or len(clean[label][0]) == 0:
            continue
        a, b = clean[label]
        delta = (np.bincount(np.searchsorted(points, a), minlength=len(points))
                 - np.bincount(np.searchsorted(points, b), minlength=len(points)))
        covered = np.cumsum(delta)[:-1] > 0
        label_of[covered] = _INDEX[label]
    k = np.searchsorted(s0, seg_start, side="right") - 1
    inside = k >= 0
    inside[inside] = seg_start[inside] < s1[k[inside]]
    # Integer accumulation: sums stay exact, so the identity holds to the nanosecond.
    out = np.zeros(n * len(LABELS), dtype=np.int64)
    np.add.at(out, k[inside] * len(LABELS) + label_of[inside], seg_len[inside])
    return out.reshape(n, len(LABELS))


def step_table(step_start_ns: np.ndarray, step_end_ns: np.ndarray, intervals: Intervals, warmup: int = 0,
               first_step: int = 0, precedence: tuple[str, ...] = PRECEDENCE) -> pd.DataFrame:
    """One row per step: step, warmup, wall_ms and <label>_ms (the five sum to wall_ms)."""
    ns = attribute(step_start_ns, step_end_ns, intervals, precedence)
    s0 = np.asarray(step_start_ns, dtype=np.int64)
    s1 = np.asarray(step_end_ns, dtype=np.int64)
    steps = np.arange(first_step, first_step + len(s0))
    df = pd.DataFrame({"step": steps, "warmup": steps < warmup, "start_ns": s0, "wall_ns": s1 - s0})
    for i, label in enumerate(LABELS):
        df[f"{label}_ns"] = ns[:, i]
    df["wall_ms"] = df["wall_ns"] / 1e6
    for label in LABELS:
        df[f"{label}_ms"] = df[f"{label}_ns"] / 1e6
    return df


_BOUND_TEXT = {
    "load": ("input-bound", "the {dev} waits for data"),
    "transfer": ("transfer-bound", "goes to host-to-device copies"),
    "compute": ("compute-bound", "is {dev} compute"),
    "comm": ("communication-bound", "goes to collective communication"),
    "host": ("host-bound", "the {dev} is idle while Python, launches or syncs run"),
}


def verdict(fraction: Mapping[str, float], on_gpu: bool) -> dict[str, str]:
    """The dominant label and one sentence: 'input-bound: 63% of each step the GPU waits for data'."""
    bound = max(LABELS, key=lambda lb: fraction.get(lb, 0.0))
    name, text = _BOUND_TEXT[bound]
    dev = "GPU" if on_gpu else "loop"
    if not on_gpu and bound == "host":
        text = "is spent outside the timed phases (Python, logging, the optimizer step if not timed)"
    if not on_gpu and bound == "compute":
        text = "is compute (forward, backward, optimizer)"
    pct = round(100 * fraction.get(bound, 0.0))
    return {"bound": bound, "summary": f"{name}: {pct}% of each step {text.format(dev=dev)}"}


def recommendations(fraction: Mapping[str, float], mean_ms: Mapping[str, float], on_gpu: bool,
                    evidence: Mapping[str, Any] | None = None) -> list[dict[str, str]]:
    """Advice keyed to evidence, each with the evidence and, where there is one, the command that tests it."""
    ev = dict(evidence or {})
    recs: list[dict[str, str]] = []

    def add(rid: str, text: str, because: str, test: str | None = None) -> None:
        r = {"id": rid, "text": text, "evidence": because}
        if test:
            r["test"] = test
        recs.append(r)

    def share(lb: str) -> str:
        return f"{lb} is {mean_ms.get(lb, 0.0):.1f} ms ({100 * fraction.get(lb, 0.0):.0f}%) per step"

    pageable = ev.get("pageable_h2d_bytes_per_step", 0)
    if pageable:
        ms_pg = ev.get("pageable_h2d_ms_per_step", 0.0)
        saving = (f" Expected saving: up to {ms_pg:.2f} ms per step, the time those copies take now, once they "
                  "overlap compute." if ms_pg else "")
        add("pin_memory", "Use DataLoader(pin_memory=True) and .to(device, non_blocking=True): pageable copies are "
            "staged through a bounce buffer and block the host." + saving,
            f"{pageable / 2**20:.1f} MiB per step copied host-to-device from pageable memory"
            + (f", {ms_pg:.2f} ms per step" if ms_pg else ""),
            "perfcore transfer --batch-shape ...")
    if fraction.get("load", 0) >= 0.20:
        cores, workers, needed = ev.get("cpu_count"), ev.get("num_workers"), ev.get("workers_needed")
        because = share("load")
        if needed is not None and cores and needed > cores:
            text = (f"Each batch costs more CPU than {cores} cores can supply at this step rate (about {needed} "
                    "workers would be needed): make a batch cheaper (a faster decoder, lighter augmentation, "
                    "pre-processed or cached data) rather than adding workers.")
        elif needed is not None:
            text = (f"Use DataLoader(num_workers={max(needed, 1)}, persistent_workers=True) (now {workers}); "
                    f"workers take {ev.get('fetch_ms', 0):.1f} ms per batch and the loop needs one every "
                    f"{ev.get('loop_ms', 0):.1f} ms.")
        else:
            text = ("Feed the loop faster: more DataLoader workers, persistent_workers=True, a cheaper "
                    "decode/augment, or data already in memory.")
        add("more_workers", text, because, "perfcore diagnose (synthetic data shows the step time without loading)")
    if fraction.get("transfer", 0) >= 0.15 and not pageable:
        add("overlap_copies", "Overlap copies with compute: pin_memory=True, non_blocking=True, and copy the next "
            "batch while this one computes (a CUDA stream prefetcher).", share("transfer"))
    if on_gpu and fraction.get("host", 0) >= 0.30:
        add("launch_overhead", "The GPU idles between kernels: capture the step with CUDA Graphs or torch.compile"
            "(mode='reduce-overhead'), remove .item()/.cpu() syncs from the loop, and raise the batch size.",
            share("host"), "perfcore graph")
    if not on_gpu and fraction.get("host", 0) >= 0.30:
        add("untimed_host_work", "Much of the step lies outside load/transfer/compute: time it with "
            "timer.phase('name') to see what it is (logging, metrics, checkpointing, Python overhead).",
            share("host"))
    if fraction.get("comm", 0) >= 0.20:
        add("overlap_comm", "Overlap communication with backward (DDP bucket_cap_mb, gradient accumulation with "
            "no_sync), or cut what is sent (bf16 gradients).", share("comm"))
    if fraction.get("compute", 0) >= 0.60:
        add("faster_compute", ("The step is bound by GPU compute: mixed precision (bf16 autocast), torch.compile, "
             "channels_last for convnets, fused optimizers.") if on_gpu else
            ("The step is bound by compute: on a GPU it would move there; on CPU, torch.compile and "
             "torch.set_num_threads matter."), share("compute"))
    return recs


def summarize(steps: pd.DataFrame, *, on_gpu: bool, backend: str, device: str,
              evidence: Mapping[str, Any] | None = None, kernels: list[dict] | None = None,
              memcpy: dict | None = None, overhead: dict | None = None) -> dict[str, Any]:
    """The perfcore.run/1 document from a step_table (warm-up rows are reported apart)."""
    measured = steps[~steps["warmup"]]
    warm = steps[steps["warmup"]]
    if len(measured) == 0:
        measured = steps.iloc[0:0]
    wall = measured["wall_ms"].to_numpy()
    mean_ms = {lb: float(measured[f"{lb}_ms"].mean()) if len(measured) else 0.0 for lb in LABELS}
    total = float(measured["wall_ns"].sum())
    fraction = {lb: (float(measured[f"{lb}_ns"].sum()) / total if total else 0.0) for lb in LABELS}
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "steps": int(len(measured)),
        "warmup_steps": int(len(warm)),
        "step_time_ms": {
            "mean": float(wall.mean()) if len(wall) else 0.0,
            "p50": float(np.percentile(wall, 50)) if len(wall) else 0.0,
            "p90": float(np.percentile(wall, 90)) if len(wall) else 0.0,
        },
        "warmup_step_time_ms": float(warm["wall_ms"].mean()) if len(warm) else None,
        "breakdown_ms": mean_ms,
        "breakdown_fraction": fraction,
        "verdict": verdict(fraction, on_gpu) if len(measured) else {"bound": "host", "summary": "no steps measured"},
        "recommendations": recommendations(fraction, mean_ms, on_gpu, evidence) if len(measured) else [],
        "kernels": kernels or [],
        "memcpy": memcpy or {},
        "backend": backend,
        "device": device,
        "overhead": overhead or {},
    }
    return doc


# Kernel categories, matched on the demangled name, first match wins (order matters: NCCL's
# kernels contain "reduce", attention kernels contain "gemm").
_CATEGORIES = (
    ("nccl", ("nccl",)),
    ("attention", ("flash", "attention", "fmha", "sdpa", "mha")),
    ("gemm/conv", ("gemm", "conv", "cutlass", "cublas", "xmma", "wgrad", "dgrad", "implicit_", "winograd", "sm90_",
                   "sm80_", "ampere_", "volta_", "turing_")),
    ("norm/softmax/reduce", ("norm", "softmax", "reduce", "welford", "layer_norm", "batch_norm")),
    ("elementwise", ("elementwise", "vectorized", "unrolled", "pointwise", "triton_poi", "copy_kernel", "fill")),
)


def kernel_category(name: str) -> str:
    low = name.lower()
    for cat, keys in _CATEGORIES:
        if any(k in low for k in keys):
            return cat
    return "other"
