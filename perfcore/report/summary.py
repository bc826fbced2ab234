"""A result in short: `perfcore.summary(run)`, the key figures of a run as one flat dict, ready for wandb.log,
mlflow.log_metrics (numeric=True) or a TensorBoard SummaryWriter's add_scalar per key; and the demo's
summary.md, in markdown (the workload, the busiest stage's interference before any figure, health's line,
the run's table, diagnose's experiments, its verdict and advice, and the gain check), made from the demo's
results."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from perfcore.analysis.attribution import LABELS
from perfcore.analysis.command_results import DemoWorkload, DiagnoseResult, HealthResult
from perfcore.analysis.results import Interference
from perfcore.analysis.run_report import RunReport
from perfcore.analysis.units import fmt_ms, fmt_share, fmt_x
from perfcore.report.words import interference_detail, interference_sentence
from perfcore.report.words.advice import evidence_of, text_of
from perfcore.report.words.runs import undecided_words
from perfcore.report.words.verdict import gains_text, health_summary, verdict_long, verdict_short

__all__ = ["summary", "demo_markdown"]


def _run_of(run: Any) -> RunReport:
    """The typed run `run` names: itself, a run document (read as a run folder's run.json is), a run folder
    or its run.json, or a StepTimer's result so far."""
    if isinstance(run, RunReport):
        return run
    from perfcore.analysis.reader import parse_run, read_json
    from perfcore.errors import BadResultFile, UsageError

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
    sd = r.steady()
    out["step_ms_steady"] = sd.step_ms
    for lb in LABELS:
        out[f"{lb}_steady_share"] = sd.ms[lb] / sd.step_ms if sd.step_ms > 0 else 0.0
    out["overhead_ms"] = float(r.overhead.ms_per_step) if r.overhead is not None else 0.0
    out["overhead_share"] = float(r.overhead.fraction) if r.overhead is not None else 0.0
    if not numeric:
        out["bound"] = str(r.verdict.bound if r.verdict.decided or r.no_step is None else "none")
        out["verdict"] = verdict_short(r.verdict) if r.verdict.decided else undecided_words(r)
    return {f"{prefix}{k}": v for k, v in out.items()}


# -- the demo's summary.md ---------------------------------------------------------------------------


def busiest(h: HealthResult, run_doc: RunReport, d: DiagnoseResult) -> Interference | None:
    """The stage whose machine was busiest with other work, where any stage's was material."""
    found = [f for f in (h.interference, run_doc.interference, d.interference) if f is not None and f.material]
    return max(found, key=lambda f: f.others_cores or 0) if found else None


def demo_markdown(w: DemoWorkload, h: HealthResult, run_doc: RunReport, d: DiagnoseResult) -> str:
    """summary.md: the workload, the busiest stage's interference before any figure, health's line, the
    run's table, diagnose's experiments, its verdict and advice, and the gain check."""
    busy = busiest(h, run_doc, d)
    agreement = gains_text(run_doc.verdict, d.verdict)
    summary = [
        "# perfcore demo",
        "",
        f"Workload: {w.name} — {w.images} real JPEGs decoded with {w.decoder}, a small CNN, "
        f"batch {w.batch_size}, {w.num_workers} workers, on {w.device}.",
        "",
        *([f"**Interference: {interference_sentence(busy)}** ({interference_detail(busy)})", ""] if busy else []),
        "## Health",
        "",
        health_summary(h),
        "",
        "## Where each training step goes",
        "",
        "![breakdown](breakdown.png)",
        "",
        "| label | ms/step | share |",
        "|---|---|---|",
    ]
    for lb, v in run_doc.breakdown_ms.as_dict().items():
        summary.append(f"| {lb} | {fmt_ms(v)} | {fmt_share(run_doc.breakdown_fraction[lb])} |")
    summary += [
        "",
        "## Diagnosis",
        "",
        "![experiments](experiments.png)",
        "",
        "| experiment | step | samples/s | speedup |",
        "|---|---|---|---|",
    ]
    for e in d.experiments:
        summary.append(f"| {e.name} | {fmt_ms(e.step_ms)} | {e.samples_per_s:.0f} | {fmt_x(e.speedup)} |")
    summary += ["", f"**{verdict_long(d.verdict, lead=False)}**", ""]
    plan = run_doc.loader_plan
    summary += [f"- {text_of(r, plan)} (evidence: {evidence_of(r, plan)})" for r in run_doc.findings] + [""]
    if agreement:
        summary += [f"_{agreement[0].upper()}{agreement[1:]}._", ""]
    return "\n".join(summary)
