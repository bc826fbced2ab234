"""Triage on an unmodified script: health, diagnose and sweep run the command under `perfcore run`
with DataLoader settings changed from outside (PERFCORE_DL_OVERRIDES) and, for synthetic data,
batches already fetched replayed instead of loaded (PERFCORE_SYNTHETIC)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from perfcore.errors import UsageError
from perfcore.errors import RunFailed
from perfcore.run.finish import finish_run
from perfcore.run.folder import prepare_out
from perfcore.run.launch import check_command, child_env, run_child

__all__ = ["script_run", "script_health", "script_diagnose", "script_sweep"]

SYNTHETIC_KEEP = 8


def script_run(cmd: list[str], out: Path, *, steps: int, warmup: int, overrides: dict | None = None,
               synthetic: bool = False, sampler_interval_s: float | None = None) -> dict[str, Any]:
    check_command(cmd)
    out = prepare_out(out)
    extra = {}
    if overrides:
        extra["PERFCORE_DL_OVERRIDES"] = json.dumps(overrides)
    if synthetic:
        extra["PERFCORE_SYNTHETIC"] = str(SYNTHETIC_KEEP)
        # The first SYNTHETIC_KEEP batches are really loaded (to be replayed): keep them in warm-up.
        warmup = max(warmup, SYNTHETIC_KEEP)
    sampler = None
    if sampler_interval_s:
        from perfcore.capture.sampler import Sampler

        sampler = Sampler(sampler_interval_s).start()
    try:
        rc = run_child(cmd, child_env(out, steps, warmup, "auto", True, extra))
    finally:
        frame = sampler.stop() if sampler else None
    doc = finish_run(out, rc, cmd)
    if overrides and doc.get("dataloader_overrides", {}).get("applied", 0) == 0:
        raise UsageError("the script built no torch DataLoader, so its settings cannot be changed from outside")
    steps_tbl = pd.read_csv(out / "steps.csv")
    steady = steps_tbl[~steps_tbl["warmup"]]
    if frame is not None and "gpu_util" in frame:
        busy, src = frame["gpu_util"].to_numpy(dtype=float), "gpu_util"
    else:
        busy, src = (steady["compute_ms"] / steady["wall_ms"]).to_numpy(dtype=float), "compute_share"
    doc["_busy"] = {"series": busy, "source": src, "cpu_percent": float(frame["cpu_percent"].mean())
                    if frame is not None and len(frame) else doc.get("cpu_util_percent")}
    doc["_out"] = out
    return doc


def _row(name: str, doc: dict, base_ms: float | None) -> dict[str, Any]:
    b = doc["_busy"]
    step_ms = doc["step_time_ms"]["mean"]
    ov = (doc.get("dataloader_overrides") or {}).get("asked") or {}
    w = doc.get("workers") or {}
    bs = w.get("items_per_batch")
    return {"name": name, "step_ms": step_ms,
            "samples_per_s": (bs or 0) / step_ms * 1e3 if step_ms else 0.0,
            "busy_mean": float(np.mean(b["series"])) if len(b["series"]) else float("nan"),
            "busy_std": float(np.std(b["series"])) if len(b["series"]) else float("nan"),
            "cpu_percent": b["cpu_percent"], "oom": False, "breakdown_ms": doc["breakdown_ms"],
            "num_workers": ov.get("num_workers", w.get("num_workers")), "batch_size": ov.get("batch_size", bs),
            "speedup": (base_ms / step_ms) if base_ms and step_ms else 1.0}


def script_health(cmd: list[str], *, steps: int, interval_s: float, out: Path) -> dict[str, Any]:
    from perfcore.experiments.health import health_report

    doc = script_run(cmd, out / "run", steps=steps, warmup=5, sampler_interval_s=interval_s)
    row = _row("health", doc, None)
    series = doc["_busy"]["series"]
    row.update(device=doc["device"], steps=doc["steps"], busy_source=doc["_busy"]["source"], busy_series=series,
               busy_mean=row["busy_mean"] if len(series) else 0.0, busy_std=row["busy_std"] if len(series) else 0.0,
               busy_spacing_s=interval_s if doc["_busy"]["source"] == "gpu_util" else row["step_ms"] / 1e3)
    h = health_report(row, " ".join(cmd), "perfcore diagnose -- " + " ".join(cmd))
    h["note"] = "a script runs its own loop (optimizer included); health of a workload factory omits the optimizer"
    return h


def script_diagnose(cmd: list[str], *, steps: int, warmup: int, out: Path,
                    progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    from perfcore.experiments.diagnose import diagnose_verdict

    say = progress or (lambda m: None)
    say("baseline")
    base = script_run(cmd, out / "baseline", steps=steps, warmup=warmup)
    b_ms = base["step_time_ms"]["mean"]
    exps = [_row("baseline", base, b_ms)]
    say("A: synthetic data")
    exps.append(_row("A: synthetic data (replayed batches)",
                     script_run(cmd, out / "synthetic", steps=steps, warmup=warmup, synthetic=True), b_ms))
    workers = (base.get("workers") or {}).get("num_workers", 0)
    import os

    b_over = {"num_workers": 0} if workers else {"num_workers": os.cpu_count() or 1}
    b_name = f"B: num_workers={b_over['num_workers']}"
    say(b_name)
    try:
        exps.append(_row(b_name, script_run(cmd, out / "workers", steps=steps, warmup=warmup, overrides=b_over), b_ms))
    except RunFailed as e:
        exps.append({"name": b_name, "oom": False, "step_ms": float("nan"), "speedup": None, "error": str(e)})
    w = base.get("workers") or {}
    prof = {"items": int(w.get("batches", 0)), "ms_per_item": w.get("getitem_ms_mean", 0.0) / max(1.0, w.get("items_per_batch", 1)),
            "cpu_to_wall": None, "top": [],
            "note": "a script's workers are timed per batch (__getitem__ vs collate); for a function-level "
                    "profile, point diagnose at a workload factory"}
    base_row = {"step_ms": b_ms, "breakdown_ms": base["breakdown_ms"], "breakdown_fraction": base["breakdown_fraction"],
                "device": base["device"]}
    verdict, predicted = diagnose_verdict(base_row, exps, prof, on_gpu=base["device"] != "cpu")
    return {"schema": "perfcore.diagnose/1", "workload": " ".join(cmd), "device": base["device"], "experiments": exps,
            "skipped": [{"name": "C: other decoder", "reason": "a script declares no decoders; use a workload "
                                                               "factory with decoders={...} for this experiment"}],
            "worker_profile": prof, "verdict": verdict, "predicted_speedup": predicted,
            "measured_speedup": exps[1]["speedup"]}


def script_sweep(cmd: list[str], grid: dict[str, list], *, steps: int, warmup: int, out: Path,
                 progress: Callable | None = None) -> dict[str, Any]:
    from perfcore.experiments.sweep import CONFIG_KEYS, grid_configs, knees

    configs = grid_configs(grid)
    rows = []
    say = progress or (lambda *a: None)
    import time

    t0 = time.perf_counter()
    for i, cfg in enumerate(configs):
        eta = (time.perf_counter() - t0) / i * (len(configs) - i) if i else None
        say(i, len(configs), eta, ", ".join(f"{k} {cfg[k]}" for k in CONFIG_KEYS))
        ov = {k: v for k, v in cfg.items() if v is not None}
        doc = script_run(cmd, out / f"config{i}", steps=steps, warmup=warmup, overrides=ov)
        r = _row("", doc, None)
        rows.append({**cfg, "step_ms": r["step_ms"], "samples_per_s": cfg["batch_size"] / r["step_ms"] * 1e3,
                     "busy_mean": r["busy_mean"], "busy_std": r["busy_std"],
                     "peak_mem_bytes": (doc.get("memory") or {}).get("peak_bytes"), "oom": False, "steps": doc["steps"],
                     "load_share": doc["breakdown_fraction"]["load"]})
    say(len(configs), len(configs), 0.0, "done")
    table = pd.DataFrame(rows)
    best = table.loc[table["samples_per_s"].idxmax()]
    return {"schema": "perfcore.sweep/1", "workload": " ".join(cmd), "grid": grid, "steps": steps,
            "configs": rows, "best": {**{k: (best[k].item() if hasattr(best[k], "item") else best[k]) for k in CONFIG_KEYS},
                                      "samples_per_s": float(best["samples_per_s"])},
            "knees": knees(table), "elapsed_s": time.perf_counter() - t0, "rounds": []}
