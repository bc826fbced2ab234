"""Triage on an unmodified script: health, diagnose and sweep run the command under `perfcore run`
with DataLoader settings changed from outside (the child configuration's dl_overrides) and, for synthetic
data, batches already fetched replayed instead of loaded (its synthetic)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from perfcore.analysis.checks import step_sem_ms
from perfcore.errors import UsageError
from perfcore.errors import RunFailed
from perfcore.run.parent.finish import finish_run
from perfcore.run.parent.folder import prepare_out
from perfcore.run.parent.launch import check_command, child_config, run_instrumented

__all__ = ["script_run", "script_health", "script_diagnose", "script_sweep", "script_failure"]

SYNTHETIC_KEEP = 8


def script_run(
    cmd: list[str],
    out: Path,
    *,
    steps: int,
    warmup: int,
    overrides: dict | None = None,
    synthetic: bool = False,
    sampler_interval_s: float | None = None,
    settings_only: bool = False,
) -> dict[str, Any]:
    check_command(cmd)
    out = prepare_out(out)
    if synthetic:
        # The first SYNTHETIC_KEEP batches are really loaded (to be replayed): keep them in warm-up.
        warmup = max(warmup, SYNTHETIC_KEEP)
    sampler = None
    if sampler_interval_s:
        from perfcore.capture.sampler import Sampler

        sampler = Sampler(sampler_interval_s).start()
    try:
        config = child_config(
            out, steps, warmup, "auto", True, dl_overrides=overrides, synthetic=SYNTHETIC_KEEP if synthetic else 0
        )
        rc = run_instrumented(cmd, config)
    finally:
        frame = sampler.stop() if sampler else None
    doc = finish_run(out, rc, cmd)
    if settings_only:
        return doc  # what the script made (its loaders), measured steps or not
    if overrides and doc.get("dataloader_overrides", {}).get("applied", 0) == 0:
        raise UsageError("the script built no torch DataLoader, so its settings cannot be changed from outside")
    steps_tbl = pd.read_csv(out / "steps.csv")
    steady = steps_tbl[~steps_tbl["warmup"]]
    if frame is not None and "gpu_util" in frame:
        busy, src = frame["gpu_util"].to_numpy(dtype=float), "gpu_util"
    else:
        busy, src = (steady["compute_ms"] / steady["wall_ms"]).to_numpy(dtype=float), "compute_share"
    doc["_busy"] = {
        "series": busy,
        "source": src,
        "cpu_percent": float(frame["cpu_percent"].mean())
        if frame is not None and len(frame)
        else doc.get("cpu_util_percent"),
    }
    doc["_step_sem_ms"] = step_sem_ms(steady["wall_ms"].to_numpy())
    doc["_out"] = out
    return doc


def script_failure(doc: dict, where: str = "") -> dict[str, Any] | None:
    """{"code", "sentence"} when the script failed after measured steps (crashed, exited non-zero,
    killed), as `perfcore run` words it; None when it finished or --steps stopped it."""
    rc = doc.get("exit_code") or 0
    if not rc:
        return None
    how = (doc.get("exit") or {}).get("sentence") or (doc.get("outcome") or {}).get("sentence") or f"exited with {rc}"
    n = doc.get("steps") or 0
    return {
        "code": rc,
        "sentence": f"the script {how} after {n} measured step{'' if n == 1 else 's'}{where}: "
        "these results are partial",
    }


def _row(name: str, doc: dict, base_ms: float | None) -> dict[str, Any]:
    b = doc["_busy"]
    step_ms = doc["step_time_ms"]["mean"]
    ov = (doc.get("dataloader_overrides") or {}).get("asked") or {}
    w = doc.get("workers") or {}
    bs = w.get("items_per_batch")
    return {
        "name": name,
        "step_ms": step_ms,
        "samples_per_s": (bs or 0) / step_ms * 1e3 if step_ms else 0.0,
        "busy_mean": float(np.mean(b["series"])) if len(b["series"]) else float("nan"),
        "busy_std": float(np.std(b["series"])) if len(b["series"]) else float("nan"),
        "cpu_percent": b["cpu_percent"],
        "oom": False,
        "breakdown_ms": doc["breakdown_ms"],
        "step_sem_ms": doc.get("_step_sem_ms"),
        "breakdown_robust": doc.get("breakdown_robust"),
        "interference": doc.get("interference"),
        "steps": doc.get("steps"),
        "num_workers": ov.get("num_workers", w.get("num_workers")),
        "batch_size": ov.get("batch_size", bs),
        "speedup": (base_ms / step_ms) if base_ms and step_ms else 1.0,
    }


def script_health(cmd: list[str], *, steps: int, interval_s: float, out: Path) -> dict[str, Any]:
    from perfcore.experiments.health import health_report

    doc = script_run(cmd, out / "run", steps=steps, warmup=5, sampler_interval_s=interval_s)
    row = _row("health", doc, None)
    series = doc["_busy"]["series"]
    row.update(
        device=doc["device"],
        steps=doc["steps"],
        busy_source=doc["_busy"]["source"],
        busy_series=series,
        busy_mean=row["busy_mean"] if len(series) else 0.0,
        busy_std=row["busy_std"] if len(series) else 0.0,
        busy_spacing_s=interval_s if doc["_busy"]["source"] == "gpu_util" else row["step_ms"] / 1e3,
    )
    h = health_report(row, " ".join(cmd), "perfcore diagnose -- " + " ".join(cmd))
    h["note"] = "a script runs its own loop (optimizer included); health of a workload factory omits the optimizer"
    failed = script_failure(doc)
    if failed:
        h["script_exit"] = failed
    return h


def script_diagnose(
    cmd: list[str], *, steps: int, warmup: int, out: Path, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    from perfcore.experiments.diagnose import diagnose_advice, diagnose_verdict

    say = progress or (lambda m: None)
    say("baseline")
    base = script_run(cmd, out / "baseline", steps=steps, warmup=warmup)
    b_ms = base["step_time_ms"]["mean"]
    exps = [_row("baseline", base, b_ms)]
    failures = [script_failure(base, " in the baseline")]
    say("A: synthetic data")
    synth = script_run(cmd, out / "synthetic", steps=steps, warmup=warmup, synthetic=True)
    failures.append(script_failure(synth, " with synthetic data"))
    exps.append(_row("A: synthetic data (replayed batches)", synth, b_ms))
    workers = (base.get("workers") or {}).get("num_workers", 0)
    import os

    b_over = {"num_workers": 0} if workers else {"num_workers": os.cpu_count() or 1}
    b_name = f"B: num_workers={b_over['num_workers']}"
    say(b_name)
    try:
        b_doc = script_run(cmd, out / "workers", steps=steps, warmup=warmup, overrides=b_over)
        failures.append(script_failure(b_doc, f" with {b_name[3:]}"))
        exps.append(_row(b_name, b_doc, b_ms))
    except RunFailed as e:
        exps.append({"name": b_name, "oom": False, "step_ms": float("nan"), "speedup": None, "error": str(e)})
    w = base.get("workers") or {}
    prof = {
        "items": int(w.get("batches", 0)),
        "ms_per_item": w.get("getitem_ms_mean", 0.0) / max(1.0, w.get("items_per_batch", 1)),
        "cpu_to_wall": None,
        "top": [],
        "note": "a script's workers are timed per batch (__getitem__ vs collate); for a function-level "
        "profile, point diagnose at a workload factory",
    }
    base_row = {
        "step_ms": b_ms,
        "breakdown_ms": base["breakdown_ms"],
        "breakdown_fraction": base["breakdown_fraction"],
        "device": base["device"],
        "step_sem_ms": base.get("_step_sem_ms"),
        "breakdown_robust": base.get("breakdown_robust"),
        "interference": base.get("interference"),
        "steps": base.get("steps"),
    }
    verdict, predicted = diagnose_verdict(base_row, exps, prof, on_gpu=base["device"] != "cpu")
    advised = diagnose_advice({k: v for k, v in base.items() if not k.startswith("_")}, verdict)
    doc = {
        "recommendations": advised["recommendations"],
        "schema": "perfcore.diagnose/1",
        "workload": " ".join(cmd),
        "device": base["device"],
        "experiments": exps,
        "skipped": [
            {
                "name": "C: other decoder",
                "reason": "a script declares no decoders; use a workload "
                "factory with decoders={...} for this experiment",
            }
        ],
        "worker_profile": prof,
        "verdict": verdict,
        "predicted_speedup": predicted,
        "measured_speedup": exps[1]["speedup"],
    }
    if advised.get("loader_plan"):
        doc["loader_plan"] = advised["loader_plan"]
    failed = next((f for f in failures if f), None)
    if failed:  # the first run whose script failed: its code is diagnose's, as run's is the script's
        doc["script_exit"] = failed
    return doc


def _interrupted(rc: int) -> bool:
    """The child ended on Ctrl-C (SIGINT reaches it first: same process group): 128+2, or Python's 130."""
    return rc in (130, -2)


