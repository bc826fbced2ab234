"""What a Recording's settled steps become: the per-step ms table and the perfcore.run/1 document."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from perfcore._lazy import lazy_module
from perfcore.analysis import attribution
from perfcore.recording import tracing
from perfcore.recording.gpu import steps_traced as gpu_steps_traced
from perfcore.analysis.run_parts import Overhead
from perfcore.recording.own_work import MATERIAL_OVERHEAD, overhead_doc

pd = lazy_module("pandas")  # imported on first use: settling needs it, recording does not


def ms_table(df: pd.DataFrame, names: dict[int, str], first_custom: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(df with the ms columns added, the user's view of it). The view: one row per completed step: step, wall_ms, load_ms, transfer_ms, compute_ms, comm_ms,
    host_ms (the five sum to wall_ms), warmup, and <custom phase>_ms for custom phases."""
    new = {
        ms: (df[ns].to_numpy() if ns is not None else np.zeros(len(df))) / 1e6
        for ms, ns in ms_sources(df.columns, names, first_custom).items()
    }
    df = with_columns(df, new)
    cols = ["step", "wall_ms"] + [f"{lb}_ms" for lb in attribution.LABELS] + ["warmup"]
    extra = [c for c in df.columns if c not in cols and not c.endswith("_ns") and not c.startswith("_")]
    # The view shares the columns (a selection of columns would copy them all).
    return df, pd.DataFrame({c: df[c].to_numpy() for c in cols + extra}, copy=False)


def ms_sources(ns_columns, names: dict[int, str], first_custom: int) -> dict[str, str | None]:
    """The ms columns of ms_table, in its order -> the ns column each is made of (None: zeros, a custom
    phase that never ran)."""
    out: dict[str, str | None] = {"wall_ms": "wall_ns", **{f"{lb}_ms": f"{lb}_ns" for lb in attribution.LABELS}}
    if "perfcore_ns" in ns_columns:
        out["perfcore_ms"] = "perfcore_ns"
    for pid, name in names.items():
        if pid >= first_custom:
            col = f"_phase{pid}_ns"
            out[f"{name}_ms"] = col if col in ns_columns else None
        gcol = f"_gpu{pid}_ns"
        if gcol in ns_columns:  # kernel time launched inside this phase (CUPTI external correlation)
            out[f"{name}_gpu_ms"] = gcol
    return out


