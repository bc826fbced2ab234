"""report.html of the triage stages (health, diagnose, the demo's three; sweep's sections from
html_sweep): each document's own sections, drawn from its numbers, never its terminal text. compare's
page is html_compare's (named here too, where the CLI and older callers find it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfcore.report.charts import COLORS, stackbars
from perfcore.report.check_words import check_text, readable_frame
from perfcore.report.diagnose_words import note_words
from perfcore.report.html_run import headline, links, run_sections
from perfcore.report.html_compare import render_compare_page, write_compare_report
from perfcore.report.html_parts import Body, breakdown_table, esc, num, dur, page, pct, stack_bar, tiles, verdict_card
from perfcore.report.html_sweep import sweep_sections
from perfcore.report.verdict_words import level_word

__all__ = [
    "stage_page",
    "render_compare_page",
    "write_compare_report",
    "health_sections",
    "diagnose_sections",
    "sweep_sections",
]


def health_sections(doc: dict[str, Any], body: Body, dom_id: str | None = "verdict") -> None:
    src = "GPU utilisation" if doc.get("busy_source") == "gpu_util" else "compute share, no GPU"
    body.add(
        verdict_card(doc, sentence=doc.get("summary") or headline(doc), dom_id=dom_id),
        tiles(
            [
                ("step", dur(doc.get("step_ms"))),
                ("throughput", f"{float(doc['samples_per_s']):,.0f} samples/s" if doc.get("samples_per_s") else None),
                (
                    f"busy ({src})" if "," not in src else f"busy: {src}",
                    f"{pct(doc.get('busy_mean'))} ± {pct(doc.get('busy_std'))}",
                ),
                ("host CPU", f"{float(doc['cpu_percent']):.0f}%" if doc.get("cpu_percent") is not None else None),
                ("iterations", doc.get("steps")),
                ("device", doc.get("device")),
                ("workload", doc.get("workload")),
            ]
        ),
    )
    if doc.get("breakdown_ms"):
        body.add(
            "<h3>Where each iteration goes (next batch → forward → loss)</h3>",
            stack_bar(doc["breakdown_ms"]),
            # The iteration's own length beside its labels: without it every share read 0%.
            breakdown_table(
                {
                    "breakdown_ms": doc["breakdown_ms"],
                    "step_ms": sum(float(v or 0) for v in doc["breakdown_ms"].values()),
                }
            ),
        )
    series = doc.get("busy_series")
    if isinstance(series, list) and len(series) > 1:
        spacing = float(doc.get("busy_spacing_s") or 0) or None
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
    hb = doc.get("heartbeat") or {}
    if hb.get("meaning"):
        body.add(f"<p><b>heartbeat:</b> {esc(hb['meaning'])}</p>")
    if doc.get("next"):
        body.add(f"<p>next: <code>{esc(doc['next'])}</code></p>")


def diagnose_sections(doc: dict[str, Any], body: Body, dom_id: str | None = "verdict") -> None:
    v = doc.get("verdict") or {}
    body.add(
        verdict_card(doc, dom_id=dom_id),
        tiles(
            [
                (
                    "predicted speedup",
                    f"{float(doc['predicted_speedup']):.2f}×" if doc.get("predicted_speedup") else None,
                ),
                ("measured speedup", f"{float(doc['measured_speedup']):.2f}×" if doc.get("measured_speedup") else None),
                ("device", doc.get("device")),
                ("workload", doc.get("workload")),
            ]
        ),
    )
    exps = [x for x in doc.get("experiments") or [] if isinstance(x, dict)]
    if exps:
        rows = []
        for x in exps:
            status = "OOM" if x.get("oom") else (f"failed: {x['error']}" if x.get("error") else "ok")
            settings = ", ".join(
                f"{k}={x[k]}" for k in ("batch_size", "num_workers", "pin_memory", "decoder", "synthetic") if k in x
            )
            rows.append(
                f"<tr><td><b>{esc(x.get('name'))}</b><div class='muted'>{esc(settings)}</div></td>"
                f"<td class='n'>{num(x.get('step_ms'))}</td><td class='n'>{num(x.get('samples_per_s'), ',.0f')}</td>"
                f"<td class='n'>{pct(x.get('busy_mean'))}</td><td class='n'>{num(x.get('cpu_percent'), '.0f')}</td>"
                f"<td class='n'>{num(x.get('speedup'))}×</td><td>{esc(status)}</td></tr>"
            )
        body.add(
            "<h2>Experiments</h2><table><tr><th>experiment</th><th class='n'>step ms</th><th class='n'>samples/s</th>"
            "<th class='n'>busy</th><th class='n'>CPU %</th><th class='n'>speedup</th><th>status</th></tr>"
            + "".join(rows)
            + "</table>"
        )
        ok = [x for x in exps if x.get("breakdown_ms")]
        if ok:
            body.add(
                body.chart(
                    stackbars(
                        "experiments",
                        [x["name"] for x in ok],
                        [x["breakdown_ms"] for x in ok],
                        [f"{dur(x.get('step_ms'))} · {num(x.get('speedup'))}×" for x in ok],
                        "Mean step per experiment, split by label",
                    )
                )
            )
    checks = [c for c in v.get("checks") or [] if isinstance(c, dict)]
    if checks:
        rows = "".join(
            f"<tr><td>{esc(c.get('experiment'))}</td><td>{esc(c.get('label', ''))}</td>"
            f"<td class='n'>{num(c.get('predicted_speedup'))}×</td><td class='n'>{num(c.get('measured_speedup'))}×</td>"
            f"<td>{_agrees(c.get('agrees'))}</td><td>{esc(check_text(c))}</td></tr>"
            for c in checks
        )
        body.add(
            "<h2>Predicted vs measured</h2><table><tr><th>experiment</th><th>cause</th><th class='n'>predicted</th>"
            "<th class='n'>measured</th><th>agrees</th><th>what it means</th></tr>" + rows + "</table>"
        )
    skipped = doc.get("skipped") or []
    if skipped:
        body.add(
            "<p class='muted'>skipped: "
            + "; ".join(f"{esc(s.get('name'))} ({esc(note_words(s.get('reason')))})" for s in skipped)
            + "</p>"
        )
    p = doc.get("worker_profile") or {}
    if p:
        top = [r for r in p.get("top") or [] if isinstance(r, dict)]
        head = (
            f"<h2>Inside __getitem__</h2><p>{dur(p.get('ms_per_item'))} per item over {esc(p.get('items', '?'))} items"
            + (f", CPU/wall {float(p['cpu_to_wall']):.2f}" if p.get("cpu_to_wall") is not None else "")
            + "</p>"
        )
        if p.get("note"):
            head += f"<p class='muted'>{esc(note_words(p['note']))}</p>"
        if top:
            peak = max(float(r.get("self_ms_per_item") or 0) for r in top) or 1.0
            rows = "".join(
                f"<tr><td><code>{esc(readable_frame(str(r.get('function') or '')))}</code></td><td class='n'>{num(r.get('self_ms_per_item'), '.3f')}</td>"
                f"<td class='n'>{num(r.get('total_ms_per_item'), '.3f')}</td><td class='n'>{esc(r.get('calls', ''))}</td>"
                f"<td><span class='hbar' style='background:{COLORS['load']};width:"
                f"{120 * float(r.get('self_ms_per_item') or 0) / peak:.0f}px'></span></td></tr>"
                for r in top
            )
            head += (
                "<table><tr><th>function</th><th class='n'>self ms/item</th><th class='n'>total ms/item</th>"
                f"<th class='n'>calls</th><th></th></tr>{rows}</table>"
            )
        body.add(head)


def _agrees(x: Any) -> str:
    return {True: "<b style='color:#1e7b3c'>yes</b>", False: "<b style='color:#b3261e'>no</b>"}.get(x, "inconclusive")


def _demo(folder: Path, doc: dict[str, Any], body: Body) -> None:
    from perfcore.report.reader import STEP_COLUMNS, read_csv  # noqa: F401

    run = doc.get("run") or {}
    body.add(verdict_card(run, sentence=headline(doc)))
    bounds = doc.get("bounds") or {}
    stages = [("health", doc.get("health") or {}), ("run", run), ("diagnose", doc.get("diagnose") or {})]
    if "health" not in bounds:
        # One decision for the whole demo: the run's attribution checked by diagnose's experiments.
        agree = f"one verdict: {_cause(run)}, the run's attribution checked by diagnose's experiments"
        stages = [("demo", run)]
    else:  # a demo document from before the one decision: each stage decided its own
        agree = (
            f"all three stages name the same cause: {bounds.get('run')}"
            if doc.get("agree")
            else "the stages differ: "
            + ", ".join(f"{k} {v}" for k, v in bounds.items())
            + " (diagnose measured it with synthetic data: that is the firmest)"
        )
    body.add(tiles([(f"{k}: names", _cause(d)) for k, d in stages]), f"<p><b>{esc(agree)}</b></p>")
    body.add("<div class='stage'><h2>1 · health: is the device busy?</h2>")
    health_sections(doc.get("health") or {}, body, dom_id=None)
    body.add("</div><div class='stage'><h2>2 · run: where each training step goes</h2>")
    steps = None
    if (folder / "steps.csv").is_file():
        try:
            steps = read_csv(folder / "steps.csv", STEP_COLUMNS)
        except Exception:  # a damaged table costs the charts, never the report
            steps = None
    run_sections(run, steps, body, dom_id=None)
    body.add("</div><div class='stage'><h2>3 · diagnose: experiments that test the cause</h2>")
    diagnose_sections(doc.get("diagnose") or {}, body, dom_id=None)
    body.add("</div>")


def _cause(doc: dict[str, Any]) -> str:
    v = doc.get("verdict") or {}
    c = (v.get("causes") or [{}])[0]
    if c.get("bound"):
        return f"{c['bound']} ({level_word(c.get('level', v.get('level', '')))})"
    return "healthy, compute-bound" if v.get("healthy") else str(v.get("bound") or "-")


def stage_page(folder: Path, title: str, doc: dict[str, Any], text: str, files: list[str]) -> str:
    schema = str(doc.get("schema") or "")
    kind = title.replace("perfcore ", "")
    body = Body(kind)
    body.add(f"<h1>{esc(title)}</h1>")
    target = doc.get("workload") or (doc.get("run") or {}).get("workload")
    if target:
        body.add(f"<div class='sub'>target: {esc(target)}</div>")
    if schema.startswith("perfcore.experiments.demo") or kind == "demo":
        _demo(Path(folder), doc, body)
    elif schema.startswith("perfcore.health"):
        health_sections(doc, body)
    elif schema.startswith("perfcore.diagnose"):
        diagnose_sections(doc, body)
    elif schema.startswith("perfcore.sweep") or "configs" in doc:
        sweep_sections(doc, body)
    else:  # a document this page does not know: its headline, and the text in a box that wraps
        body.add(
            verdict_card(doc, sentence=headline(doc, text)),
            f"<pre style='white-space:pre-wrap;font-size:.85em'>{esc(text)}</pre>",
        )
    if files:
        body.add(f"<h2>Files</h2><p>{links(files)}</p>")
    return page(f"perfcore: {headline(doc, text)}", body)
