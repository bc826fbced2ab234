"""What the parent reads beside the parts when it finishes a run: the DataLoader workers' batch files, the
monitor's samples and the machine's interference samples, each summed up for run.json and the decision."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from perfcore.run.protocol import WORKER_COLUMNS, WORKERS

__all__ = ["worker_summary", "monitor_summary", "interference_of"]


def worker_summary(
    out: Path,
    rank: int | None = None,
    loader: int | None = None,
    skip_pids: tuple[int, ...] = (),
) -> dict[str, Any]:
    """How fast DataLoader workers produce batches (for one rank; for one loader, by its index in
    run.json's loaders, so an eval loader's batches never mix into the train loader's figures; without
    the batches a process in skip_pids loaded itself: one that only evaluated); advice.loader_plan sets
    it against the loop."""
    pattern = "*.csv" if loader is None else f"*.L{loader}.csv"
    root = out / WORKERS
    # Files the loaders wrote here, not what a link points at; a row that is not numbers is no batch.
    if root.is_symlink() or not root.is_dir():
        return {}
    skip = {f"{pid}-main" for pid in skip_pids}
    frames = []
    for f in sorted(f for f in root.glob(pattern) if not f.is_symlink() and f.name.split(".")[0] not in skip):
        try:
            frames.append(pd.read_csv(f, header=None, names=WORKER_COLUMNS))
        except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, OSError):
            continue
    if not frames:
        return {}
    w = pd.concat(frames, ignore_index=True).apply(pd.to_numeric, errors="coerce").dropna()
    if rank is not None and (w["rank"] >= 0).any():
        w = w[w["rank"] == rank]
    if w.empty:
        return {}
    in_workers = w[w["worker"] >= 0]
    fetch_ms = (w["end_ns"] - w["start_ns"]) / 1e6
    return {
        # Worker ids, not pids: without persistent_workers each epoch starts new processes.
        "num_workers": int(in_workers["worker"].nunique()),
        "batches": int(len(w)),
        "fetch_ms_mean": float(fetch_ms.mean()),
        "getitem_ms_mean": float(w["getitem_ns"].mean() / 1e6),
        "collate_ms_mean": float(w["collate_ns"].mean() / 1e6),
        "items_per_batch": float(w["items"].mean()),
    }


def monitor_summary(samples: pd.DataFrame, steps: pd.DataFrame) -> dict[str, Any]:
    """run.json's `monitor`: means over the samples; the GPU's power and temperature (mean, max) and,
    over the measured steps that hold a sample, the spread of their per-step means."""
    doc: dict[str, Any] = {"samples": int(len(samples))}
    for c in ("cpu_percent", "gpu_util", "power_w", "temp_c"):
        v = pd.to_numeric(samples[c], errors="coerce").dropna() if c in samples else pd.Series(dtype=float)
        if len(v):
            doc[f"{c}_mean"] = float(v.mean())
            if c in ("power_w", "temp_c"):
                doc[f"{c}_max"] = float(v.max())
    # The two monitor columns before the measured rows: selecting rows of the whole table copies every column.
    steps = steps[[c for c in ("warmup", "monitor_power_w", "monitor_temp_c") if c in steps]]
    measured = steps[~steps["warmup"].to_numpy(dtype=bool)] if "warmup" in steps else steps
    per_step = {}
    for c in ("power_w", "temp_c"):
        v = pd.to_numeric(measured[f"monitor_{c}"], errors="coerce").dropna() if f"monitor_{c}" in measured else ()
        if len(v):
            per_step[c] = {"mean": float(v.mean()), "min": float(v.min()), "max": float(v.max()), "steps": int(len(v))}
    if per_step:
        doc["per_step"] = per_step
    return doc


def interference_of(
    samples: dict[str, list] | None, raw: dict[str, Any] | None, trainers: int = 0
) -> dict[str, Any] | None:
    """The interference finding over the measured steps (the samples that bound them, on the steps'
    monotonic clock), the script's main process one level below this launcher, or (trainers: how many
    processes the script started that train side by side) the processes below it."""
    if not samples:
        return None
    from perfcore.analysis.interference import interference_finding, window

    if raw and len(raw.get("step_start_ns", [])):
        start_s = float(raw["step_start_ns"][0]) / 1e9
        end_s = float(raw["step_start_ns"][-1] + raw["step_wall_ns"][-1]) / 1e9
        samples = window(samples, start_s, end_s)
    finding = interference_finding(
        samples, cores=os.cpu_count() or 1, clock_ticks=os.sysconf("SC_CLK_TCK"), main_depth=2 if trainers else 1
    )
    if finding is not None and trainers:
        finding["main_processes"] = trainers
    return finding
