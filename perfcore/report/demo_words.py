"""The demo's words: summary.md, and what removing loading gains (the run's prediction beside
diagnose's measurement), made from the demo's results."""

from __future__ import annotations

from perfcore.analysis.checks import Experiment
from perfcore.analysis.command_results import DemoResult, DemoWorkload, DiagnoseResult, HealthResult
from perfcore.analysis.results import Interference, Verdict
from perfcore.analysis.run_report import RunReport
from perfcore.analysis.units import fmt_ms, fmt_share, fmt_x
from perfcore.report.words import check_text, gain_words, interference_detail, interference_sentence
from perfcore.report.words.advice import evidence_of, text_of
from perfcore.report.words.verdict import health_summary, plain_words

__all__ = ["gains_text", "demo_markdown", "render_demo"]


def gains_text(run: Verdict, diag: Verdict) -> str:
    """What removing loading gains: run's prediction for a training step beside diagnose's measurement."""
    c = next((c for c in run.named if c.label == "load"), None)
    r = gain_words(c.gain.speedup, c.gain.band) if c is not None else ""
    check = next((c for c in diag.checks if c.experiment is Experiment.SYNTHETIC), None)
    if not r:
        return ""
    return f"removing loading: {r} for a training step" + (f"; {check_text(check)}" if check else "")


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


def render_demo(doc: DemoResult) -> str:
    """The whole demo (--explain): health, the run's report without a second verdict line, diagnose with
    every check, and what removing loading gains, predicted beside measured."""
    from perfcore.report.experiments import render_diagnose, render_health
    from perfcore.report.terminal import render_text

    run, d = doc.run, doc.diagnose
    agreement = gains_text(run.verdict, d.verdict)
    parts = [render_health(doc.health), render_text(run, verdict=False), render_diagnose(d)]
    return "\n\n".join(parts + ([agreement] if agreement else []) + [f"demo finished in {doc.elapsed_s:.0f} s"])
