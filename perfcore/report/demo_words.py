"""The demo's words: summary.md, and what removing loading gains (the run's prediction beside
diagnose's measurement), made from the demo's documents."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.units import fmt_ms, fmt_share, fmt_x
from perfcore.report.advice_words import evidence_of, text_of
from perfcore.report.check_words import check_text
from perfcore.report.label_words import gain_words, interference_detail, interference_sentence

__all__ = ["gains_text", "demo_markdown", "render_demo"]


def gains_text(run: Mapping[str, Any], diag: Mapping[str, Any]) -> str:
    """What removing loading gains: run's prediction for a training step beside diagnose's measurement."""
    c = next((c for c in run.get("causes") or [] if c["label"] == "load"), None)
    g = (c or {}).get("expected_gain") or {}
    r = gain_words(g.get("speedup"), g.get("band")) or g.get("text")  # an old document: the words it kept
    check = next((c for c in diag.get("checks") or [] if c["experiment"].startswith("synthetic")), None)
    if not r:
        return ""
    return f"removing loading: {r} for a training step" + (f"; {check_text(check)}" if check else "")


def demo_markdown(  # noqa: PLR0913
    workload: Mapping[str, Any],
    h: Mapping[str, Any],
    run_doc: Mapping[str, Any],
    d: Mapping[str, Any],
    busy: Mapping[str, Any] | None,
    agreement: str,
) -> str:
    """summary.md: the workload, the busiest stage's interference before any figure, health's line, the
    run's table, diagnose's experiments, its verdict and advice, and the gain check."""
    w = workload
    summary = [
        "# perfcore demo",
        "",
        f"Workload: {w['name']} — {w['images']} real JPEGs decoded with {w['decoder']}, a small CNN, "
        f"batch {w['batch_size']}, {w['num_workers']} workers, on {w['device']}.",
        "",
        *([f"**Interference: {interference_sentence(busy)}** ({interference_detail(busy)})", ""] if busy else []),
        "## Health",
        "",
        h["plain_summary"],
        "",
        "## Where each training step goes",
        "",
        "![breakdown](breakdown.png)",
        "",
        "| label | ms/step | share |",
        "|---|---|---|",
    ]
    for lb, v in run_doc["breakdown_ms"].items():
        summary.append(f"| {lb} | {fmt_ms(v)} | {fmt_share(run_doc['breakdown_fraction'][lb])} |")
    summary += [
        "",
        "## Diagnosis",
        "",
        "![experiments](experiments.png)",
        "",
        "| experiment | step | samples/s | speedup |",
        "|---|---|---|---|",
    ]
    for e in d["experiments"]:
        summary.append(f"| {e['name']} | {fmt_ms(e['step_ms'])} | {e['samples_per_s']:.0f} | {fmt_x(e['speedup'])} |")
    summary += ["", f"**{d['verdict']['plain_summary']}**", ""]
    plan = run_doc.get("loader_plan")
    summary += [f"- {text_of(r, plan)} (evidence: {evidence_of(r, plan)})" for r in run_doc["recommendations"]] + [""]
    if agreement:
        summary += [f"_{agreement[0].upper()}{agreement[1:]}._", ""]
    return "\n".join(summary)


def render_demo(doc: Mapping[str, Any]) -> str:
    """The whole demo (--explain): health, the run's report without a second verdict line, diagnose with
    every check, and what removing loading gains, predicted beside measured."""
    from perfcore.report.experiments import render_diagnose, render_health
    from perfcore.report.terminal import render_text

    run, d = doc["run"], doc["diagnose"]
    agreement = gains_text(run["verdict"], d["verdict"])
    parts = [render_health(doc["health"]), render_text(run, verdict=False), render_diagnose(d)]
    return "\n\n".join(parts + ([agreement] if agreement else []) + [f"demo finished in {doc['elapsed_s']:.0f} s"])
