"""Trace -> per-step breakdown and a run's facts (perfcore.run/2, undecided). Pure functions on arrays and
DataFrames: no I/O, no plots, no torch. The verdict is verdict.decide's and the advice advice.advise's, each
decided once by the command on all of its evidence.

The one definition: within a step's wall interval every instant gets exactly
one label, by precedence compute > comm > transfer > load, and `host` for instants no labelled
interval covers. So the five labels sum to the step's wall time exactly, for every step.
perfcore's own work on the training thread (settling, progress files, checkpoints) is no instant of
the step: a step's wall time is its boundary span less the own-work intervals inside it.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from perfcore._lazy import lazy_module
from perfcore.analysis.columns import sorted_unique
from perfcore.analysis.labels import LABELS  # the one list, in a leaf; named here too, as before

pd = lazy_module("pandas")  # imported on first use: settling needs it, recording does not

__all__ = [
    "LABELS",
    "OWN",
    "PRECEDENCE",
    "step_columns",
    "CPU_PRECEDENCE",
    "attribute",
    "step_table",
    "summarize",
    "measured_mask",
    "kernel_category",
    "SCHEMA",
]

SCHEMA = "perfcore.run/2"
PRECEDENCE = ("compute", "comm", "transfer", "load")  # highest first; host is what is left
# Without a GPU the labels come from host phases, and a collective is a wait *inside* a compute
# phase (DDP's all-reduce ends backward): the inner, more specific phase wins, so comm > compute.
CPU_PRECEDENCE = ("comm", "compute", "transfer", "load")
_INDEX = {label: i for i, label in enumerate(LABELS)}
OWN = "perfcore"  # the key of perfcore's own-work intervals: above every label, and out of the step
OWN_PHASE_ID = 15  # the span phase id they are recorded under (a built-in id, below the custom ones)

Intervals = Mapping[str, tuple[np.ndarray, np.ndarray]]


def attribute(
    step_start_ns: np.ndarray, step_end_ns: np.ndarray, intervals: Intervals, precedence: tuple[str, ...] = PRECEDENCE
) -> np.ndarray:
    """ns per (step, label): an int64 array of shape (steps, 5) in LABELS order, and a sixth
    column, perfcore's own work, when `intervals` holds OWN.

    Steps are [start, end) and must not overlap. `intervals` maps a label (not host) or OWN to
    (start_ns, end_ns) arrays; intervals may overlap each other, cross step boundaries, or lie
    outside every step. An instant OWN covers counts in no label: the five sum to the step's span
    less its own work. Vectorised: one sort of all boundaries, no loop over intervals.
    """
    s0 = np.asarray(step_start_ns, dtype=np.int64)
    s1 = np.asarray(step_end_ns, dtype=np.int64)
    n = len(s0)
    width = len(LABELS) + (OWN in intervals)
    if n == 0:
        return np.zeros((0, width), dtype=np.int64)
    if np.any(s1 < s0) or np.any(s0[1:] < s1[:-1]):
        raise ValueError("steps must be ordered, non-overlapping [start, end) intervals")
    if sorted(precedence) != sorted(PRECEDENCE):
        raise ValueError(f"precedence must order {PRECEDENCE}")
    for label in intervals:
        if label not in PRECEDENCE and label != OWN:
            raise ValueError(f"unknown label {label!r}; intervals take one of {PRECEDENCE} or {OWN!r}")
    clean = {}
    for label, (a, b) in intervals.items():
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        keep = b > a
        clean[label] = (a[keep], b[keep])
    points = sorted_unique(np.concatenate([s0, s1] + [x for ab in clean.values() for x in ab]))
    seg_start, seg_len = points[:-1], np.diff(points)
    label_of = np.full(len(seg_start), _INDEX["host"], dtype=np.int64)
    index = {**_INDEX, OWN: len(LABELS)}
    for label in reversed((OWN,) + tuple(precedence)):  # lowest precedence first, so higher ones overwrite
        if label not in clean or len(clean[label][0]) == 0:
            continue
        a, b = clean[label]
        delta = np.bincount(np.searchsorted(points, a), minlength=len(points)) - np.bincount(
            np.searchsorted(points, b), minlength=len(points)
        )
        covered = np.cumsum(delta)[:-1] > 0
        label_of[covered] = index[label]
    k = np.searchsorted(s0, seg_start, side="right") - 1
    inside = k >= 0
    inside[inside] = seg_start[inside] < s1[k[inside]]
    # Integer accumulation: sums stay exact, so the identity holds to the nanosecond.
    out = np.zeros(n * width, dtype=np.int64)
    np.add.at(out, k[inside] * width + label_of[inside], seg_len[inside])
    return out.reshape(n, width)


def step_columns(
    step_start_ns: np.ndarray,
    step_end_ns: np.ndarray,
    intervals: Intervals,
    warmup: int = 0,
    first_step: int = 0,
    precedence: tuple[str, ...] = PRECEDENCE,
) -> dict[str, np.ndarray]:
    """step_table's ns columns as plain arrays (step, warmup, start_ns, wall_ns, perfcore_ns,
    <label>_ns): what settling in the training process keeps, without pandas."""
    ns = attribute(step_start_ns, step_end_ns, {OWN: ((), ()), **intervals}, precedence)
    s0 = np.asarray(step_start_ns, dtype=np.int64)
    s1 = np.asarray(step_end_ns, dtype=np.int64)
    steps = np.arange(first_step, first_step + len(s0))
    own = ns[:, len(LABELS)]
    cols = {"step": steps, "warmup": steps < warmup, "start_ns": s0, "wall_ns": s1 - s0 - own, "perfcore_ns": own}
    for i, label in enumerate(LABELS):
        cols[f"{label}_ns"] = ns[:, i]
    return cols


def step_table(
    step_start_ns: np.ndarray,
    step_end_ns: np.ndarray,
    intervals: Intervals,
    warmup: int = 0,
    first_step: int = 0,
    precedence: tuple[str, ...] = PRECEDENCE,
) -> pd.DataFrame:
    """One row per step: step, warmup, wall_ms and <label>_ms (the five sum to wall_ms), and
    perfcore_ms, perfcore's own work inside the step's span, which wall_ms leaves out."""
    df = pd.DataFrame(step_columns(step_start_ns, step_end_ns, intervals, warmup, first_step, precedence))
    df["wall_ms"] = df["wall_ns"] / 1e6
    for label in LABELS:
        df[f"{label}_ms"] = df[f"{label}_ns"] / 1e6
    df["perfcore_ms"] = df["perfcore_ns"] / 1e6
    return df


def summarize(
    steps: pd.DataFrame,
    *,
    on_gpu: bool,
    backend: str,
    device: str,
    evidence: Mapping[str, Any] | None = None,
    kernels: list[dict] | None = None,
    memcpy: dict | None = None,
    overhead: dict | None = None,
) -> dict[str, Any]:
    """A run's facts from a step_table (warm-up rows are reported apart), undecided: the command that has
    all of the evidence decides once (advice.advise_run)."""
    from perfcore.analysis.uncertainty import robust_breakdown

    # Evaluation passes are not training steps: out of the step statistics, the breakdown and the
    # verdict, and reported as a finding of their own.
    is_eval = steps["evaluation"].to_numpy(dtype=bool) if "evaluation" in steps else np.zeros(len(steps), dtype=bool)
    is_warm = steps["warmup"].to_numpy(dtype=bool)
    # Rows chosen by mask, each table once: a row selection copies every column, and at 1M steps
    # each whole-table copy was ~100 MB in the process writing the part.
    evaluation = None
    if is_eval.any():
        evaluation = evaluation_finding(steps[is_eval], steps.loc[~is_eval & ~is_warm, ["wall_ns"]])
    measured = rows(steps, ~is_eval & ~is_warm)
    warm = rows(steps, ~is_eval & is_warm)
    wall = _ms(measured, "wall").to_numpy()
    mean_ms = {lb: float(_ms(measured, lb).mean()) if len(measured) else 0.0 for lb in LABELS}
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
        "warmup_step_time_ms": float(_ms(warm, "wall").mean()) if len(warm) else None,
        "breakdown_ms": mean_ms,
        "breakdown_fraction": fraction,
        "kernels": kernels or [],
        "memcpy": memcpy or None,
        "backend": backend,
        "device": device,
        "overhead": overhead or None,
        "advice_facts": dict(evidence or {}),  # what the advice is keyed to, so it can be given again
    }
    robust = robust_breakdown(measured) if len(measured) else None
    if robust:
        doc["breakdown_robust"] = robust
        doc["step_time_ms"]["robust"] = robust["step_ms"]
        doc["step_time_ms"]["robust_band"] = robust["step_ms_band"]
        if robust["step_sem_ms"] is not None:
            doc["step_time_ms"]["sem"] = robust["step_sem_ms"]
    if evaluation:
        doc["evaluation"] = evaluation
    return doc


def _ms(table: pd.DataFrame, col: str) -> pd.Series:
    """A column in ms: the table's, or its ns column made into one (a long run's summary is handed the
    ns columns alone: the ms ones are made one at a time, as the steps table makes them)."""
    return table[f"{col}_ms"] if f"{col}_ms" in table else table[f"{col}_ns"] / 1e6


def measured_mask(steps: pd.DataFrame) -> np.ndarray:
    """The rows of measured training steps: neither warm-up nor evaluation (a table without such a column
    has no such rows)."""
    keep = np.ones(len(steps), dtype=bool)
    for col in ("warmup", "evaluation"):
        if col in steps:
            keep &= ~steps[col].to_numpy(dtype=bool)
    return keep


def rows(table: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
    """The rows a mask selects: a slice (no copy) where they are one run of consecutive rows, as the
    measured steps after the warm-up are."""
    hit = np.flatnonzero(mask)
    if not len(hit):
        return table.iloc[0:0]
    if hit[-1] - hit[0] + 1 == len(hit):
        return table.iloc[hit[0] : hit[-1] + 1]
    return table[mask]


def evaluation_finding(evaluation: pd.DataFrame, training: pd.DataFrame) -> dict[str, Any] | None:
    """Evaluation rows (passes between training steps) summed apart: passes, cost per pass, and their
    share of the wall time of training and evaluation together. None without an evaluation row."""
    if not len(evaluation):
        return None
    ev_ns = float(evaluation["wall_ns"].sum())
    tr_ns = float(training["wall_ns"].sum())
    n = len(evaluation)
    share = ev_ns / (ev_ns + tr_ns) if ev_ns + tr_ns > 0 else 0.0
    per = ev_ns / n / 1e6
    walls = evaluation["wall_ns"].to_numpy(dtype=float) / 1e6
    return {
        "passes": n,
        "min_ms_per_pass": float(walls.min()),
        "max_ms_per_pass": float(walls.max()),
        "rows": n,
        "apart": True,
        "total_ms": ev_ns / 1e6,
        "rows_ms": ev_ns / 1e6,
        "ms_per_pass": per,
        "share_of_wall": share,
    }


# Kernel categories, matched on the demangled name, first match wins (order matters: NCCL's
# kernels contain "reduce", attention kernels contain "gemm").
_CATEGORIES = (
    ("nccl", ("nccl",)),
    ("attention", ("flash", "attention", "fmha", "sdpa", "mha")),
    (
        "gemm/conv",
        (
            "gemm",
            "conv",
            "cutlass",
            "cublas",
            "xmma",
            "wgrad",
            "dgrad",
            "implicit_",
            "winograd",
            "sm90_",
            "sm80_",
            "ampere_",
            "volta_",
            "turing_",
        ),
    ),
    ("norm/softmax/reduce", ("norm", "softmax", "reduce", "welford", "layer_norm", "batch_norm")),
    ("elementwise", ("elementwise", "vectorized", "unrolled", "pointwise", "triton_poi", "copy_kernel", "fill")),
)


def kernel_category(name: str) -> str:
    low = name.lower()
    for cat, keys in _CATEGORIES:
        if any(k in low for k in keys):
            return cat
    return "other"
