"""`perfcore.summary(run)`: the key figures of a run as one flat dict, ready for wandb.log,
mlflow.log_metrics (numeric=True) or a TensorBoard SummaryWriter's add_scalar per key."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from perfcore.analysis.attribution import LABELS

__all__ = ["summary"]


def _doc_of(run: Any) -> Mapping[str, Any]:
    if isinstance(run, Mapping):
        return run
    if isinstance(run, (str, Path)):
        from perfcore.report.reader import read_json

        return read_json(Path(run) / "run.json" if Path(run).is_dir() else Path(run), "perfcore.run")
    if hasattr(run, "result"):  # a StepTimer (or anything that makes a perfcore.run/1 document)
        return run.result()
    raise TypeError(f"summary() takes a perfcore.run/1 document, a run folder or a StepTimer, not {type(run).__name__}")


def _number(doc: Mapping[str, Any], *path: str) -> float:
    """doc[path...] as a finite number (0 when absent), or a UsageError naming the field."""
    import math

    v: Any = doc
    for k in path:
        v = v.get(k) if isinstance(v, Mapping) else None
    if v is None:
        return 0.0
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        from perfcore.errors import UsageError

        raise UsageError(
            f"perfcore.summary: {'.'.join(path)} is {str(v)[:40]!r}, not a number; pass the "
            "perfcore.run/1 document perfcore wrote, its run folder, or a StepTimer"
        )
    return float(v)


def summary(run: Any, prefix: str = "perfcore/", numeric: bool = False) -> dict[str, Any]:
    """Flat key figures of `run` (a result dict / RunResult, a run folder path, or a StepTimer):
    steps, warmup_steps, step_ms (mean), step_ms_p50, step_ms_p90, <label>_ms and <label>_share for
    the five labels (means over every step), step_ms_steady and <label>_steady_share (the steady step the
    verdict judges on: outlier steps set apart, as the terminal's table shows it), overhead_ms and
    overhead_share, and bound / verdict (the verdict's one line; left out with numeric=True, since mlflow.log_metrics
    takes numbers only). Keys start with `prefix`."""
    doc = _doc_of(run)
    out: dict[str, Any] = {
        "steps": int(_number(doc, "steps")),
        "warmup_steps": int(_number(doc, "warmup_steps")),
        "step_ms": _number(doc, "step_time_ms", "mean"),
        "step_ms_p50": _number(doc, "step_time_ms", "p50"),
        "step_ms_p90": _number(doc, "step_time_ms", "p90"),
    }
    for lb in LABELS:
        out[f"{lb}_ms"] = _number(doc, "breakdown_ms", lb)
        out[f"{lb}_share"] = _number(doc, "breakdown_fraction", lb)
    from perfcore.analysis.verdict import run_evidence

    ev = run_evidence(doc)  # after the checks above: every figure it reads is a number
    steady = float(ev["step_ms"] or 0.0)
    out["step_ms_steady"] = steady
    for lb in LABELS:
        ms = ev["compute_ms"] if lb == "compute" else ev["avoidable_ms"][lb]
        out[f"{lb}_steady_share"] = float(ms or 0.0) / steady if steady > 0 else 0.0
    out["overhead_ms"] = _number(doc, "overhead", "ms_per_step")
    out["overhead_share"] = _number(doc, "overhead", "fraction")
    if not numeric:
        v = doc.get("verdict") or {}
        out["bound"] = str(v.get("bound") or "")
        from perfcore.report.verdict_words import headline

        out["verdict"] = headline(v) if v.get("step_ms") else str(v.get("summary") or "")
    return {f"{prefix}{k}": v for k, v in out.items()}
