"""`perfcore run`: start an unmodified command with perfcore's instrumentation, then turn the
parts it wrote into one run folder (run.json, steps.csv, trace.json, PNGs) and a report."""
from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .errors import PerfcoreError, UsageError

__all__ = ["run_command", "load_run", "finish_run", "worker_summary", "RunFailed"]

BOOT = Path(__file__).resolve().parent / "_boot"


class RunFailed(PerfcoreError):
    """The command ran but produced nothing to report (no steps, no instrumented Python)."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code or 1


def default_out() -> Path:
    return Path("perfcore-runs") / time.strftime("%Y%m%d-%H%M%S")


def prepare_out(out: Path | None) -> Path:
    out = Path(out) if out else default_out()
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".perfcore-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UsageError(f"cannot write to --out {out}: {e.strerror or e}; choose a writable folder")
    for stale in ("parts", "workers"):
        if (out / stale).exists():
            shutil.rmtree(out / stale)
    return out


def check_command(cmd: list[str]) -> None:
    if not cmd:
        raise UsageError("no command given: perfcore run [OPTIONS] -- python train.py ARGS...")
    if shutil.which(cmd[0]) is None and not Path(cmd[0]).is_file():
        raise UsageError(f"no such command: {cmd[0]}")
    if Path(cmd[0]).name.startswith("python"):
        rest = cmd[1:]
        # python [-u -O ...] script.py: the first non-option is the script, unless -m / -c come first.
        for i, a in enumerate(rest):
            if a in ("-m", "-c") or a.startswith("-m") and len(a) > 2:
                return
            if a in ("-I", "-E"):
                raise UsageError(f"python {a} ignores PYTHONPATH, so perfcore cannot instrument it; drop {a}")
            if a.startswith("-"):
                continue
            if not Path(a).is_file():
                raise UsageError(f"no such script: {a}")
            return


def child_env(out: Path, steps: int | None, warmup: int, backend: str, kernels: bool,
              overrides: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    pkg_parent = str(Path(__file__).resolve().parent.parent)
    paths = [str(BOOT), pkg_parent] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env["PERFCORE_RUN_DIR"] = str(out.resolve())
    env["PERFCORE_STEPS"] = str(steps or 0)
    env["PERFCORE_WARMUP"] = str(warmup)
    env["PERFCORE_BACKEND"] = backend
    env["PERFCORE_KERNELS"] = "1" if kernels else "0"
    env.update(overrides or {})
    return env


def run_child(cmd: list[str], env: dict[str, str]) -> int:
    """Runs the command; Ctrl-C reaches the child (same process group) and we wait for it to write."""
    proc = subprocess.Popen(cmd, env=env)
    old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)

    def forward_term(signum, frame):
        proc.send_signal(signum)

    old_term = signal.signal(signal.SIGTERM, forward_term)
    try:
        rc = proc.wait()
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
    return 128 - rc if rc < 0 else rc


def worker_summary(out: Path, loop_step_ms: float | None, load_ms: float | None, rank: int | None = None
                   ) -> dict[str, Any]:
    """How fast DataLoader workers produce batches vs how fast the loop consumes them (for one rank)."""
    files = sorted((out / "workers").glob("*.csv")) if (out / "workers").is_dir() else []
    frames = []
    for f in files:
        try:
            frames.append(pd.read_csv(f, header=None, names=["pid", "worker", "start_ns", "end_ns", "getitem_ns",
                                                              "collate_ns", "items", "rank"]))
        except (pd.errors.EmptyDataError, pd.errors.ParserError):
            continue
    if not frames:
        return {}
    w = pd.concat(frames, ignore_index=True)
    if rank is not None and (w["rank"] >= 0).any():
        w = w[w["rank"] == rank]
        if w.empty:
            return {}
    in_workers = w[w["worker"] >= 0]
    fetch_ms = (w["end_ns"] - w["start_ns"]) / 1e6
    doc: dict[str, Any] = {
        # Worker ids, not pids: without persistent_workers each epoch starts new processes.
        "num_workers": int(in_workers["worker"].nunique()),
        "batches": int(len(w)),
        "fetch_ms_mean": float(fetch_ms.mean()),
        "getitem_ms_mean": float(w["getitem_ns"].mean() / 1e6),
        "collate_ms_mean": float(w["collate_ns"].mean() / 1e6),
        "items_per_batch": float(w["items"].mean()),
    }
    if loop_step_ms is not None and load_ms is not None:
        busy = max(loop_step_ms - load_ms, 1e-6)  # how long the loop takes per batch when data is ready
        doc["loop_ms_without_load"] = busy
        doc["workers_needed"] = int(math.ceil(doc["fetch_ms_mean"] / busy))
        n = max(doc["num_workers"], 1)
        doc["production_ms_per_batch"] = doc["fetch_ms_mean"] / n
    return doc


def _read_parts(out: Path) -> list[dict[str, Any]]:
    parts = []
    for d in sorted((out / "parts").glob("*")) if (out / "parts").is_dir() else []:
        if not (d / "run.json").is_file():
            continue
        doc = json.loads((d / "run.json").read_text())
        steps = pd.read_csv(d / "steps.csv")
        raw = dict(np.load(d / "trace.npz", allow_pickle=False)) if (d / "trace.npz").is_file() else {}
        parts.append({"key": d.name, "doc": doc, "steps": steps, "raw": raw,
                      "label": f"rank {doc['rank']}" if doc.get("rank") is not None else f"pid {doc['pid']}"})
    return parts


def align_samples(samples: pd.DataFrame, start_ns: np.ndarray, wall_ns: np.ndarray) -> pd.DataFrame:
    """Sampler rows -> per-step means (the samples are on the perfcore clock, as the steps are)."""
    cols = [c for c in ("cpu_percent", "gpu_util", "gpu_mem_used_bytes") if c in samples]
    out = pd.DataFrame(index=range(len(start_ns)), columns=cols, dtype=float)
    if not len(samples) or not len(start_ns):
        return out
    t = samples["t_ns"].to_numpy()
    k = np.searchsorted(start_ns, t, side="right") - 1
    inside = (k >= 0) & (t < start_ns[np.clip(k, 0, None)] + wall_ns[np.clip(k, 0, None)])
    grouped = samples[inside].groupby(k[inside])[cols].mean()
    out.loc[grouped.index, cols] = grouped.to_numpy()
    return out


def finish_run(out: Path, rc: int, cmd: list[str], parts: list[dict[str, Any]] | None = None,
               samples: pd.DataFrame | None = None) -> dict[str, Any]:
    """Parts -> run folder. Raises RunFailed (with the script's exit code) when there is nothing to report."""
    parts = _read_parts(out) if parts is None else parts
    if not parts:
        if rc != 0:
            raise RunFailed(f"the command failed (exit {rc}) before perfcore saw a training step; "
                            "fix the script, then run it again", exit_code=rc)
        raise RunFailed("no training step seen: the command never iterated a torch DataLoader, ran an nn.Module "
                        "or called optimizer.step() in an instrumented Python process")
    parts.sort(key=lambda p: (p["doc"].get("rank") is None, p["doc"].get("rank") or 0))
    main = parts[0]
    doc = dict(main["doc"])
    if doc.get("steps", 0) == 0 and doc.get("warmup_steps", 0) == 0:
        raise RunFailed("the loop ran no complete step (an empty DataLoader, or a crash in the first step); "
                        "nothing to attribute")
    doc["command"] = cmd
    doc["exit_code"] = rc
    focus = doc  # whose numbers drive the advice: the job's slowest rank when there is one
    if len(parts) > 1 or doc.get("world_size"):
        from .ranks import clock_offsets, merge_ranks

        # The merged document: rank 0's (or the lowest present) numbers, plus every rank's and the stragglers.
        doc.update(merge_ranks(parts))
        offsets = clock_offsets(parts)
        doc["clock_offsets_ns"] = offsets
        for p in parts:
            off = offsets.get(p["doc"].get("host"), 0)
            if off:
                for key in [k for k in p["raw"] if k.endswith("_ns")]:
                    p["raw"][key] = p["raw"][key] + off
        for r in doc["ranks"]:
            ws = worker_summary(out, r["step_time_ms"]["mean"], r["breakdown_ms"]["load"], r["rank"])
            if ws:
                r["workers"] = ws
        if doc["stragglers"]:
            st = doc["stragglers"][0]
            focus = next(p["doc"] for p in parts if p["doc"].get("rank") == st["rank"])
    from .attribution import recommendations, verdict

    on_gpu = doc["device"] != "cpu"
    workers = worker_summary(out, focus["step_time_ms"]["mean"], focus["breakdown_ms"]["load"], focus.get("rank"))
    evidence: dict[str, Any] = {"cpu_count": os.cpu_count()}
    if workers:
        doc["workers"] = workers
        evidence.update(num_workers=workers["num_workers"], workers_needed=workers.get("workers_needed"),
                        fetch_ms=workers["fetch_ms_mean"], loop_ms=workers.get("loop_ms_without_load", 0.0))
    h2d = (focus.get("memcpy") or {}).get("by_direction", {}).get("h2d", {})
    n_steps = max(1, focus["steps"] + focus["warmup_steps"])
    evidence["pageable_h2d_bytes_per_step"] = h2d.get("pageable_bytes", 0) / n_steps
    evidence["pageable_h2d_ms_per_step"] = h2d.get("pageable_ms", 0.0) / n_steps
    # Advice again, now with the workers' side of the evidence (the child could not see it).
    doc["recommendations"] = recommendations(focus["breakdown_fraction"], focus["breakdown_ms"], on_gpu, evidence)
    if focus is not doc:
        v = verdict(focus["breakdown_fraction"], on_gpu)
        doc["verdict"] = {"bound": v["bound"],
                          "summary": f"{v['summary']} on rank {focus['rank']}; the other ranks wait for it in comm"}
    files = {"run.json": "run.json", "steps.csv": "steps.csv"}
    if samples is not None:
        samples.to_csv(out / "monitor.csv", index=False)
        files["monitor.csv"] = "monitor.csv"
        if main["raw"] and len(samples):
            per_step = align_samples(samples, main["raw"]["step_start_ns"], main["raw"]["step_wall_ns"])
            for c in per_step.columns:
                main["steps"][f"monitor_{c}"] = per_step[c].to_numpy()
            from .export.plots import plot_timeline

            plot_timeline(samples, out / "monitor.png", title="sampled during the run")
            files["monitor.png"] = "monitor.png"
        doc["monitor"] = {"samples": int(len(samples)),
                          **{f"{c}_mean": float(samples[c].mean()) for c in ("cpu_percent", "gpu_util") if c in samples}}
    main["steps"].to_csv(out / "steps.csv", index=False)
    if main["raw"]:
        from .export.chrome_trace import write_trace

        write_trace(out / "trace.json", parts)
        files["trace.json"] = "trace.json"
    from .export.plots import plot_breakdown, plot_kernels

    plot_breakdown(main["steps"], out / "breakdown.png", title=doc["verdict"]["summary"])
    files["breakdown.png"] = "breakdown.png"
    if plot_kernels(doc.get("kernels", []), out / "kernels.png"):
        files["kernels.png"] = "kernels.png"
    if len(doc.get("ranks", [])) > 1:
        from .export.plots import plot_ranks

        plot_ranks(doc["ranks"], out / "ranks.png")
        files["ranks.png"] = "ranks.png"
        for p in parts:
            p["steps"].to_csv(out / f"steps_rank{p['doc'].get('rank')}.csv", index=False)
    doc["files"] = files
    from .export import jsonio

    jsonio.write(out / "run.json", doc)
    return doc


def merge_dirs(dirs: list[Path], out: Path) -> dict[str, Any]:
    """`perfcore merge`: parts written on several nodes of one job -> one run folder."""
    parts, seen = [], set()
    for d in dirs:
        found = _read_parts(Path(d))
        if not found:
            raise UsageError(f"{d} holds no perfcore parts (parts/rank*/run.json)")
        for p in found:
            key = (p["doc"].get("rank"), p["doc"].get("host"), p["doc"].get("pid"))
            if key not in seen:
                seen.add(key)
                parts.append(p)
    out = prepare_out(out)
    cmd = parts[0]["doc"].get("command") or parts[0]["doc"].get("argv") or []
    return finish_run(out, 0, cmd, parts)


def load_run(out: Path) -> tuple[dict[str, Any], pd.DataFrame]:
    out = Path(out)
    if not (out / "run.json").is_file():
        raise UsageError(f"{out} is not a perfcore run folder (no run.json)")
    return json.loads((out / "run.json").read_text()), pd.read_csv(out / "steps.csv")


def run_command(cmd: list[str], *, steps: int | None, warmup: int, out: Path | None, backend: str,
                kernels: bool, overrides: dict[str, str] | None = None, monitor_s: float | None = None
                ) -> tuple[int, dict[str, Any], Path]:
    if steps is not None and steps <= 0:
        raise UsageError(f"--steps must be at least 1, got {steps}")
    if warmup < 0:
        raise UsageError(f"--warmup must be >= 0, got {warmup}")
    check_command(cmd)
    out = prepare_out(out)
    sampler = None
    if monitor_s:
        from .monitor import Sampler

        sampler = Sampler(monitor_s).start()
    try:
        rc = run_child(cmd, child_env(out, steps, warmup, backend, kernels, overrides))
    finally:
        samples = sampler.stop() if sampler else None
    doc = finish_run(out, rc, cmd, samples=samples)
    return rc, doc, out

