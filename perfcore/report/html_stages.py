"""report.html of the triage stages (health, diagnose, the demo's three; sweep's sections from
html_sweep): each document's own sections, drawn from its numbers, never its terminal text. compare's
page is html_compare's (named here too, where the CLI and older callers find it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfcore.analysis.command_results import DemoResult, DiagnoseResult, HealthResult, SweepResult
from perfcore.analysis.results import UNDECIDED, Verdict
from perfcore.report.charts import COLORS, stackbars
from perfcore.report.html_compare import render_compare_page, write_compare_report
from perfcore.report.html_parts import Body, dur, esc, num, page, pct, stack_bar, table_of_labels, tiles, verdict_card
from perfcore.report.html_run import links, run_sections
from perfcore.report.html_sweep import sweep_sections
from perfcore.report.words import check_text, readable_frame
from perfcore.report.words.findings import note_words
from perfcore.report.words.verdict import health_summary, heartbeat_meaning, level_word, preface, summary_words

__all__ = [
    "stage_page",
    "render_compare_page",
    "write_compare_report",
    "health_sections",
    "diagnose_sections",
    "sweep_sections",
]


def _health_words(doc: HealthResult) -> str:
    """Health's summary as its page says it: the interference sentence first when that is material."""
    return preface(health_summary(doc), doc.verdict.interference if doc.verdict is not None else None)


def health_sections(doc: HealthResult, body: Body, dom_id: str | None = "verdict") -> None:
    src = "GPU utilisation" if doc.busy_source == "gpu_util" else "compute share, no GPU"
    body.add(
        verdict_card(doc.verdict or UNDECIDED, sentence=_health_words(doc), dom_id=dom_id),
        tiles(
            [
                ("step", dur(doc.step_ms)),
                ("throughput", f"{float(doc.samples_per_s):,.0f} samples/s" if doc.samples_per_s else None),
                (
                    f"busy ({src})" if "," not in src else f"busy: {src}",
                    f"{pct(doc.busy_mean)} ± {pct(doc.busy_std)}",
                ),
                ("host CPU", f"{float(doc.cpu_percent):.0f}%" if doc.cpu_percent is not None else None),
                ("iterations", doc.steps),
                ("device", doc.device),
                ("workload", doc.workload),
            ]
        ),
    )
    if doc.breakdown_ms:
        body.add(
            "<h3>Where each iteration goes (next batch → forward → loss)</h3>",
            stack_bar(doc.breakdown_ms),
            # The iteration's own length beside its labels: without it every share read 0%.
            table_of_labels(doc.breakdown_ms, sum(float(v or 0) for v in doc.breakdown_ms.values())),
        )
    series = list(doc.busy_series)
    if len(series) > 1:
        spacing = float(doc.busy_spacing_s or 0) or None
        x = list(range(len(series)))
        body.add(
            body.chart(
                {
                    "kind": "timeline",
                    "id": "busy",
                    "x": x,
                    "x_end": len(series),
                    "unit": "%",
                    "y_label": "%",
                    "y_max": 100,
                    "height": 160,
                    "x_label": "sample" + (f" (every {spacing * 1e3:.0f} ms)" if spacing else ""),
                    "series": [
                        {
                            "label": src,
                            "values": [round(100 * float(v), 1) for v in series],
                            "color": COLORS["compute"],
                            "unit": "%",
                            "fill": True,
                        }
                    ],
                    "title": "Busy over the run",
                }
            )
        )
    if doc.heartbeat is not None:
        body.add(f"<p><b>heartbeat:</b> {esc(heartbeat_meaning(doc.heartbeat, str(doc.busy_source)))}</p>")
    if doc.next:
        body.add(f"<p>next: <code>{esc(doc.next)}</code></p>")


