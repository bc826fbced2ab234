"""Processes that train side by side (Hogwild: torch.multiprocessing workers, each stepping its own optimizer
on shared parameters) merged into one run: every trainer's rows in one table, the run's figures over all of
them (pure functions on the parts' tables; report.words.runs says them).

They are not the ranks of a distributed job: no collective makes one wait for another, so there is no
straggler and no step index to align; a row is one trainer's step, and the run's steps are their sum.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from perfcore.analysis.attribution import measured_mask, summarize
from perfcore.analysis.codec import to_doc
from perfcore.analysis.labels import LABELS
from perfcore.analysis.process_part import Part
from perfcore.analysis.run_parts import Kernel, Memcpy
from perfcore.analysis.starvation import starvation
from perfcore.analysis.store import memcpy_document

__all__ = ["merge_trainers", "evaluation_apart", "SUMMARY_KEYS"]

# The fields of a run document that summarize() derives from the rows: recomputed over every trainer's.
SUMMARY_KEYS = (
    "steps",
    "warmup_steps",
    "step_time_ms",
    "warmup_step_time_ms",
    "breakdown_ms",
    "breakdown_fraction",
    "breakdown_robust",
    "evaluation",
)


def _start_ns(part: Part) -> np.ndarray | None:
    """The part's step starts, one per row of its table (the trace's arrays), or None when they do not match."""
    start = part.raw.get("step_start_ns")
    if start is None or len(start) != len(part.table):
        return None
    return np.asarray(start, dtype=np.int64)


def _table(parts: list[Part]) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Every trainer's rows, in the order they started (one host, one clock) when every part kept its
    step starts, else part after part; `pid` says whose row it is, `step` numbers the merged rows."""
    frames, starts, walls = [], [], []
    for p in parts:
        t = p.table.copy()
        t.insert(1, "pid", p.pid or 0)
        frames.append(t)
        s = _start_ns(p)
        starts.append(s)
        w = p.raw.get("step_wall_ns")
        walls.append(np.asarray(w, dtype=np.int64) if s is not None and w is not None and len(w) == len(s) else None)
    table = pd.concat(frames, ignore_index=True)
    for flag in ("warmup", "evaluation"):  # a part without the column has no such rows (NaN would read as True)
        if flag in table:
            table[flag] = table[flag].astype("boolean").fillna(False).astype(bool)
    if "mem_bytes" in table:
        table["mem_bytes"] = table["mem_bytes"].fillna(-1).astype(np.int64)  # -1: not sampled, as a part says it
    raw: dict[str, np.ndarray] = {}
    if all(s is not None for s in starts) and all(w is not None for w in walls):
        s, w = np.concatenate(starts), np.concatenate(walls)
        order = np.argsort(s, kind="stable")
        table = table.iloc[order].reset_index(drop=True)
        raw = {"step_start_ns": s[order], "step_wall_ns": w[order]}
    table["step"] = np.arange(len(table), dtype=np.int64)
    return table, raw


def _kernels(parts: list[Part]) -> list[dict[str, Any]]:
    """Each kernel's calls and time summed over the trainers, as many as the longest part's list."""
    by: dict[str, Kernel] = {}
    for p in parts:
        for k in p.kernels:
            a = by.get(k.name) or dataclasses.replace(k, count=0, total_ms=0.0)
            by[k.name] = dataclasses.replace(a, count=a.count + k.count, total_ms=a.total_ms + k.total_ms)
    merged = [dataclasses.replace(a, mean_us=a.total_ms * 1e3 / a.count if a.count else 0.0) for a in by.values()]
    n = max((len(p.kernels) for p in parts), default=0)
    return [to_doc(a) for a in sorted(merged, key=lambda a: -a.total_ms)[:n]]


def _memcpy(parts: list[Part]) -> dict[str, Any]:
    by: dict[str, dict[str, float]] = {}
    for p in parts:
        for direction, v in p.memcpy.by_direction.items():
            a = by.setdefault(direction, {"count": 0, "bytes": 0, "ms": 0.0, "pageable_bytes": 0, "pageable_ms": 0.0})
            for key in a:
                a[key] += getattr(v, key) or 0
    return memcpy_document(by) if by else {}


