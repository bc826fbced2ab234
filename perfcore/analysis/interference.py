"""Interference as a finding: from the samples capture.interference takes during a run, how much CPU
other processes used against the cores there are, how much the hypervisor stole, how long the run
queue was, how often the run's main process was preempted, and whether other processes used the GPU.
When that is material, step times are inflated and a verdict on them is uncertain: the finding holds
the figures and the reasons as codes (report.words.verdict says them, before the verdict). Pure
functions on the samples' columns."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

__all__ = [
    "interference_finding",
    "reasons_of",
    "window",
    "MATERIAL_OTHERS_SHARE",
    "MATERIAL_STEAL_SHARE",
    "MATERIAL_OTHERS_CORES",
]

# Other processes are material when they used a quarter of the machine's cores and at least half a
# core (on a 2-core machine, half a core: a neighbour that takes it makes every waiting step wait
# longer), or when the hypervisor stole 5% of the CPU time.
MATERIAL_OTHERS_SHARE = 0.25
MATERIAL_OTHERS_CORES = 0.5
MATERIAL_STEAL_SHARE = 0.05


def _delta(col: Sequence[Any]) -> float | None:
    vals = [v for v in col if v is not None]
    return float(vals[-1] - vals[0]) if len(vals) >= 2 else None


def interference_finding(
    samples: Mapping[str, Sequence[Any]], *, cores: int, clock_ticks: int = 100, main_depth: int = 0
) -> dict[str, Any] | None:
    """The finding over the span of the samples (FIELDS of capture.interference, in order). cores: the
    machine's CPUs (what /proc/stat sums). main_depth: where the run's main process sits in the sampled
    tree: 0 when the sampler ran in it, 1 when it sampled from a launcher (the script is its child), 2 when
    the script's own children are the run (they and all below them; their involuntary switches unsampled).
    Everything else in the tree (DataLoader workers, their helpers) is the run's own workers, apart
    from other processes. None with fewer than two samples."""
    t = [v for v in samples.get("t_s", []) if v is not None]
    if len(t) < 2 or t[-1] <= t[0]:
        return None
    span = t[-1] - t[0]
    hz = float(clock_ticks)
    d_total = _delta(samples["total_ticks"]) or 0.0
    d_busy = _delta(samples["busy_ticks"]) or 0.0
    d_steal = _delta(samples["steal_ticks"]) or 0.0
    d_tree = max(_delta(samples["tree_ticks"]) or 0.0, 0.0)
    d0 = max(_delta(samples["depth0_ticks"]) or 0.0, 0.0)
    d1 = max(_delta(samples["depth1_ticks"]) or 0.0, 0.0)
    if main_depth == 2:  # the processes the script started train (Hogwild): the script itself only waits
        main, launcher = max(d_tree - d0 - d1, 0.0), d0 + d1
    else:
        main = d0 if main_depth == 0 else d1
        launcher = 0.0 if main_depth == 0 else d0
    workers = max(d_tree - main - launcher, 0.0)
    others = max(d_busy - d_tree, 0.0)
    cores_of = lambda ticks: ticks / hz / span  # noqa: E731 (ticks over the span -> cores in use)
    nonvol = _delta(samples.get(f"depth{main_depth}_nonvoluntary", [])) or 0.0
    runq = [v for v in samples.get("procs_running", []) if v is not None]
    gpu = [v for v in samples.get("gpu_other_processes", []) if v is not None]
    gpu_bytes = [v for v in samples.get("gpu_other_bytes", []) if v is not None]
    doc: dict[str, Any] = {
        "span_s": span,
        "samples": len(t),
        "cores": cores,
        "others_cores": cores_of(others),
        "others_share": cores_of(others) / cores if cores else 0.0,
        "main_cores": cores_of(main),
        "workers_cores": cores_of(workers),
        "idle_cores": cores_of(max(d_total - d_busy - d_steal, 0.0)),
        "steal_share": d_steal / d_total if d_total > 0 else 0.0,
        "run_queue_mean": sum(runq) / len(runq) if runq else None,
        "run_queue_max": max(runq) if runq else None,
        "main_nonvoluntary_per_s": nonvol / span if main_depth < 2 else None,
        "gpu_other_processes": max(gpu) if gpu else None,
        "gpu_other_bytes": max(gpu_bytes) if gpu_bytes else None,
    }
    doc["reasons"] = reasons_of(doc)
    doc["material"] = bool(doc["reasons"])
    return doc


def reasons_of(f: Mapping[str, Any]) -> list[str]:
    """Why a finding's figures count as disturbed, as codes (report.words.verdict says them): other processes'
    CPU, the hypervisor's steal, other processes on the GPU. A figure that is no number counts as none."""

    def figure(key: str) -> float:
        v = f.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0

    said = {
        "others": figure("others_share") >= MATERIAL_OTHERS_SHARE and figure("others_cores") >= MATERIAL_OTHERS_CORES,
        "steal": figure("steal_share") >= MATERIAL_STEAL_SHARE,
        "gpu": bool(f.get("gpu_other_processes")),
    }
    return [code for code, yes in said.items() if yes]


def window(samples: Mapping[str, Sequence[Any]], start_s: float, end_s: float) -> dict[str, list]:
    """The samples that bound [start_s, end_s] (CLOCK_MONOTONIC seconds, the steps' clock): the last one
    at or before the start, the first at or after the end, and those between; so a finding covers the
    measured steps, not the interpreter's start-up before them."""
    t = list(samples.get("t_s") or [])
    if not t:
        return {k: [] for k in samples}
    lo = max([i for i, v in enumerate(t) if v is not None and v <= start_s], default=0)
    hi = min([i for i, v in enumerate(t) if v is not None and v >= end_s], default=len(t) - 1)
    return {k: list(v)[lo : hi + 1] for k, v in samples.items()}
