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


def summary(run: Any, prefix: str = "perfcore/", numeric: bool = False) -> dict[str, Any]:
    """Flat key figures of `run` (a result dict / RunResult, a run folder path, or a StepTimer):
    steps, warmup_steps, step_ms (mean), step_ms_p50, step_ms_p90, <label>_ms and <label>_share for
    the five labels, overhead_ms and overhead_share, and bound / verdict (text; left out with
    numeric=True, since mlflow.log_metrics takes numbers only). Keys start with `prefix`."""
    doc = _doc_of(run)
    st = doc.get("step_time_ms") or {}
    bd = doc.get("breakdown_ms") or {}
    fr = doc.get("breakdown_fraction") or {}
    o = doc.get("overhead") or {}
    out: dict[str, Any] = {
        "steps": int(doc.get("steps") or 0),
        "warmup_steps": int(doc.get("warmup_steps") or 0),
        "step_ms": float(st.get("mean") or 0.0),
        "step_ms_p50": float(st.get("p50") or 0.0),
        "step_ms_p90": float(st.get("p90") or 0.0),
    }
    for lb in LABELS:
        out[f"{lb}_ms"] = float(bd.get(lb) or 0.0)
        out[f"{lb}_share"] = float(fr.get(lb) or 0.0)
    out["overhead_ms"] = float(o.get("ms_per_step") or 0.0)
    out["overhead_share"] = float(o.get("fraction") or 0.0)
    if not numeric:
        v = doc.get("verdict") or {}
        out["bound"] = str(v.get("bound") or "")
        out["verdict"] = str(v.get("summary") or "")
    return {f"{prefix}{k}": v for k, v in out.items()}