def diagnose_sections(doc: DiagnoseResult, body: Body, dom_id: str | None = "verdict") -> None:
    v = doc.verdict
    body.add(
        verdict_card(v, dom_id=dom_id),
        tiles(
            [
                ("predicted speedup", f"{float(doc.predicted_speedup):.2f}×" if doc.predicted_speedup else None),
                ("measured speedup", f"{float(doc.measured_speedup):.2f}×" if doc.measured_speedup else None),
                ("device", doc.device),
                ("workload", doc.workload),
            ]
        ),
    )
    exps = doc.experiments
    if exps:
        rows = []
        for x in exps:
            status = "OOM" if x.oom else (f"failed: {x.error}" if x.error else "ok")
            # The settings of an experiment that ran (one that could not start has none; an older document
            # kept no step count, but its settings).
            ran = x.steps is not None or x.batch_size is not None
            keys = ("batch_size", "num_workers", "pin_memory", "decoder", "synthetic") if ran else ()
            settings = ", ".join(f"{k}={getattr(x, k)}" for k in keys)
            rows.append(
                f"<tr><td><b>{esc(x.name)}</b><div class='muted'>{esc(settings)}</div></td>"
                f"<td class='n'>{num(x.step_ms)}</td><td class='n'>{num(x.samples_per_s, ',.0f')}</td>"
                f"<td class='n'>{pct(x.busy_mean)}</td><td class='n'>{num(x.cpu_percent, '.0f')}</td>"
                f"<td class='n'>{num(x.speedup)}×</td><td>{esc(status)}</td></tr>"
            )
        body.add(
            "<h2>Experiments</h2><table><tr><th>experiment</th><th class='n'>step ms</th><th class='n'>samples/s</th>"
            "<th class='n'>busy</th><th class='n'>CPU %</th><th class='n'>speedup</th><th>status</th></tr>"
            + "".join(rows)
            + "</table>"
        )
        ok = [x for x in exps if x.breakdown_ms]
        if ok:
            body.add(
                body.chart(
                    stackbars(
                        "experiments",
                        [x.name for x in ok],
                        [x.breakdown_ms for x in ok],
                        [f"{dur(x.step_ms)} · {num(x.speedup)}×" for x in ok],
                        "Mean step per experiment, split by label",
                    )
                )
            )
    if v.checks:
        rows = "".join(
            f"<tr><td>{esc(c.name)}</td><td>{esc(c.label)}</td>"
            f"<td class='n'>{num(c.predicted_speedup)}×</td><td class='n'>{num(c.measured_speedup)}×</td>"
            f"<td>{_agrees(c.agrees)}</td><td>{esc(check_text(c))}</td></tr>"
            for c in v.checks
        )
        body.add(
            "<h2>Predicted vs measured</h2><table><tr><th>experiment</th><th>cause</th><th class='n'>predicted</th>"
            "<th class='n'>measured</th><th>agrees</th><th>what it means</th></tr>" + rows + "</table>"
        )
    if doc.skipped:
        body.add(
            "<p class='muted'>skipped: "
            + "; ".join(f"{esc(s.name)} ({esc(note_words(s.reason))})" for s in doc.skipped)
            + "</p>"
        )
    p = doc.worker_profile
    if p != type(p)():
        head = (
            f"<h2>Inside __getitem__</h2><p>{dur(p.ms_per_item)} per item over {esc(p.items if p.items is not None else '?')} items"
            + (f", CPU/wall {float(p.cpu_to_wall):.2f}" if p.cpu_to_wall is not None else "")
            + "</p>"
        )
        if p.note:
            head += f"<p class='muted'>{esc(note_words(p.note))}</p>"
        if p.top:
            peak = max(float(r.self_ms_per_item or 0) for r in p.top) or 1.0
            rows = "".join(
                f"<tr><td><code>{esc(readable_frame(str(r.function or '')))}</code></td><td class='n'>{num(r.self_ms_per_item, '.3f')}</td>"
                f"<td class='n'>{num(r.total_ms_per_item, '.3f')}</td><td class='n'>{esc(r.calls if r.calls is not None else '')}</td>"
                f"<td><span class='hbar' style='background:{COLORS['load']};width:"
                f"{120 * float(r.self_ms_per_item or 0) / peak:.0f}px'></span></td></tr>"
                for r in p.top
            )
            head += (
                "<table><tr><th>function</th><th class='n'>self ms/item</th><th class='n'>total ms/item</th>"
                f"<th class='n'>calls</th><th></th></tr>{rows}</table>"
            )
        body.add(head)


def _agrees(x: Any) -> str:
    return {True: "<b style='color:#1e7b3c'>yes</b>", False: "<b style='color:#b3261e'>no</b>"}.get(x, "inconclusive")


def _demo(folder: Path, doc: DemoResult, body: Body) -> None:
    from perfcore.report.reader import STEP_COLUMNS, read_csv

    run = doc.run
    body.add(verdict_card(run.verdict, sentence=summary_words(run.verdict)))
    # One decision for the whole demo: the run's attribution checked by diagnose's experiments.
    agree = f"one verdict: {_cause(run.verdict)}, the run's attribution checked by diagnose's experiments"
    body.add(tiles([("demo: names", _cause(run.verdict))]), f"<p><b>{esc(agree)}</b></p>")
    body.add("<div class='stage'><h2>1 · health: is the device busy?</h2>")
    health_sections(doc.health, body, dom_id=None)
    body.add("</div><div class='stage'><h2>2 · run: where each training step goes</h2>")
    steps = None
    if (folder / "steps.csv").is_file():
        try:
            steps = read_csv(folder / "steps.csv", STEP_COLUMNS)
        except Exception:  # a damaged table costs the charts, never the report
            steps = None
    run_sections(run, steps, body, dom_id=None)
    body.add("</div><div class='stage'><h2>3 · diagnose: experiments that test the cause</h2>")
    diagnose_sections(doc.diagnose, body, dom_id=None)
    body.add("</div>")


def _cause(v: Verdict) -> str:
    if v.named:
        c = v.named[0]
        return f"{c.bound} ({level_word(c.level or v.level)})"
    return "healthy, compute-bound" if v.healthy else str(v.bound or "-")


def _title(doc: Any, text: str) -> str:
    """The page's one sentence: the verdict's, else health's summary, else the terminal report's "best:" line."""
    v = doc.run.verdict if isinstance(doc, DemoResult) else getattr(doc, "verdict", None)
    if isinstance(v, Verdict) and v.decided:
        return summary_words(v)
    if isinstance(doc, HealthResult):
        return _health_words(doc)
    for line in text.splitlines():
        if line.startswith(("verdict:", "best:")):
            return line.split(":", 1)[1].strip() if line.startswith("verdict:") else line
    return "see the report below"


def stage_page(folder: Path, title: str, doc: Any, text: str, files: list[str]) -> str:
    """report.html of a health, diagnose, sweep or demo folder, from its result."""
    kind = title.replace("perfcore ", "")
    body = Body(kind)
    body.add(f"<h1>{esc(title)}</h1>")
    target = (doc.workload.name if doc.workload else "demo") if isinstance(doc, DemoResult) else doc.workload
    if target:
        body.add(f"<div class='sub'>target: {esc(target)}</div>")
    if isinstance(doc, DemoResult):
        _demo(Path(folder), doc, body)
    elif isinstance(doc, HealthResult):
        health_sections(doc, body)
    elif isinstance(doc, DiagnoseResult):
        diagnose_sections(doc, body)
    elif isinstance(doc, SweepResult):
        sweep_sections(doc, body)
    if files:
        body.add(f"<h2>Files</h2><p>{links(files)}</p>")
    return page(f"perfcore: {_title(doc, text)}", body)
