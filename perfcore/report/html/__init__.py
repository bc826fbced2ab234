"""perfcore's HTML renderer: report.html of a run folder (the page itself is html.run's) and of the
experiment folders, and a folder's report inline in a notebook. Every page is one offline file (CSS, the
chart library and the chart data inline); its pieces are html.parts'. The experiment folders' pages are
this module's: health's and diagnose's sections, the demo's page (theirs with the run's sections), drawn
from each document's numbers, never its terminal text; a sweep's heatmap per metric over batch_size x
num_workers (one per pin_memory / prefetch slice, each batch size's knee outlined, failed cells marked,
the table beside); and compare's page, two runs side by side, their verdicts and what changed per label
and per kernel category, by how much. The run page's names are re-exported here, where callers and
users have always imported them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from perfcore.analysis.attribution import LABELS
from perfcore.analysis.command_results import DemoResult, DiagnoseResult, HealthResult, SweepResult
from perfcore.analysis.compare import Comparison, Delta
from perfcore.analysis.results import UNDECIDED, Verdict
from perfcore.analysis.run_report import RunReport
from perfcore.analysis.status import Change
from perfcore.report.charts import COLORS, stackbars
from perfcore.report.html.parts import (
    Body,
    breakdown_svg,
    dur,
    esc,
    links,
    num,
    page,
    pct,
    stack_bar,
    table_of_labels,
    tiles,
    verdict_card,
)
from perfcore.report.html.run import render_html, render_report, run_sections
from perfcore.report.words import check_text, level_word, readable_frame
from perfcore.report.words.findings import note_words
from perfcore.report.words.runs import config_failure, knee_text
from perfcore.report.words.verdict import (
    card_words,
    change_sentence,
    health_sentence,
    heartbeat_meaning,
    step_words,
    verdict_long,
)

__all__ = [
    "render_html",
    "render_report",
    "write_report",
    "write_folder_report",
    "breakdown_svg",
    "open_report",
    "links",
    "run_sections",
    "stage_page",
    "health_sections",
    "diagnose_sections",
    "sweep_sections",
    "render_compare_page",
    "write_compare_report",
]


class _Shown:
    """An HTML body that Jupyter and Colab display inline."""

    def __init__(self, body: str):
        self.body = body

    def _repr_html_(self) -> str:
        return self.body


def open_report(folder: str | Path) -> _Shown:
    """A perfcore folder's report to show inline in a notebook (`open_report("runs/x")` as a cell's last
    line), charts and all, rendered here from the folder's validated documents. The folder's own
    report.html is never shown: a notebook trusts its output, and a folder from elsewhere could hold
    any script there."""
    from perfcore.analysis.reader import load_run, stage_document

    folder = Path(folder)
    if (folder / "run.json").exists() or (folder / "parts").is_dir():
        doc, steps = load_run(folder)
        return _Shown(render_html(doc, steps))
    found = stage_document(folder)
    if found:
        name, doc = found
        text = stage_page(folder, f"perfcore {name.split('.')[0]}", doc, "", [])
        start, end = text.find("<div class='perfcore'"), text.rfind("</body>")
        return _Shown(text[start:end])
    return _Shown(render_html(*load_run(folder)))  # says in one line why this is not a run folder


def write_report(folder: Path, r: RunReport, steps: pd.DataFrame | None = None) -> Path:
    """report.html in a run folder (replaced atomically)."""
    from perfcore import jsonio

    return jsonio.write_text(Path(folder) / "report.html", render_report(r, steps))


def write_folder_report(folder: Path, title: str, doc: Any, text: str, files: Iterable[str]) -> Path:
    """report.html for demo / health / diagnose / sweep folders: each stage's own sections (the
    terminal text is not repeated), and links to the folder's files."""
    from perfcore import jsonio

    files = [x for x in files if x != "report.html"]
    return jsonio.write_text(Path(folder) / "report.html", stage_page(Path(folder), title, doc, text, files))


def _demo(folder: Path, doc: DemoResult, body: Body) -> None:
    from perfcore.analysis.reader import STEP_COLUMNS, read_csv

    run = doc.run
    said = card_words(run.verdict)
    body.add(verdict_card(run.verdict, said))
    # One decision for the whole demo: the run's attribution checked by diagnose's experiments.
    agree = f"one verdict: {said[0]}, the run's attribution checked by diagnose's experiments"
    body.add(tiles([("demo: names", said[0])]), f"<p><b>{esc(agree)}</b></p>")
    body.add("<div class='stage'><h2>1 · health: is the device busy?</h2>")
    health_sections(doc.health, body, dom_id=None, own_verdict=False)
    body.add("</div><div class='stage'><h2>2 · run: where each training step goes</h2>")
    steps = None
    if (folder / "steps.csv").is_file():
        try:
            steps = read_csv(folder / "steps.csv", STEP_COLUMNS)
        except Exception:  # a damaged table costs the charts, never the report
            steps = None
    # The page's verdict is the card above: the stages' sections leave theirs out, so it is said once.
    run_sections(run, steps, body, dom_id=None, card=False)
    body.add("</div><div class='stage'><h2>3 · diagnose: experiments that test the cause</h2>")
    diagnose_sections(doc.diagnose, body, dom_id=None, card=False)
    body.add("</div>")


