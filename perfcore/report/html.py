"""HTML of perfcore results: report.html for run folders (self-contained: inline CSS, SVG and PNG,
no network), the same body inline in Jupyter/Colab (_repr_html_, %%perfcore), and a page for
demo, health, diagnose and sweep folders with their plots."""
from __future__ import annotations

import base64
import html
import time
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from perfcore.analysis.attribution import LABELS

__all__ = ["render_html", "render_report", "write_report", "write_folder_report", "headline", "breakdown_svg",
           "warnings_of", "COLORS"]

COLORS = {"load": "#e4572e", "transfer": "#f3a712", "compute": "#29335c", "comm": "#669bbc", "host": "#a8a8a8"}

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1000px;
color:#222;line-height:1.4;padding:0 12px}
h1{font-size:1.3em;margin:0 0 4px}h2{font-size:1.05em;margin:22px 0 6px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.9em}td,th{padding:2px 10px 2px 0;text-align:left;vertical-align:top}
td.n,th.n{text-align:right}.verdict{font-size:1.15em;font-weight:600;padding:8px 12px;border-radius:4px;
background:#eef2f8;border-left:5px solid #29335c;margin:10px 0}.verdict.warn{border-color:#f3a712;background:#fdf6e7}
.verdict.critical{border-color:#e4572e;background:#fcece7}.muted{color:#666;font-size:.85em}
.warn-list li{color:#8a4b00}code{background:#f4f4f4;padding:0 3px;border-radius:3px}
img{max-width:100%}svg text{font-family:inherit}
"""
# The body's own rules, scoped: Jupyter shows the body without the page's <style>.
BODY_CSS = """
.perfcore .verdict{font-size:1.1em;font-weight:600;padding:8px 12px;border-radius:4px;background:#eef2f8;
border-left:5px solid #29335c;margin:10px 0}.perfcore .verdict.warn{border-color:#f3a712;background:#fdf6e7}
.perfcore .verdict.critical{border-color:#e4572e;background:#fcece7}.perfcore .muted{color:#666;font-size:.85em}
.perfcore td.n,.perfcore th.n{text-align:right}.perfcore td,.perfcore th{padding:2px 10px 2px 0}
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _f(x: Any, fmt: str = ".2f") -> str:
    try:
        return format(float(x), fmt)
    except (TypeError, ValueError):
        return "-"


def _verdict_class(doc: dict[str, Any]) -> str:
    v = doc.get("verdict") or {}
    sev = str(v.get("severity") or v.get("level") or "")
    return sev if sev in ("warn", "critical") else ""


def breakdown_svg(steps: pd.DataFrame, width: int = 900, height: int = 240) -> str:
    """The binned breakdown over the run as inline SVG: stacked mean ms per label per bin, median and
    p90 step lines, warm-up shaded, outliers marked. Fixed size whatever the run length."""
    from perfcore.analysis.bins import OUTLIER_FACTOR, bin_steps, outliers

    b = bin_steps(steps)
    if not len(b):
        return ""
    out = outliers(steps)
    left, bottom_pad, top_pad = 48, 22, 8
    w, h = width - left - 8, height - bottom_pad - top_pad
    total = b[[f"{lb}_ms" for lb in LABELS]].sum(axis=1).to_numpy()
    top = max(float(total.max()), float(b["p90_ms"].max())) * 1.2 or 1.0
    first, last = float(b["first_step"].iloc[0]), float(b["last_step"].iloc[-1]) + 1
    span = max(last - first, 1.0)

    def X(step):
        return left + (step - first) / span * w

    def Y(ms):
        return top_pad + h - min(ms, top) / top * h

    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' viewBox='0 0 {width} {height}' "
             "role='img' aria-label='step time breakdown over the run'>"]
    if b["warmup"].any():
        end = float(b.loc[b["warmup"], "last_step"].max()) + 1
        parts.append(f"<rect x='{X(first):.1f}' y='{top_pad}' width='{X(end) - X(first):.1f}' height='{h}' "
                     "fill='#555' fill-opacity='0.12'><title>warm-up</title></rect>")
    x0 = b["first_step"].to_numpy(dtype=float)
    x1 = b["last_step"].to_numpy(dtype=float) + 1
    base = [0.0] * len(b)
    for lb in LABELS:
        vals = b[f"{lb}_ms"].to_numpy()
        for i in range(len(b)):  # at most BINS bars per label: a fixed cost
            v = float(vals[i])
            if v > 0:
                y_top, y_bot = Y(base[i] + v), Y(base[i])
                parts.append(f"<rect x='{X(x0[i]):.1f}' y='{y_top:.1f}' width='{max(X(x1[i]) - X(x0[i]), 0.6):.1f}' "
                             f"height='{max(y_bot - y_top, 0):.1f}' fill='{COLORS[lb]}'/>")
            base[i] += v
    if int(b["steps"].max()) > 1:
        for col, dash in (("median_ms", ""), ("p90_ms", " stroke-dasharray='3 2'")):
            pts = " ".join(f"{X((a + c) / 2):.1f},{Y(v):.1f}" for a, c, v in zip(x0, x1, b[col].to_numpy()))
            parts.append(f"<polyline points='{pts}' fill='none' stroke='#111' stroke-width='1'{dash}/>")
    for s, v in zip(out["step"].to_numpy(), out["wall_ms"].to_numpy()):
        parts.append(f"<path d='M{X(s + 0.5) - 3:.1f},{Y(v) - 4:.1f} h6 l-3,5 z' fill='#c00'>"
                     f"<title>step {int(s)}: {v:.2f} ms</title></path>")
    for frac in (0, 0.5, 1):
        ms = top * frac
        y = Y(ms)
        parts.append(f"<line x1='{left}' x2='{left + w}' y1='{y:.1f}' y2='{y:.1f}' stroke='#ccc' stroke-width='0.5'/>"
                     f"<text x='{left - 4}' y='{y + 4:.1f}' font-size='10' text-anchor='end'>{ms:.3g}</text>")
    parts.append(f"<text x='4' y='{top_pad + 10}' font-size='10'>ms</text>"
                 f"<text x='{left}' y='{height - 6}' font-size='10'>step {int(first)}</text>"
                 f"<text x='{left + w}' y='{height - 6}' font-size='10' text-anchor='end'>step {int(last) - 1}</text>")
    parts.append("</svg>")
    legend = " ".join(f"<span style='display:inline-block;width:10px;height:10px;background:{COLORS[lb]}'></span> {lb}"
                      for lb in LABELS)
    per_bin = int(b["steps"].median())
    note = (f"{len(b)} bins of ~{per_bin} steps: bars are each bin's mean ms per label; solid line the median "
            "step, dotted the p90" if per_bin > 1 else "one bar per step")
    if out.attrs.get("count"):
        note += (f"; ▼ {out.attrs['count']} outlier step(s) slower than {OUTLIER_FACTOR:g}x the median "
                 f"({out.attrs['median_ms']:.2f} ms)")
    return "".join(parts) + f"<div class='muted'>{legend}<br>{_e(note)}; shaded: warm-up</div>"


def _breakdown_table(doc: dict[str, Any]) -> str:
    rows = []
    for lb in LABELS:
        f = float((doc.get("breakdown_fraction") or {}).get(lb, 0.0))
        rows.append(f"<tr><td>{lb}</td><td class='n'>{_f((doc.get('breakdown_ms') or {}).get(lb))}</td>"
                    f"<td class='n'>{100 * f:.1f}%</td><td><div style='background:{COLORS[lb]};"
                    f"width:{max(0.0, 240 * f):.0f}px;height:10px'></div></td></tr>")
    return ("<table><tr><th>label</th><th class='n'>ms/step</th><th class='n'>share</th><th></th></tr>"
            + "".join(rows) + "</table>")


def _advice(doc: dict[str, Any]) -> str:
    items = []
    for r in doc.get("recommendations") or []:
        test = f"<br><small>try: <code>{_e(r['test'])}</code></small>" if r.get("test") else ""
        items.append(f"<li>{_e(r.get('text', ''))}<br><small class='muted'>evidence: {_e(r.get('evidence', ''))}"
                     f"</small>{test}</li>")
    return f"<ul>{''.join(items)}</ul>" if items else ""


def warnings_of(doc: dict[str, Any]) -> list[str]:
    """What a reader must know before trusting the numbers: lost records, overhead, clocks, partial runs."""
    out: list[str] = []
    cap = doc.get("capture") or {}
    dropped = cap.get("dropped") or cap.get("dropped_records") or 0
    if dropped:
        out.append(f"{dropped} CUPTI record(s) were dropped: kernel and copy time is undercounted")
    o = doc.get("overhead") or {}
    if o.get("fraction") is not None:
        line = (f"perfcore's own overhead: ~{_f(o.get('ms_per_step'), '.3f')} ms per step "
                f"({100 * float(o.get('fraction') or 0):.2f}% of the step)")
        if o.get("hooks") == "not included":
            line += "; the zero-code hooks add more (bench/bench_run_overhead.py measures them)"
        out.append(line)
    offsets = doc.get("clock_offsets_ns") or {}
    if any(offsets.values()) if isinstance(offsets, dict) else False:
        out.append("hosts' clocks were aligned by offsets " + ", ".join(f"{k}: {v / 1e6:+.3f} ms"
                                                                        for k, v in offsets.items()))
    if cap.get("clock_drift_ns"):
        out.append(f"GPU/host clock drift during the run: {cap['clock_drift_ns'] / 1e3:.1f} us")
    ex = doc.get("exit") or {}
    if ex.get("reason") and ex["reason"] not in ("finished", "steps reached"):
        out.append(f"partial results: the script {ex['sentence']}" if ex.get("sentence") else
                   f"partial results: the script {ex['reason']}" + (f" ({ex['exception']})" if ex.get("exception") else ""))
    if doc.get("checkpoint"):
        out.append(f"these results are the last checkpoint ({doc['checkpoint'].get('steps', '?')} steps): "
                   "the script did not finish writing its own")
    if doc.get("missing_note"):
        out.append(str(doc["missing_note"]))
    if (doc.get("memory") or {}).get("probable_leak"):
        out.append(f"memory grows {doc['memory'].get('growth_bytes_per_step', 0) / 2**20:.2f} MiB per step: probable leak")
    if doc.get("skipped_boundaries"):
        out.append(f"{doc['skipped_boundaries']} step boundaries were skipped")
    out += [str(n) for n in doc.get("notes") or []]
    return out


def _kernels(doc: dict[str, Any]) -> str:
    ks = doc.get("kernels") or []
    parts = []
    if ks:
        rows = "".join(f"<tr><td>{_e(k['name'][:90])}</td><td class='n'>{k.get('count', '')}</td>"
                       f"<td class='n'>{_f(k.get('total_ms'))}</td><td class='n'>{_f(k.get('mean_us'), '.1f')}</td></tr>"
                       for k in ks)
        parts.append("<h2>Top kernels</h2><table><tr><th>kernel</th><th class='n'>count</th>"
                     f"<th class='n'>total ms</th><th class='n'>mean us</th></tr>{rows}</table>")
    by = (doc.get("memcpy") or {}).get("by_direction") or {}
    if by:
        rows = "".join(f"<tr><td>{_e(d)}</td><td class='n'>{v.get('count', '')}</td>"
                       f"<td class='n'>{v.get('bytes', 0) / 2**20:.1f}</td><td class='n'>{_f(v.get('ms'))}</td>"
                       f"<td class='n'>{v.get('pageable_bytes', 0) / 2**20:.1f}</td></tr>" for d, v in by.items())
        parts.append("<h2>Copies</h2><table><tr><th>direction</th><th class='n'>count</th><th class='n'>MiB</th>"
                     f"<th class='n'>ms</th><th class='n'>pageable MiB</th></tr>{rows}</table>")
    return "".join(parts)


def _environment(doc: dict[str, Any]) -> str:
    keys = [("device", doc.get("device")), ("backend", doc.get("backend")), ("host", doc.get("host")),
            ("command", " ".join(map(str, doc.get("command") or doc.get("argv") or [])) or None),
            ("step source", doc.get("step_source_text") or doc.get("step_source")),
            ("world size", doc.get("world_size")), ("exit", (doc.get("outcome") or {}).get("sentence")),
            ("host CPU utilisation", f"{doc['cpu_util_percent']:.0f}%" if doc.get("cpu_util_percent") is not None
             else None)]
    env = doc.get("environment") or {}
    if isinstance(env, dict):
        keys += [(k, v) for k, v in env.items() if isinstance(v, (str, int, float))]
    rows = "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in keys if v not in (None, ""))
    return f"<table>{rows}</table>"


def _links(files: Iterable[str]) -> str:
    items = [f"<a href='{_e(f)}'>{_e(f)}</a>" for f in files if f != "report.html"]
    return " · ".join(items)


def render_html(doc: dict[str, Any], steps: pd.DataFrame | None = None) -> str:
    """The report's body (no <html> shell): what Jupyter shows for a RunResult and %%perfcore."""
    st = doc.get("step_time_ms") or {}
    head = (f"<b>perfcore</b>: {doc.get('steps', 0)} steps measured ({doc.get('warmup_steps', 0)} warm-up apart), "
            f"mean {_f(st.get('mean'))} ms (p50 {_f(st.get('p50'))}, p90 {_f(st.get('p90'))}), "
            f"backend {_e(doc.get('backend', '?'))}, device {_e(doc.get('device', '?'))}")
    verdict = (doc.get("verdict") or {}).get("summary") or doc.get("no_step") or "no verdict"
    body = [f"<div>{head}</div>", f"<div class='verdict {_verdict_class(doc)}' id='verdict'>{_e(verdict)}</div>",
            _advice(doc), "<h2>Where each step goes</h2>", _breakdown_table(doc)]
    if steps is not None and len(steps):
        body += ["<h2>Over the run</h2>", breakdown_svg(steps)]
    body.append(_kernels(doc))
    warns = warnings_of(doc)
    if warns:
        body.append("<h2>Warnings and notes</h2><ul class='warn-list'>" + "".join(f"<li>{_e(w)}</li>" for w in warns)
                    + "</ul>")
    return f"<div class='perfcore' style='font-family:sans-serif'><style>{BODY_CSS}</style>{''.join(body)}</div>"


def _img(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f"<figure><img alt='{_e(path.name)}' src='data:image/png;base64,{data}'><figcaption class='muted'>" \
           f"{_e(path.name)}</figcaption></figure>"


def _page(title: str, body: str) -> str:
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>{body}"
            f"<p class='muted'>written by perfcore at {_e(time.strftime('%Y-%m-%d %H:%M:%S'))}</p></body></html>\n")


def render_report(doc: dict[str, Any], steps: pd.DataFrame | None = None, folder: Path | None = None) -> str:
    """The whole report.html of a run folder: verdict and advice, breakdown, the binned plot, top
    kernels and copies, warnings, environment, the folder's other plots inline and links to its files."""
    files = list((doc.get("files") or {}).keys())
    body = ["<h1>perfcore run</h1>", render_html(doc, steps), "<h2>Environment</h2>", _environment(doc)]
    if folder is not None:
        imgs = [Path(folder) / f for f in files if f.endswith(".png") and f != "breakdown.png"
                and (Path(folder) / f).is_file()]
        if imgs:
            body.append("<h2>Plots</h2>" + "".join(_img(p) for p in imgs))
    if files:
        body.append(f"<h2>Files</h2><p>{_links(files)}</p>")
    return _page(f"perfcore: {(doc.get('verdict') or {}).get('summary', 'run')}", "".join(body))


def _atomic_write(path: Path, text: str) -> Path:
    from perfcore.report import jsonio

    return jsonio.write_text(path, text)


def write_report(folder: Path, doc: dict[str, Any], steps: pd.DataFrame | None = None) -> Path:
    """report.html in a run folder (replaced atomically)."""
    folder = Path(folder)
    return _atomic_write(folder / "report.html", render_report(doc, steps, folder))


def headline(doc: dict[str, Any], text: str = "") -> str:
    """The one sentence of an experiment document: its verdict, else its summary, else the terminal
    report's "verdict:" or "best:" line."""
    for d in (doc, doc.get("run") or {}):
        v = d.get("verdict")
        if isinstance(v, dict) and v.get("summary"):
            return str(v["summary"])
    if isinstance(doc.get("summary"), str):
        return doc["summary"]
    for line in text.splitlines():
        if line.startswith(("verdict:", "best:")):
            return line.split(":", 1)[1].strip() if line.startswith("verdict:") else line
    return "see the report below"


def write_folder_report(folder: Path, title: str, doc: dict[str, Any], text: str, files: Iterable[str]) -> Path:
    """report.html for demo / health / diagnose / sweep folders: the headline, the terminal report's
    text, every PNG of the folder inline (heatmaps included) and links to the other files."""
    folder = Path(folder)
    files = [f for f in files if f != "report.html"]
    pngs = sorted(p for p in folder.glob("*.png"))
    verdict = headline(doc, text)
    body = [f"<h1>{_e(title)}</h1>", f"<div class='verdict' id='verdict'>{_e(verdict)}</div>",
            f"<pre style='font-size:.8em;overflow-x:auto'>{_e(text)}</pre>"]
    if pngs:
        body.append("<h2>Plots</h2>" + "".join(_img(p) for p in pngs))
    body.append(f"<h2>Files</h2><p>{_links(files)}</p>")
    return _atomic_write(folder / "report.html", _page(f"perfcore: {verdict}", "".join(body)))
