"""`perfcore.summary(run)`: the key figures of a run as one flat dict, ready for wandb.log,
mlflow.log_metrics (numeric=True) or a TensorBoard SummaryWriter's add_scalar per key."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from perfcore.analysis.attribution import LABELS
from perfcore.analysis.run_report import RunReport

__all__ = ["summary"]


def _run_of(run: Any) -> RunReport:
    """The typed run `run` names: itself, a run document (read as a run folder's run.json is), a run folder
    or its run.json, or a StepTimer's result so far."""
    if isinstance(run, RunReport):
        return run
    from perfcore.errors import BadResultFile, UsageError
    from perfcore.analysis.reader import parse_run, read_json

    if isinstance(run, Mapping):
        try:
            return parse_run(dict(run), Path("the document"))
        except BadResultFile as e:
            raise UsageError(
                f"perfcore.summary: {e.problem.removeprefix('is corrupt: ')}; pass the run perfcore returned, "
                "its run folder, or a StepTimer"
            ) from e
    if isinstance(run, (str, Path)):
        path = Path(run) / "run.json" if Path(run).is_dir() else Path(run)
        return parse_run(read_json(path, "perfcore.run"), path)
    if hasattr(run, "result"):  # a StepTimer (or anything that makes a run)
        return run.result()
    raise TypeError(f"summary() takes a perfcore run, a run folder or a StepTimer, not {type(run).__name__}")


def summary(run: Any, prefix: str = "perfcore/", numeric: bool = False) -> dict[str, Any]:
    """Flat key figures of `run` (a run as perfcore returns it, a run folder path, or a StepTimer):
    steps, warmup_steps, step_ms (mean), step_ms_p50, step_ms_p90, <label>_ms and <label>_share for
    the five labels (means over every step), step_ms_steady and <label>_steady_share (the steady step the
    verdict judges on: outlier steps set apart, as the terminal's table shows it), overhead_ms and
    overhead_share, and bound / verdict (the verdict's one line; left out with numeric=True, since mlflow.log_metrics
    takes numbers only). Keys start with `prefix`."""
    r = _run_of(run)
    out: dict[str, Any] = {
        "steps": int(r.steps),
        "warmup_steps": int(r.warmup_steps),
        "step_ms": float(r.step_time_ms.mean),
        "step_ms_p50": float(r.step_time_ms.p50),
        "step_ms_p90": float(r.step_time_ms.p90),
    }
    for lb in LABELS:
        out[f"{lb}_ms"] = float(r.breakdown_ms[lb])
        out[f"{lb}_share"] = float(r.breakdown_fraction[lb])
    from perfcore.analysis.verdict import report_evidence

    ev = report_evidence(r)
    steady = float(ev["step_ms"] or 0.0)
    out["step_ms_steady"] = steady
    for lb in LABELS:
        ms = ev["compute_ms"] if lb == "compute" else ev["avoidable_ms"][lb]
        out[f"{lb}_steady_share"] = float(ms or 0.0) / steady if steady > 0 else 0.0
    out["overhead_ms"] = float(r.overhead.ms_per_step) if r.overhead is not None else 0.0
    out["overhead_share"] = float(r.overhead.fraction) if r.overhead is not None else 0.0
    if not numeric:
        from perfcore.report.words.verdict import headline, undecided_words

        out["bound"] = str(r.verdict.bound if r.verdict.decided or r.no_step is None else "none")
        out["verdict"] = headline(r.verdict) if r.verdict.decided else undecided_words(r)
    return {f"{prefix}{k}": v for k, v in out.items()}
