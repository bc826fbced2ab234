"""The markdown renderer: the demo's summary.md (the workload, the busiest stage's interference before any
figure, health's line, the run's table, diagnose's experiments, its verdict and advice, and the gain
check), made from the demo's results."""

from __future__ import annotations

from perfcore.analysis.command_results import DemoWorkload, DiagnoseResult, HealthResult
from perfcore.analysis.results import Interference
from perfcore.analysis.run_report import RunReport
from perfcore.analysis.units import fmt_ms, fmt_share, fmt_x
from perfcore.report.words import interference_detail, interference_sentence
from perfcore.report.words.advice import evidence_of, text_of
from perfcore.report.words.verdict import gains_text, health_summary, plain_words

__all__ = ["demo_markdown"]


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
    summary += ["", f"**{plain_words(d.verdict)}**", ""]
    plan = run_doc.loader_plan
    summary += [f"- {text_of(r, plan)} (evidence: {evidence_of(r, plan)})" for r in run_doc.findings] + [""]
    if agreement:
        summary += [f"_{agreement[0].upper()}{agreement[1:]}._", ""]
    return "\n".join(summary)