def _title(doc: Any, text: str) -> str:
    """The page's one sentence: the verdict's, else health's summary, else the terminal report's "best:" line."""
    v = doc.run.verdict if isinstance(doc, DemoResult) else getattr(doc, "verdict", None)
    if isinstance(v, Verdict) and v.decided:
        return verdict_long(v)
    if isinstance(doc, HealthResult):
        return health_sentence(doc)
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


def health_sections(doc: HealthResult, body: Body, dom_id: str | None = "verdict", own_verdict: bool = True) -> None:
    """Health's sections; own_verdict=False (the demo's page, whose verdict is the run's) heads them with
    health's measurement only."""
    src = "GPU utilisation" if doc.busy_source == "gpu_util" else "compute share, no GPU"
    shown = (doc.verdict or UNDECIDED) if own_verdict else UNDECIDED
    body.add(
        verdict_card(shown, card_words(shown, health_sentence(doc)), dom_id),
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


def diagnose_sections(doc: DiagnoseResult, body: Body, dom_id: str | None = "verdict", card: bool = True) -> None:
    v = doc.verdict
    body.add(
        verdict_card(v, card_words(v), dom_id) if card else "",
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


def _knee_cell(k: dict[str, Any]) -> tuple[int, int] | None:
    """(batch_size, workers) of a knee."""
    try:
        return int(k["batch_size"]), int(k["workers"])
    except (KeyError, TypeError, ValueError):
        return None


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


def sweep_sections(doc: SweepResult, body: Body, dom_id: str | None = "verdict") -> None:
    """A heatmap per metric (batch_size x num_workers, one per pin_memory/prefetch slice): the knee of
    each batch size outlined, OOM / crashed / infeasible cells marked, numbers on hover."""
    b = doc.best
    best = (
        f"best: batch_size={b['batch_size']} num_workers={b['num_workers']} pin_memory={b['pin_memory']} "
        f"prefetch_factor={b['prefetch_factor']} -> {float(b['samples_per_s']):.0f} samples/s"
        if b
        else "best: none (no configuration measured fine)"
    )
    configs = pd.DataFrame(list(doc.configs))
    body.add(
        f"<div class='verdict {'healthy' if b else 'critical'}'><div class='bound'>sweep of {esc(doc.workload)}"
        f"</div><div class='sentence'{f' id={dom_id!r}' if dom_id else ''}>{esc(best)}</div></div>",
        tiles(
            [
                ("configurations", len(configs)),
                ("failed", doc.failed),
                ("steps each", doc.steps),
                ("took", f"{float(doc.elapsed_s or 0):.0f} s"),
            ]
        ),
    )
    if doc.knees:
        body.add("<h3>Knees</h3><ul>" + "".join(f"<li>{esc(knee_text(k))}</li>" for k in doc.knees) + "</ul>")
    if not len(configs):
        return
    knees = {_knee_cell(k) for k in doc.knees} - {None}
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
                        err = config_failure(r)[:120]
                        tds.append(
                            f"<td class='cell bad' data-tip='{esc(tip + str(r['status']).upper() + (': ' + err if err else ''))}'>"
                            f"{esc(str(r['status']).upper())}</td>"
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
                        f"{float(r['samples_per_s']):,.0f} samples/s, step {dur(r['step_ms'])}, busy {pct(r.get('busy_mean'))}"
                        + (
                            f", verdict {r['verdict']} ({level_word(r.get('verdict_level'))})"
                            if r.get("verdict")
                            else ""
                        )
                        + (" · knee" if knee else "")
                    )
                    tds.append(
                        f"<td class='cell{' knee' if knee else ''}' style='background:{_color(t)};color:"
                        f"{'#000' if t > 0.55 else '#fff'}' data-tip='{esc(tip + more)}'>{esc(fmt.format(float(v)))}</td>"
                    )
                cells.append(f"<tr><th>{bs}</th>{''.join(tds)}</tr>")
            head = "".join(f"<th>{nw}</th>" for nw in nws)
            maps.append(
                f"<div><div class='title' style='font-weight:600;font-size:.9em'>{esc(name)} · pin_memory={pin}"
                f"{f', prefetch_factor={pf}' if pf is not None else ''}</div><table class='heat'><tr><th class='muted'>"
                f"batch ╲ workers</th>{head}</tr>{''.join(cells)}</table></div>"
            )
        body.add(
            f"<h3>{esc(name)} ({'higher' if higher else 'lower'} is better)</h3><div class='heats'>{''.join(maps)}</div>"
        )
    rows = "".join(
        f"<tr><td class='n'>{esc(r['batch_size'])}</td><td class='n'>{esc(r['num_workers'])}</td><td>{esc(r['pin_memory'])}</td>"
        f"<td class='n'>{esc(r['prefetch_factor'] if r['num_workers'] else '-')}</td><td>{esc(str(r['status']).upper())}</td>"
        f"<td class='n'>{num(r.get('step_ms'))}</td><td class='n'>{num(r.get('samples_per_s'), ',.0f')}</td>"
        f"<td class='n'>{pct(r.get('busy_mean')) if r['status'] == 'ok' else ''}</td>"
        f"<td>{esc(r.get('verdict') or '')}{esc(' (' + level_word(r.get('verdict_level')) + ')') if r.get('verdict') else ''}"
        f"{esc(str(r.get('error') or '')[:100]) if r['status'] != 'ok' else ''}</td></tr>"
        for _, r in c.sort_values("samples_per_s", ascending=False, na_position="last").iterrows()
    )
    body.add(
        "<details><summary>every configuration</summary><table><tr><th class='n'>batch</th><th class='n'>workers</th>"
        "<th>pin</th><th class='n'>prefetch</th><th>status</th><th class='n'>step ms</th><th class='n'>samples/s</th>"
        f"<th class='n'>busy</th><th>verdict</th></tr>{rows}</table></details>"
    )


def render_compare_page(doc: Comparison, names: tuple[str, str] = ("A", "B")) -> str:
    """Two runs side by side: their verdicts, what changed per label and per kernel category, by how much."""
    a, b = doc.a, doc.b
    body = Body("compare")
    # The card's colour from the change's status (B against A, beyond both runs' noise), as its words are.
    tone = {Change.SLOWER: "critical", Change.FASTER: "healthy"}.get(doc.change, "")
    body.add(
        "<h1>perfcore compare</h1>",
        f"<div class='sub'>A: {esc(names[0])} · B: {esc(names[1])}</div>",
        f"<div class='verdict {tone}'><div class='bound'>{esc(step_words(doc))}</div>"
        f"<div class='sentence' id='verdict'>{esc(change_sentence(doc))}</div></div>",
    )
    cards = "".join(
        f"<div><h3>{k}: {esc(n)}</h3>{tiles([('step', dur(r.step_ms)), ('device', r.device), ('bound', r.verdict.bound), ('level', level_word(r.verdict.level))])}"
        f"<p>{esc(verdict_long(r.verdict))}</p></div>"
        for k, n, r in (("A", names[0], a), ("B", names[1], b))
    )
    body.add(f"<div class='run-grid' style='grid-template-columns:1fr 1fr'>{cards}</div>")
    labels = doc.labels
    if labels:

        def row(name: str, v: Delta, chip: str = "") -> str:
            d = float(v.delta_ms or 0)
            rel = f"{100 * d / v.a_ms:+.0f}%" if v.a_ms else ""
            cls = "delta-up" if d > 0 else "delta-down" if d < 0 else ""
            return (
                f"<tr><td>{chip}{esc(name)}</td><td class='n'>{num(v.a_ms)}</td><td class='n'>{num(v.b_ms)}</td>"
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
                    [{lb: v.a_ms for lb, v in labels.items()}, {lb: v.b_ms for lb, v in labels.items()}],
                    [dur(a.step_ms), dur(b.step_ms)],
                    "A and B, mean step split by label",
                    height=200,
                )
            )
        )
        cats = doc.kernel_categories
        if cats:
            body.add(
                "<h2>Kernel categories (ms per step)</h2><table>"
                + head
                + "".join(row(c, v) for c, v in cats.items())
                + "</table>"
            )
    return page(f"perfcore compare: {doc.step_time_change_pct:+.1f}%", body)


def write_compare_report(path: Path, doc: Comparison, names: tuple[str, str] = ("A", "B")) -> Path:
    """compare's page at `path` (written atomically; a named pipe written into): `perfcore compare A B --html PATH`."""
    from perfcore import jsonio

    return jsonio.write_target(Path(path), render_compare_page(doc, names))