def run_document(
    engine, full: pd.DataFrame, per_phase: float, top_kernels: int, evaluation_rows: list[int] | None = None
) -> dict[str, Any]:
    """The perfcore.run/1 document of `full` (the settled ns table); per_phase: one phase's host cost;
    evaluation_rows: rows the summary sets apart as evaluation passes."""
    store = engine.store
    n_rows = len(full)
    per_row = max(1, n_rows)  # a document of no rows divides by one
    # The summary reads only these columns, and it selects rows (training, measured, warm-up) as
    # whole-frame copies: given every custom phase's ns and ms columns too, that was three copies of
    # a 24-column table at the end of a long run (1M steps: ~640 MB in the training process).
    own_ns = full["perfcore_ns"].to_numpy() if "perfcore_ns" in full else None
    warm = full["warmup"].to_numpy(dtype=bool)
    wall_ns = full["wall_ns"].to_numpy()
    full = pd.DataFrame({c: full[c].to_numpy() for c in summary_columns(full)}, copy=False)  # shared, not copied
    if evaluation_rows:
        full = full.assign(evaluation=False)
        full.loc[[r for r in evaluation_rows if r < n_rows], "evaluation"] = True
    evidence: dict[str, Any] = {"cpu_count": os.cpu_count()}
    kernels, memcpy, categories = [], {}, {}
    if engine.kernels_traced:
        kernels = store.top_kernels(top_kernels)
        categories = store.kernel_categories()
        memcpy = store.memcpy_summary()
        h2d = memcpy["by_direction"].get("h2d") if memcpy else None  # no copies, or none to the device
        evidence["pageable_h2d_bytes_per_step"] = (h2d["pageable_bytes"] if h2d else 0) / per_row
        evidence["pageable_h2d_ms_per_step"] = (h2d["pageable_ms"] if h2d else 0.0) / per_row
    phases_per_step = store.span_count / per_row
    mean_wall_ns = float(wall_ns[~warm].mean()) if (~warm).any() else 0.0
    settle_ms = engine.settle_ns / per_row / 1e6
    # perfcore's own work inside the loop (settling, progress, checkpoints), measured and left out of
    # the steps' wall time: the user's script paid it, the rows do not show it.
    # Kernel tracing's cost was kept out of the steps into the same column; it is said apart from the rest.
    traced = tracing.overhead(engine.gpu.tracing, n_rows, gpu_steps_traced(engine))
    own_ms = float(own_ns.sum()) / 1e6 if own_ns is not None else 0.0
    own_ms = max(0.0, own_ms - traced["tracing_ms_per_step"] * per_row)
    own_per_step = own_ms / per_row
    pauses_ms, pauses = own_pauses(own_ns, wall_ns)
    overhead_ms = phases_per_step * per_phase / 1e6 + own_per_step + traced["tracing_ms_per_step"]
    fraction = overhead_ms * 1e6 / mean_wall_ns if mean_wall_ns else 0.0
    overhead = Overhead(
        per_phase_ns=per_phase,
        phases_per_step=phases_per_step,
        settle_ms_per_step=settle_ms,
        own_ms_total=own_ms,
        own_ms_per_step=own_per_step,
        pause_ms_total=pauses_ms,
        pauses=pauses,
        ms_per_step=overhead_ms,
        fraction=fraction,
        material=fraction >= MATERIAL_OVERHEAD,
        **traced,
        # What the figure counts (report/words/advice.py says each): phases x a phase's cost measured after a step
        # of real work (as a loop leaves the caches), the own work left out of the steps, and kernel tracing:
        # its launches x one traced launch's cost, measured in the run (recording/tracing.py).
        counted=("phases", "own_work") + (("kernel_tracing",) if engine.gpu.tracing is not None else ()),
    )
    doc = attribution.summarize(
        full,
        on_gpu=engine.device == "cuda",
        backend=engine.backend,
        device=engine.device_name(),
        evidence=evidence,
        kernels=kernels,
        memcpy=memcpy,
        overhead=overhead_doc(overhead),
    )
    if categories:
        doc["kernel_categories"] = categories
    # Records lost and buffers cut short are counted there; report.words.runs says them as notes.
    doc["capture"] = engine.capture_stats().to_doc()
    if engine.notes:
        doc["notes"] = list(dict.fromkeys(engine.notes))
    doc["step_source"] = "timer.step()" if engine.step_on == "step" else engine.step_on
    return doc


def own_pauses(own_ns, wall_ns, factor: float = 10.0) -> tuple[float, int]:
    """perfcore's own work that came as pauses (ms in all, how many): a step whose own work exceeds
    `factor` x the median step (settling, a checkpoint, an import), against the small work spread over
    many steps (memory samples, progress ticks). A side-by-side bench's per-block medians leave the
    pauses out and keep the rest; a whole run's time keeps both."""
    if own_ns is None or not len(own_ns):
        return 0.0, 0
    own = np.asarray(own_ns, dtype=np.float64)
    big = own > factor * float(np.median(np.asarray(wall_ns, dtype=np.float64)))
    return float(own[big].sum()) / 1e6, int(big.sum())


def summary_columns(full: pd.DataFrame) -> list[str]:
    """The columns attribution.summarize reads: the step, its flags, and wall and the five labels in
    ns and ms (the custom phases' columns are the steps table's, not the summary's)."""
    wanted = ["step", "warmup", "evaluation", "wall_ns", "wall_ms"]
    wanted += [f"{lb}_{u}" for lb in attribution.LABELS for u in ("ns", "ms")]
    return [c for c in wanted if c in full]


def with_columns(df: pd.DataFrame, columns: dict[str, np.ndarray]) -> pd.DataFrame:
    """df plus many new columns at once: one insert per column fragments the frame (pandas warns each
    time), which a run with hundreds of custom phases would print hundreds of times."""
    # The columns as they are, not concatenated blocks: a concat copies every column of both frames
    # while they are held (the table three times at once, at the end of a 1M-step run).
    kept = {c: df[c].to_numpy() for c in df.columns if c not in columns}
    return pd.DataFrame({**kept, **columns}, index=df.index, copy=False)
