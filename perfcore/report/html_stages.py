"""report.html of the triage stages (health, diagnose, sweep, the demo's three) and of compare: each
document's own sections, drawn from its numbers, never its terminal text."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from perfcore.analysis.attribution import LABELS
from perfcore.report.charts import COLORS, stackbars
from perfcore.report.html import headline, links, run_sections
from perfcore.report.html_parts import Body, breakdown_table, e, f, ms, page, stack_bar, tiles, verdict_card

__all__ = [
    "stage_page",
    "render_compare_page",
    "write_compare_report",
    "health_sections",
    "diagnose_sections",
    "sweep_sections",
]


def _pct(x: Any) -> str:
    try:
        return f"{100 * float(x):.0f}%"
    except (TypeError, ValueError):
        return "-"


def health_sections(doc: dict[str, Any], body: Body, dom_id: str | None = "verdict") -> None:
    src = "GPU utilisation" if doc.get("busy_source") == "gpu_util" else "compute share, no GPU"
    body.add(
        verdict_card(doc, sentence=doc.get("summary") or headline(doc), dom_id=dom_id),
        tiles(
            [
                ("step", ms(doc.get("step_ms"))),
                ("throughput", f"{float(doc['samples_per_s']):,.0f} samples/s" if doc.get("samples_per_s") else None),
                (
                    f"busy ({src})" if "," not in src else f"busy: {src}",
                    f"{_pct(doc.get('busy_mean'))} ± {_pct(doc.get('busy_std'))}",
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
            breakdown_table(
                {"breakdown_ms": doc["breakdown_ms"], "breakdown_fraction": _fractions(doc["breakdown_ms"])}
            ),
        )
    row = doc.get("_row") or {}
    series = row.get("busy_series")
    if series is not None and len(series) > 1:
        spacing = float(row.get("busy_spacing_s") or 0) or None
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
        body.add(f"<p><b>heartbeat:</b> {e(hb['meaning'])}</p>")
    if doc.get("next"):
        body.add(f"<p>next: <code>{e(doc['next'])}</code></p>")


def _fractions(bd: dict[str, float]) -> dict[str, float]:
    total = sum(float(v or 0) for v in bd.values()) or 1.0
    return {k: float(v or 0) / total for k, v in bd.items()}


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
                f"<tr><td><b>{e(x.get('name'))}</b><div class='muted'>{e(settings)}</div></td>"
                f"<td class='n'>{f(x.get('step_ms'))}</td><td class='n'>{f(x.get('samples_per_s'), ',.0f')}</td>"
                f"<td class='n'>{_pct(x.get('busy_mean'))}</td><td class='n'>{f(x.get('cpu_percent'), '.0f')}</td>"
                f"<td class='n'>{f(x.get('speedup'))}×</td><td>{e(status)}</td></tr>"
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
                        [f"{ms(x.get('step_ms'))} · {f(x.get('speedup'))}×" for x in ok],
                        "Mean step per experiment, split by label",
                    )
                )
            )
    checks = [c for c in v.get("checks") or [] if isinstance(c, dict)]
    if checks:
        rows = "".join(
            f"<tr><td>{e(c.get('experiment'))}</td><td>{e(c.get('label', ''))}</td>"
            f"<td class='n'>{f(c.get('predicted_speedup'))}×</td><td class='n'>{f(c.get('measured_speedup'))}×</td>"
            f"<td>{_agrees(c.get('agrees'))}</td><td>{e(c.get('sentence', ''))}</td></tr>"
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
            + "; ".join(f"{e(s.get('name'))} ({e(s.get('reason'))})" for s in skipped)
            + "</p>"
        )
    p = doc.get("worker_profile") or {}
    if p:
        top = [r for r in p.get("top") or [] if isinstance(r, dict)]
        head = (
            f"<h2>Inside __getitem__</h2><p>{ms(p.get('ms_per_item'))} per item over {e(p.get('items', '?'))} items"
            + (f", CPU/wall {float(p['cpu_to_wall']):.2f}" if p.get("cpu_to_wall") is not None else "")
            + "</p>"
        )
        if p.get("note"):
            head += f"<p class='muted'>{e(p['note'])}</p>"
        if top:
            peak = max(float(r.get("self_ms_per_item") or 0) for r in top) or 1.0
            rows = "".join(
                f"<tr><td><code>{e(r.get('function'))}</code></td><td class='n'>{f(r.get('self_ms_per_item'), '.3f')}</td>"
                f"<td class='n'>{f(r.get('total_ms_per_item'), '.3f')}</td><td class='n'>{e(r.get('calls', ''))}</td>"
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


_KNEE = re.compile(r"batch (\d+): throughput stops improving at (\d+) worker")
_METRICS = [
    ("samples_per_s", "samples/s", "{:,.0f}", True),
    ("step_ms", "step ms", "{:.1f}", False),
    ("busy_mean", "busy", "{:.0%}", True),
    ("busy_std", "busy spread (std)", "{:.0%}", False),
]


def _pf(v: Any) -> int | None:
    """A prefetch factor as a key: None for none (pandas gives NaN, which equals nothing)."""
    return None if v is None or v != v else int(v)


def _color(t: float) -> str:
    """viridis-like ramp, t in [0, 1] (1 = best)."""
    stops = [(68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37)]
    t = min(max(t, 0.0), 1.0) * (len(stops) - 1)
    i = min(int(t), len(stops) - 2)
    a, b = stops[i], stops[i + 1]
    k = t - i
    return "#%02x%02x%02x" % tuple(int(a[j] + (b[j] - a[j]) * k) for j in range(3))


def sweep_sections(doc: dict[str, Any], body: Body, dom_id: str | None = "verdict") -> None:
    """A heatmap per metric (batch_size x num_workers, one per pin_memory/prefetch slice): the knee of
    each batch size outlined, OOM / crashed / infeasible cells marked, numbers on hover."""
    b = doc.get("best")
    best = (
        f"best: batch_size={b['batch_size']} num_workers={b['num_workers']} pin_memory={b['pin_memory']} "
        f"prefetch_factor={b['prefetch_factor']} -> {float(b['samples_per_s']):.0f} samples/s"
        if b
        else "best: none (no configuration measured fine)"
    )
    configs = pd.DataFrame([c for c in doc.get("configs") or [] if isinstance(c, dict)])
    body.add(
        f"<div class='verdict {'healthy' if b else 'critical'}'><div class='bound'>sweep of {e(doc.get('workload', ''))}"
        f"</div><div class='sentence'{f' id={dom_id!r}' if dom_id else ''}>{e(best)}</div></div>",
        tiles(
            [
                ("configurations", len(configs)),
                ("failed", doc.get("failed")),
                ("steps each", doc.get("steps")),
                ("took", f"{float(doc.get('elapsed_s') or 0):.0f} s"),
            ]
        ),
    )
    if doc.get("knees"):
        body.add("<h3>Knees</h3><ul>" + "".join(f"<li>{e(k)}</li>" for k in doc["knees"]) + "</ul>")
    if not len(configs):
        return
    knees = {(int(m.group(1)), int(m.group(2))) for m in (_KNEE.search(k) for k in doc.get("knees") or []) if m}
    c = configs.copy()
    c["status"] = c.get("status", pd.Series(["ok"] * len(c))).fillna("ok")
    if "oom" in c:
        c.loc[c["oom"].fillna(False).astype(bool), "status"] = "oom"
    c["prefetch_factor"] = c["prefetch_factor"].where(c["num_workers"] > 0, None) if "prefetch_factor" in c else None
    # Where a (batch, workers) knee holds, outline it in the slice that measured it best.
    best_slice = {}
    okc = c[c["status"] == "ok"]
    for (bs, nw), g in okc.groupby(["batch_size", "num_workers"]):
        r = g.loc[g["samples_per_s"].idxmax()]
        best_slice[(int(bs), int(nw))] = (bool(r["pin_memory"]), _pf(r["prefetch_factor"]))
    bss = sorted(int(x) for x in c["batch_size"].unique())
    nws = sorted(int(x) for x in c["num_workers"].unique())
    pfs = sorted({int(x) for x in c["prefetch_factor"].dropna().unique()}) or [None]
    slices = [(pin, pf) for pin in sorted(c["pin_memory"].unique()) for pf in pfs]
    body.add(
        "<h2>Heatmaps</h2><p class='muted'>Rows batch_size, columns num_workers; one map per pin_memory / "
        "prefetch_factor (num_workers=0 has no prefetch: shown in every map). Outlined: the knee (fewest workers "
        "within 5% of the batch size's best). Hatched: out of memory, crashed or infeasible.</p>"
    )
    for col, name, fmt, higher in _METRICS:
        if col not in c or not pd.to_numeric(c.loc[c["status"] == "ok", col], errors="coerce").notna().any():
            continue
        vals = pd.to_numeric(c.loc[c["status"] == "ok", col], errors="coerce").dropna()
        lo, hi = float(vals.min()), float(vals.max())
        maps = []
        for pin, pf in slices:
            cells = []
            for bs in bss:
                tds = []
                for nw in nws:
                    m = c[(c["batch_size"] == bs) & (c["num_workers"] == nw) & (c["pin_memory"] == pin)]
                    if nw > 0 and pf is not None:
                        m = m[m["prefetch_factor"] == pf]
                    if not len(m):
                        tds.append("<td class='cell' style='background:#fafafa'></td>")
                        continue
                    r = m.iloc[0]
                    tip = f"batch_size={bs} num_workers={nw} pin_memory={pin} prefetch_factor={pf if nw else '-'}: "
                    if r["status"] != "ok":
                        err = str(r.get("error") or "")[:120]
                        tds.append(
                            f"<td class='cell bad' data-tip='{e(tip + str(r['status']).upper() + (': ' + err if err else ''))}'>"
                            f"{e(str(r['status']).upper())}</td>"
                        )
                        continue
                    v = pd.to_numeric(pd.Series([r[col]]), errors="coerce").iloc[0]
                    if v != v:
                        tds.append("<td class='cell'>-</td>")
                        continue
                    t = (v - lo) / (hi - lo) if hi > lo else 1.0
                    t = t if higher else 1 - t
                    knee = (bs, nw) in knees and best_slice.get((bs, nw)) == (bool(pin), _pf(r["prefetch_factor"]))
                    more = (
                        f"{float(r['samples_per_s']):,.0f} samples/s, step {ms(r['step_ms'])}, busy {_pct(r.get('busy_mean'))}"
                        + (f", verdict {r['verdict']} ({r.get('verdict_level')})" if r.get("verdict") else "")
                        + (" · knee" if knee else "")
                    )
                    tds.append(
                        f"<td class='cell{' knee' if knee else ''}' style='background:{_color(t)};color:"
                        f"{'#000' if t > 0.55 else '#fff'}' data-tip='{e(tip + more)}'>{e(fmt.format(float(v)))}</td>"
                    )
                cells.append(f"<tr><th>{bs}</th>{''.join(tds)}</tr>")
            head = "".join(f"<th>{nw}</th>" for nw in nws)
            maps.append(
                f"<div><div class='title' style='font-weight:600;font-size:.9em'>{e(name)} · pin_memory={pin}"
                f"{f', prefetch_factor={pf}' if pf is not None else ''}</div><table class='heat'><tr><th class='muted'>"
                f"batch ╲ workers</th>{head}</tr>{''.join(cells)}</table></div>"
            )
        body.add(
            f"<h3>{e(name)} ({'higher' if higher else 'lower'} is better)</h3><div class='heats'>{''.join(maps)}</div>"
        )
    rows = "".join(
        f"<tr><td class='n'>{e(r['batch_size'])}</td><td class='n'>{e(r['num_workers'])}</td><td>{e(r['pin_memory'])}</td>"
        f"<td class='n'>{e(r['prefetch_factor'] if r['num_workers'] else '-')}</td><td>{e(str(r['status']).upper())}</td>"
        f"<td class='n'>{f(r.get('step_ms'))}</td><td class='n'>{f(r.get('samples_per_s'), ',.0f')}</td>"
        f"<td class='n'>{_pct(r.get('busy_mean')) if r['status'] == 'ok' else ''}</td>"
        f"<td>{e(r.get('verdict') or '')}{e(' (' + str(r.get('verdict_level')) + ')') if r.get('verdict') else ''}"
        f"{e(str(r.get('error') or '')[:100]) if r['status'] != 'ok' else ''}</td></tr>"
        for _, r in c.sort_values("samples_per_s", ascending=False, na_position="last").iterrows()
    )
    body.add(
        "<details><summary>every configuration</summary><table><tr><th class='n'>batch</th><th class='n'>workers</th>"
        "<th>pin</th><th class='n'>prefetch</th><th>status</th><th class='n'>step ms</th><th class='n'>samples/s</th>"
        f"<th class='n'>busy</th><th>verdict</th></tr>{rows}</table></details>"
    )


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
    body.add(tiles([(f"{k}: names", _cause(d)) for k, d in stages]), f"<p><b>{e(agree)}</b></p>")
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
        return f"{c['bound']} ({c.get('level', v.get('level', ''))})"
    return "healthy, compute-bound" if v.get("healthy") else str(v.get("bound") or "-")


def stage_page(folder: Path, title: str, doc: dict[str, Any], text: str, files: list[str]) -> str:
    schema = str(doc.get("schema") or "")
    kind = title.replace("perfcore ", "")
    body = Body(kind)
    body.add(f"<h1>{e(title)}</h1>")
    target = doc.get("workload") or (doc.get("run") or {}).get("workload")
    if target:
        body.add(f"<div class='sub'>target: {e(target)}</div>")
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
            f"<pre style='white-space:pre-wrap;font-size:.85em'>{e(text)}</pre>",
        )
    if files:
        body.add(f"<h2>Files</h2><p>{links(files)}</p>")
    return page(f"perfcore: {headline(doc, text)}", body)


def render_compare_page(doc: dict[str, Any], names: tuple[str, str] = ("A", "B")) -> str:
    """Two runs side by side: their verdicts, what changed per label and per kernel category, by how much."""
    a, b = doc.get("a") or {}, doc.get("b") or {}
    body = Body("compare")
    pct = float(doc.get("step_time_change_pct") or 0)
    body.add(
        "<h1>perfcore compare</h1>",
        f"<div class='sub'>A: {e(names[0])} · B: {e(names[1])}</div>",
        f"<div class='verdict {'critical' if pct > 5 else 'healthy' if pct < -5 else ''}'><div class='bound'>"
        f"step time {ms(a.get('step_ms'))} → {ms(b.get('step_ms'))} ({pct:+.1f}%, speedup "
        f"{float(doc.get('speedup') or 0):.2f}×)</div><div class='sentence' id='verdict'>"
        f"{e((doc.get('verdict_change') or {}).get('sentence', ''))}</div></div>",
    )
    cards = "".join(
        f"<div><h3>{k}: {e(n)}</h3>{tiles([('step', ms(r.get('step_ms'))), ('device', r.get('device')), ('bound', r.get('bound')), ('level', r.get('level'))])}"
        f"<p>{e(r.get('verdict', ''))}</p></div>"
        for k, n, r in (("A", names[0], a), ("B", names[1], b))
    )
    body.add(f"<div class='run-grid' style='grid-template-columns:1fr 1fr'>{cards}</div>")
    labels = doc.get("labels") or {}
    if labels:

        def row(name: str, v: dict[str, float], chip: str = "") -> str:
            d = float(v.get("delta_ms") or 0)
            rel = f"{100 * d / v['a_ms']:+.0f}%" if v.get("a_ms") else ""
            cls = "delta-up" if d > 0 else "delta-down" if d < 0 else ""
            return (
                f"<tr><td>{chip}{e(name)}</td><td class='n'>{f(v.get('a_ms'))}</td><td class='n'>{f(v.get('b_ms'))}</td>"
                f"<td class='n {cls}'>{d:+.2f}</td><td class='n {cls}'>{rel}</td></tr>"
            )

        head = (
            "<tr><th></th><th class='n'>A ms</th><th class='n'>B ms</th><th class='n'>change ms</th>"
            "<th class='n'>change</th></tr>"
        )
        body.add(
            "<h2>What changed, per label (ms per step)</h2><table>"
            + head
            + "".join(
                row(lb, labels[lb], f"<i class='pc-chip' style='background:{COLORS[lb]};margin-left:0'></i>")
                for lb in LABELS
                if lb in labels
            )
            + "</table>"
        )
        body.add(
            body.chart(
                stackbars(
                    "ab",
                    [f"A: {names[0]}"[:40], f"B: {names[1]}"[:40]],
                    [{lb: v["a_ms"] for lb, v in labels.items()}, {lb: v["b_ms"] for lb, v in labels.items()}],
                    [ms(a.get("step_ms")), ms(b.get("step_ms"))],
                    "A and B, mean step split by label",
                    height=200,
                )
            )
        )
        cats = doc.get("kernel_categories") or {}
        if cats:
            body.add(
                "<h2>Kernel categories (ms per step)</h2><table>"
                + head
                + "".join(row(c, v) for c, v in cats.items())
                + "</table>"
            )
    return page(f"perfcore compare: {pct:+.1f}%", body)


def write_compare_report(path: Path, doc: dict[str, Any], names: tuple[str, str] = ("A", "B")) -> Path:
    """compare's page at `path` (written atomically): for `perfcore compare A B --html PATH`."""
    from perfcore.report import jsonio

    return jsonio.write_text(Path(path), render_compare_page(doc, names))
