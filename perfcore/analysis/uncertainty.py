"""Every share with its uncertainty, from the per-step samples: a trimmed estimate (the slowest steps
whose extra time is not a data wait set apart, at most TRIM_AT_MOST of them) and a block bootstrap
interval. A preempted step on a busy machine piles its wait into whatever label was running; set
apart and reported on its own, it no longer moves the verdict. A step that is slow because it waits
for data (an epoch's workers starting, a burst of batches) is the loop's own cost and stays in.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from perfcore._lazy import lazy_module
from perfcore.analysis.labels import LABELS

pd = lazy_module("pandas")  # the live verdict in the training process imports this module, never pandas

__all__ = [
    "robust_breakdown",
    "outlier_mask",
    "OUTLIER_MADS",
    "OUTLIER_MIN_RATIO",
    "TRIM_AT_MOST",
    "LEVEL",
    "RESAMPLES",
    "steps_to_settle",
]

# A step is an outlier when it is this many robust standard deviations (1.4826 MAD) above the
# median step, and at least OUTLIER_MIN_RATIO times it (a steady loop's 1% jitter is no outlier).
OUTLIER_MADS = 5.0
OUTLIER_MIN_RATIO = 1.5
# Never set apart more than this share of the steps: beyond it slow steps are the loop's shape.
TRIM_AT_MOST = 0.10
# An outlier whose extra time is at least half a data wait is the loop's own (kept).
LOAD_EXPLAINS = 0.5
LEVEL = 0.95
RESAMPLES = 1000
MAX_BLOCKS = 200  # the bootstrap resamples blocks of consecutive steps: bursts stay together


def _ns(table: pd.DataFrame, col: str) -> np.ndarray:
    if f"{col}_ns" in table:
        return table[f"{col}_ns"].to_numpy(dtype=np.float64)
    return table[f"{col}_ms"].to_numpy(dtype=np.float64) * 1e6


def outlier_mask(wall: np.ndarray, load: np.ndarray) -> np.ndarray:
    """The steps robust_breakdown sets apart as outliers (True), from their wall and load times in any one
    unit: every figure a report quotes of a step (the table, the verdict, the compute split) is of the
    steps this leaves."""
    wall, load = np.asarray(wall, dtype=np.float64), np.asarray(load, dtype=np.float64)
    # Lean on memory: a 1M-step run's finish runs this on whole columns, so one temporary of the length
    # of the steps at a time, and the load rule only on the candidates.
    n = len(wall)
    out = np.zeros(n, dtype=bool)
    if n < 5:
        return out
    med = float(np.median(wall))
    dev = np.subtract(wall, med)
    np.abs(dev, out=dev)
    mad = 1.4826 * float(np.median(dev, overwrite_input=True))
    del dev
    thr = max(med + OUTLIER_MADS * mad, OUTLIER_MIN_RATIO * med)
    idx = np.flatnonzero(wall > thr)
    if len(idx):
        med_load = float(np.median(load))
        idx = idx[(load[idx] - med_load) < LOAD_EXPLAINS * (wall[idx] - med)]
    cap = int(np.floor(TRIM_AT_MOST * n))
    if len(idx) > cap:
        idx = idx[np.argsort(-wall[idx], kind="stable")[:cap]]
    out[idx] = True
    return out


def _blocks(n: int) -> np.ndarray:
    """Block id per step: consecutive steps in at most MAX_BLOCKS blocks of equal length."""
    size = max(1, -(-n // MAX_BLOCKS))
    return np.arange(n) // size


def steps_to_settle(steps: int, share: float, band: tuple[float, float], tier: float) -> int | None:
    """Steps for the interval to clear `tier` (it narrows as 1/sqrt(steps)), or None when the
    estimate sits on the tier itself."""
    half = (band[1] - band[0]) / 2
    d = abs(share - tier)
    if d < 1e-4 or half <= 0:
        return None
    return int(np.ceil(steps * (half / d) ** 2 - 1e-9))


def robust_breakdown(
    table: pd.DataFrame, *, step_col: str = "step", resamples: int = RESAMPLES, level: float = LEVEL, seed: int = 0
) -> dict[str, Any] | None:
    """The trimmed per-label ms and shares of measured steps (no warm-up or evaluation rows: the caller
    selects), each with a `level` block bootstrap interval, and the outlier steps apart with what they
    contained: figures (report.terminal says them). None without steps."""
    n = len(table)
    if n == 0:
        return None
    wall = _ns(table, "wall")
    parts = {lb: _ns(table, lb) for lb in LABELS if f"{lb}_ns" in table or f"{lb}_ms" in table}
    out = outlier_mask(wall, parts.get("load", np.zeros(n)))
    keep = ~out
    k = int(keep.sum())
    w_k = wall[keep]
    blocks = _blocks(k)
    nb = int(blocks[-1]) + 1 if k else 0
    wall_b = np.bincount(blocks, weights=w_k, minlength=nb)
    cnt_b = np.bincount(blocks, minlength=nb).astype(np.float64)
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, nb, size=(resamples, nb)) if nb > 1 else np.zeros((resamples, max(nb, 1)), dtype=int)
    tail = (1 - level) / 2
    res_wall = wall_b[pick].sum(axis=1)
    res_cnt = cnt_b[pick].sum(axis=1)
    step_rs = res_wall / np.maximum(res_cnt, 1) / 1e6
    total = float(w_k.sum())
    doc: dict[str, Any] = {
        "blocks": nb,  # of consecutive steps, the bootstrap's unit
        "level": level,
        "steps": n,
        "kept_steps": k,
        "step_ms": total / k / 1e6 if k else 0.0,
        "step_ms_band": [float(np.quantile(step_rs, tail)), float(np.quantile(step_rs, 1 - tail))],
        "step_sem_ms": float(np.std(w_k, ddof=1) / np.sqrt(k) / 1e6) if k > 1 else None,
        "ms": {},
        "ms_band": {},
        "share": {},
        "share_band": {},
    }
    for lb, v in parts.items():
        v_k = v[keep]
        lab_b = np.bincount(blocks, weights=v_k, minlength=nb)
        res_lab = lab_b[pick].sum(axis=1)
        share_rs = np.divide(res_lab, res_wall, out=np.zeros_like(res_lab), where=res_wall > 0)
        ms_rs = res_lab / np.maximum(res_cnt, 1) / 1e6
        doc["ms"][lb] = float(v_k.sum() / k / 1e6) if k else 0.0
        doc["share"][lb] = float(v_k.sum() / total) if total else 0.0
        doc["ms_band"][lb] = [float(np.quantile(ms_rs, tail)), float(np.quantile(ms_rs, 1 - tail))]
        doc["share_band"][lb] = [float(np.quantile(share_rs, tail)), float(np.quantile(share_rs, 1 - tail))]
    if out.any():
        steps = table[step_col].to_numpy()[out] if step_col in table else np.flatnonzero(out)
        o_wall = wall[out]
        o_ms = {lb: float(v[out].mean() / 1e6) for lb, v in parts.items()}
        extra = {lb: float((v[out] - np.median(v[keep] if k else v)).clip(min=0).sum()) for lb, v in parts.items()}
        ex_total = sum(extra.values())
        top = max(extra, key=extra.get) if ex_total > 0 else None
        doc["outliers"] = {
            "count": int(out.sum()),
            "steps": [int(s) for s in steps[:20]],
            "wall_ms": {
                "min": float(o_wall.min() / 1e6),
                "max": float(o_wall.max() / 1e6),
                "mean": float(o_wall.mean() / 1e6),
            },
            "ms_per_step": o_ms,
            "excess_share": {lb: (e / ex_total if ex_total else 0.0) for lb, e in extra.items()},
            "median_step_ms": float(np.median(wall) / 1e6),
            "excess_label": top,  # the label that held most of their extra time, or None
        }
    return doc
