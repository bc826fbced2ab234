"""Processes that train side by side (Hogwild: torch.multiprocessing workers, each stepping its own optimizer
on shared parameters) merged into one run: every trainer's rows in one table, the run's figures over all of
them (pure functions on the parts' tables; report.words.jobs says them).

They are not the ranks of a distributed job: no collective makes one wait for another, so there is no
straggler and no step index to align; a row is one trainer's step, and the run's steps are their sum.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from perfcore.analysis.attribution import summarize
from perfcore.analysis.labels import LABELS
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


def _start_ns(part: dict[str, Any]) -> np.ndarray | None:
    """The part's step starts, one per row of its table (the trace's arrays), or None when they do not match."""
    start = (part.get("raw") or {}).get("step_start_ns")
    if start is None or len(start) != len(part["steps"]):
        return None
    return np.asarray(start, dtype=np.int64)


def _table(parts: list[dict[str, Any]]) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Every trainer's rows, in the order they started (one host, one clock) when every part kept its
    step starts, else part after part; `pid` says whose row it is, `step` numbers the merged rows."""
    frames, starts, walls = [], [], []
    for p in parts:
        t = p["steps"].copy()
        t.insert(1, "pid", int(p["doc"].get("pid") or 0))
        frames.append(t)
        s = _start_ns(p)
        starts.append(s)
        raw = p.get("raw") or {}
        w = raw.get("step_wall_ns")
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


def _kernels(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by: dict[str, dict[str, Any]] = {}
    for d in docs:
        for k in d.get("kernels") or []:
            a = by.setdefault(k["name"], {**k, "count": 0, "total_ms": 0.0})
            a["count"] += int(k.get("count") or 0)
            a["total_ms"] += float(k.get("total_ms") or 0.0)
    for a in by.values():
        a["mean_us"] = a["total_ms"] * 1e3 / a["count"] if a["count"] else 0.0
    n = max((len(d.get("kernels") or []) for d in docs), default=0)
    return sorted(by.values(), key=lambda a: -a["total_ms"])[:n]


def _memcpy(docs: list[dict[str, Any]]) -> dict[str, Any]:
    by: dict[str, dict[str, float]] = {}
    for d in docs:
        for direction, v in ((d.get("memcpy") or {}).get("by_direction") or {}).items():
            a = by.setdefault(direction, {"count": 0, "bytes": 0, "ms": 0.0, "pageable_bytes": 0, "pageable_ms": 0.0})
            for key in a:
                a[key] += v.get(key) or 0
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


def _loaders(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each trainer made its own DataLoader at the same place: one entry per place, role and dataset,
    with every trainer's batches and loaders made (its settings are the code's, the same in each)."""
    merged: dict[tuple, dict[str, Any]] = {}
    for d in docs:
        for ld in d.get("loaders") or []:
            if not isinstance(ld, dict):
                continue
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


def _per_process(doc: dict[str, Any]) -> dict[str, Any]:
    return {
        "pid": doc.get("pid"),
        "steps": doc.get("steps", 0),
        "warmup_steps": doc.get("warmup_steps", 0),
        "step_time_ms": doc["step_time_ms"],
        "breakdown_ms": doc["breakdown_ms"],
        "breakdown_fraction": doc["breakdown_fraction"],
        "exit": (doc.get("exit") or {}).get("reason"),
    }


def merge_trainers(parts: list[dict[str, Any]]) -> tuple[dict[str, Any], pd.DataFrame, dict[str, np.ndarray]]:
    """parts: [{"doc", "steps", "raw"}] of the processes that trained, the first one's document the base.
    Returns (the fields the merged document replaces, the merged steps table, its step starts and walls
    aligned with its rows, or {} when a part did not keep them). The verdict is left to the caller."""
    parts = sorted(parts, key=lambda p: p["doc"].get("pid") or 0)
    docs = [p["doc"] for p in parts]
    table, raw = _table(parts)
    base = docs[0]
    ns = [f"{c}_ns" for c in ("wall", *LABELS)]
    for c in ns:  # summarize() sums integer ns, as the processes did; the parts' tables keep ms
        table[c] = np.rint(table[c.replace("_ns", "_ms")].to_numpy(dtype=float) * 1e6).astype(np.int64)
    summary = summarize(
        table,
        on_gpu=base.get("device", "cpu") != "cpu",
        backend=str(base.get("backend", "none")),
        device=str(base.get("device", "cpu")),
    )
    table = table.drop(columns=ns)
    fields: dict[str, Any] = {k: summary[k] for k in SUMMARY_KEYS if k in summary}
    training = ~table["warmup"].to_numpy(dtype=bool)
    if "evaluation" in table:
        training &= ~table["evaluation"].to_numpy(dtype=bool)
    for key, suffix in (("compute_split_ms", "_ms"), ("compute_split_gpu_ms", "_gpu_ms")):
        cols = [ph for ph in ("forward", "backward", "optimizer") if f"{ph}{suffix}" in table]
        if base.get(key) and training.any():
            fields[key] = {ph: float(table.loc[training, f"{ph}{suffix}"].mean()) for ph in cols}
    if any(d.get("kernels") for d in docs):
        fields["kernels"] = _kernels(docs)
    if any(d.get("memcpy") for d in docs):
        fields["memcpy"] = _memcpy(docs)
    if any(d.get("loaders") for d in docs):
        fields["loaders"] = _loaders(docs)
    if any(d.get("starvation") for d in docs):
        fields["starvation"] = _starvation(table)
    fields["processes"] = {"training": [_per_process(d) for d in docs]}
    return fields, table, raw


def evaluation_apart(evaluating: list[dict[str, Any]], trainers: list[pd.DataFrame]) -> dict[str, Any] | None:
    """The passes of processes that only evaluated (their documents' evaluation, else one pass of all their
    rows) as the run's evaluation finding: its share is of the wall time of training, which ran side by side
    in the trainers (the longest trainer's measured steps), and evaluation. None without such a process."""
    passes, total_ms = 0, 0.0
    for d in evaluating:
        ev = d.get("evaluation") if isinstance(d.get("evaluation"), dict) else {}
        ms = ev.get("total_ms")
        if not isinstance(ms, (int, float)) or ms <= 0:
            ms = float(d.get("steps", 0) or 0) * float((d.get("step_time_ms") or {}).get("mean") or 0.0)
        n = ev.get("passes")
        passes += n if isinstance(n, int) and n > 0 else 1
        total_ms += float(ms)
    if not passes or total_ms <= 0:
        return None
    training_ms = 0.0
    for t in trainers:
        keep = ~t["warmup"].to_numpy(dtype=bool)
        if "evaluation" in t:
            keep &= ~t["evaluation"].to_numpy(dtype=bool)
        training_ms = max(training_ms, float(t["wall_ms"].to_numpy(dtype=float)[keep].sum()))
    return {
        "passes": passes,
        "total_ms": total_ms,
        "ms_per_pass": total_ms / passes,
        "share_of_wall": total_ms / (total_ms + training_ms),
        "apart": True,
        "processes": [d.get("pid") for d in evaluating],
    }