def script_settings(cmd: list[str], out: Path) -> dict[str, Any]:
    """The script's own training DataLoader settings, from one short run with nothing replaced."""
    doc = script_run(cmd, out, steps=1, warmup=0, settings_only=True)
    loaders = doc.get("loaders") or []
    ld = next((x for x in loaders if x.get("training")), loaders[0] if loaders else None)
    if ld is None:
        raise UsageError("the script built no torch DataLoader, so its settings cannot be changed from outside")
    return {
        **{k: ld.get(k) for k in ("batch_size", "num_workers", "pin_memory", "prefetch_factor")},
        "site": ld.get("site"),
    }


def own_config(cfg: dict, own: dict) -> dict:
    """A configuration with the axes not swept (None) set to the script's own values; prefetch_factor
    means nothing without workers (None), and torch's default (2) where the script had none."""
    out = {k: (own.get(k) if v is None else v) for k, v in cfg.items()}
    if not out["num_workers"]:
        out["prefetch_factor"] = None
    elif out["prefetch_factor"] is None:
        out["prefetch_factor"] = 2
    return out


def script_config_row(
    cmd: list[str], cfg: dict, *, steps: int, warmup: int, out: Path, swept: tuple = (), own: dict | None = None
) -> dict[str, Any]:
    """One sweep configuration of a script: a row, or a failed row with the reason (crash, warm-up only).
    Only the swept axes are replaced; `replaced` lists each value that differs from the script's own."""
    from perfcore.experiments.sweep import Interrupted, failed_row, verdict_cols

    ov = {k: v for k, v in cfg.items() if v is not None and (not swept or k in swept)}
    own = own or {}
    replaced = ", ".join(f"{k} {own.get(k)}->{v}" for k, v in ov.items() if own and own.get(k) != v)
    cfg = {**cfg, "replaced": replaced or None}
    try:
        doc = script_run(cmd, out, steps=steps, warmup=warmup, overrides=ov)
    except RunFailed as e:
        if _interrupted(e.exit_code):
            raise Interrupted() from e
        return failed_row(cfg, "crashed", str(e))
    rc = doc.get("exit_code", 0)
    if _interrupted(rc):
        raise Interrupted()
    r = _row("", doc, None)
    if doc["steps"] == 0 or not r["step_ms"]:
        how = (doc.get("exit") or {}).get("sentence") or f"ended (exit {rc})"
        return failed_row(cfg, "crashed", f"the script {how} during warm-up: no measured step")
    row = {
        **cfg,
        "step_ms": r["step_ms"],
        "samples_per_s": cfg["batch_size"] / r["step_ms"] * 1e3,
        "busy_mean": r["busy_mean"],
        "busy_std": r["busy_std"],
        "peak_mem_bytes": (doc.get("memory") or {}).get("peak_bytes"),
        "oom": False,
        "status": "ok",
        "error": None,
        "steps": doc["steps"],
        "load_share": doc["breakdown_fraction"]["load"],
        **verdict_cols(doc.get("verdict")),
    }
    if rc != 0:
        # Numbers from a run that crashed part-way describe a different job: kept, never best.
        row.update(status="crashed", error=script_failure(doc)["sentence"])
        if "out of memory" in str((doc.get("exit") or {}).get("exception", "")).lower():
            row.update(status="oom", oom=True)
    return row