def _starvation(table: pd.DataFrame) -> dict[str, Any]:
    """Loader starvation over every trainer's steps at one threshold; the longest run of starved steps
    in a row is one process's (the others' steps between them are not its own)."""
    whole = starvation(table)
    pids = table["pid"].to_numpy()
    runs = [starvation(table[pids == pid], whole.threshold_ms) for pid in np.unique(pids)]
    longest = max(runs, key=lambda s: s.longest_run)
    return {
        **dataclasses.asdict(whole),
        "longest_run": longest.longest_run,
        "longest_run_first_step": longest.longest_run_first_step,
    }


def _loaders(parts: list[Part]) -> list[dict[str, Any]]:
    """Each trainer made its own DataLoader at the same place: one entry per place, role and dataset,
    with every trainer's batches and loaders made (its settings are the code's, the same in each)."""
    merged: dict[tuple, dict[str, Any]] = {}
    for p in parts:
        for ld in p.loaders:
            key = (ld.get("site"), ld.get("role"), ld.get("dataset"))
            if key not in merged:
                merged[key] = {**ld, "worker_startup_ms": list(ld.get("worker_startup_ms") or [])}
                continue
            m = merged[key]
            for k in ("batches", "made"):
                if isinstance(ld.get(k), int) and isinstance(m.get(k), int):
                    m[k] += ld[k]
            m["worker_startup_ms"] += list(ld.get("worker_startup_ms") or [])
    return list(merged.values())


def merge_trainers(parts: list[Part]) -> tuple[dict[str, Any], pd.DataFrame, dict[str, np.ndarray]]:
    """parts: the processes that trained, the first one's (by pid) the base. Returns (the fields the merged
    document replaces, the merged steps table, its step starts and walls aligned with its rows, or {} when
    a part did not keep them). The verdict is left to the caller."""
    parts = sorted(parts, key=lambda p: p.pid or 0)
    table, raw = _table(parts)
    base = parts[0]
    ns = [f"{c}_ns" for c in ("wall", *LABELS)]
    for c in ns:  # summarize() sums integer ns, as the processes did; the parts' tables keep ms
        table[c] = np.rint(table[c.replace("_ns", "_ms")].to_numpy(dtype=float) * 1e6).astype(np.int64)
    summary = summarize(table, on_gpu=base.device != "cpu", backend=base.backend, device=base.device)
    table = table.drop(columns=ns)
    fields: dict[str, Any] = {k: summary[k] for k in SUMMARY_KEYS if k in summary}
    training = measured_mask(table)
    for key, suffix in (("compute_split_ms", "_ms"), ("compute_split_gpu_ms", "_gpu_ms")):
        cols = [ph for ph in ("forward", "backward", "optimizer") if f"{ph}{suffix}" in table]
        if getattr(base, key) and training.any():
            fields[key] = {ph: float(table.loc[training, f"{ph}{suffix}"].mean()) for ph in cols}
    if any(p.kernels for p in parts):
        fields["kernels"] = _kernels(parts)
    if any(p.memcpy != Memcpy() for p in parts):  # as a document saying anything of copies
        fields["memcpy"] = _memcpy(parts)
    if any(p.loaders for p in parts):
        fields["loaders"] = _loaders(parts)
    if any(p.starvation for p in parts):
        fields["starvation"] = _starvation(table)
    fields["processes"] = {"training": [{"pid": p.pid, **p.figures(), "warmup_steps": p.warmup_steps} for p in parts]}
    return fields, table, raw


def evaluation_apart(evaluating: list[Part], trainers: list[pd.DataFrame]) -> dict[str, Any] | None:
    """The passes of processes that only evaluated (their documents' evaluation, else one pass of all their
    rows) as the run's evaluation finding: its share is of the wall time of training, which ran side by side
    in the trainers (the longest trainer's measured steps), and evaluation. None without such a process."""
    passes, total_ms = 0, 0.0
    for p in evaluating:
        ms = p.evaluation.get("total_ms")
        if not isinstance(ms, (int, float)) or ms <= 0:
            ms = float(p.steps) * float(p.step_time_ms.get("mean") or 0.0)
        n = p.evaluation.get("passes")
        passes += n if isinstance(n, int) and n > 0 else 1
        total_ms += float(ms)
    if not passes or total_ms <= 0:
        return None
    training_ms = 0.0
    for t in trainers:
        training_ms = max(training_ms, float(t["wall_ms"].to_numpy(dtype=float)[measured_mask(t)].sum()))
    return {
        "passes": passes,
        "total_ms": total_ms,
        "ms_per_pass": total_ms / passes,
        "share_of_wall": total_ms / (total_ms + training_ms),
        "apart": True,
        "processes": [p.pid for p in evaluating],
    }