def script_sweep(
    cmd: list[str],
    grid: dict[str, list],
    *,
    steps: int,
    warmup: int,
    out: Path,
    progress: Callable | None = None,
    done: list[dict] | None = None,
    on_row: Callable[[list[dict]], None] | None = None,
) -> dict[str, Any]:
    import time

    from perfcore.experiments.sweep import config_key, grid_configs, run_grid, sweep_doc

    t0 = time.perf_counter()
    own = script_settings(cmd, out / "script_settings")
    swept = tuple(k for k, v in grid.items() if list(v) != [None])
    configs = [own_config(c, own) for c in grid_configs(grid)]
    index = {config_key(c): i for i, c in enumerate(configs)}
    rows, interrupted = run_grid(
        configs,
        lambda cfg: script_config_row(
            cmd, cfg, steps=steps, warmup=warmup, out=out / f"config{index[config_key(cfg)]}", swept=swept, own=own
        ),
        done=done,
        on_row=on_row,
        say=progress,
    )
    doc = sweep_doc(
        " ".join(cmd), grid, steps, pd.DataFrame(rows), t0=t0, rounds=[], interrupted=interrupted, planned=len(configs)
    )
    doc["script_settings"] = {k: v for k, v in own.items() if k != "site"}
    doc["kept"] = {k: own.get(k) for k in grid if k not in swept}
    if doc["best"]:
        best = next((r for r in doc["configs"] if config_key(r) == config_key(doc["best"])), {})
        doc["best"]["replaced"] = best.get("replaced")
    from perfcore.experiments.sweep import CONFIG_KEYS
    from perfcore.experiments.sweep_patch import sweep_patch

    doc["patch"] = sweep_patch(own.get("site"), doc["best"], own, CONFIG_KEYS, out)
    return doc
