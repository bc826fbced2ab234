"""The run page: report.html of a run folder and the same body inline in Jupyter/Colab (_repr_html_,
%%perfcore). One self-contained file: CSS, the chart library (uPlot) and the chart data inline, no request
to anywhere. The experiment pages (html_stages) build on its sections."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from perfcore.analysis.attribution import LABELS
from perfcore.report.plan_words import plan_sentence
from perfcore.report.finding_words import memory_sentence
from perfcore.report.process_words import trainers, trainers_phrase
from perfcore.report.verdict_words import has_facts, summary_words
from perfcore.report.verdict_words import headline as verdict_headline
from perfcore.report.charts import COLORS, run_charts, stackbars
from perfcore.report.html_parts import (
    Body,
    breakdown_table,
    steady_breakdown,
    causes_list,
    esc,
    num,
    dur,
    page,
    samples_per_s,
    stack_bar,
    table,
    tiles,
    verdict_card,
    warnings_of,
)
from perfcore.report.html_gpu import gpu_section
from perfcore.report.html_lines import lines_section, starvation_block

__all__ = ["render_html", "render_report", "headline", "breakdown_svg", "links", "run_sections"]


def _loading(doc: dict[str, Any]) -> str:
    loaders = [x for x in doc.get("loaders") or [] if isinstance(x, dict)]
    parts = []
    if loaders:
        keys = ["site", "batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers", "batches"]
        # Each loader's own time to make a batch: an eval loader's never mixes into the train loader's.
        rows = [
            [esc(x.get(k, "")) for k in keys]
            + [dur(x["worker_batch_ms"]) if x.get("worker_batch_ms") is not None else ""]
            + [esc(x.get("role") or ("train" if x.get("training", True) else "other"))]
            for x in loaders
        ]
        parts.append(table(keys + ["batch made in", "role"], rows, {1, 2, 6, 7}))
    w = doc.get("workers") or {}
    if w:
        parts.append(
            f"<p>{esc(w.get('num_workers'))} worker(s); a batch takes {dur(w.get('fetch_ms_mean'))} to make "
            f"(__getitem__ {dur(w.get('getitem_ms_mean'))}, collate {dur(w.get('collate_ms_mean'))})</p>"
        )
    if loaders or (doc.get("starvation") or {}).get("starved"):
        parts.append(starvation_block(doc))
    plan = doc.get("loader_plan") or {}
    if plan_sentence(plan):
        parts.append(f"<p>{esc(plan_sentence(plan))}</p>")
    return ("<h2>Data loading</h2>" + "".join(parts)) if parts else ""


def _details(doc: dict[str, Any]) -> str:
    rows = []
    split = doc.get("compute_split_ms") or {}
    if split:
        rows.append(["host time in " + ", ".join(f"{esc(k)} {dur(v)}" for k, v in split.items()) + " per step"])
    gsplit = doc.get("compute_split_gpu_ms") or {}
    if gsplit:
        rows.append(
            ["kernel time launched in " + ", ".join(f"{esc(k)} {dur(v)}" for k, v in gsplit.items()) + " per step"]
        )
    mem = doc.get("memory") or {}
    if mem.get("peak_bytes"):
        kind = "device memory (allocated)" if mem.get("kind") == "cuda_allocated" else "process RSS"
        rows.append([f"peak {kind}: {float(mem['peak_bytes']) / 2**20:.0f} MiB"])
        rows += [[esc(memory_sentence(x))] for x in mem.get("findings") or [] if isinstance(x, dict)]
    su = doc.get("startup") or {}
    if su.get("time_to_first_step_ms") is not None:
        rows.append(
            [
                f"start-up: first step ended {dur(su['time_to_first_step_ms'])} after launch; first step "
                f"{dur(su.get('first_step_ms'))}"
                + (f" vs {dur(su['steady_step_ms'])} steady" if su.get("steady_step_ms") else "")
            ]
        )
    if doc.get("cpu_util_percent") is not None:
        rows.append([f"host CPU utilisation during the run: {float(doc['cpu_util_percent']):.0f}%"])
    return ("<h2>Step details</h2><ul>" + "".join(f"<li>{r[0]}</li>" for r in rows) + "</ul>") if rows else ""


def _ranks(doc: dict[str, Any], body: Body) -> str:
    ranks = [r for r in doc.get("ranks") or [] if isinstance(r, dict)]
    if len(ranks) < 2 and not doc.get("stragglers"):
        return ""
    slow = {s.get("rank") for s in doc.get("stragglers") or []}
    rows = [
        [
            ("<b>" if r.get("rank") in slow else "")
            + f"rank {esc(r.get('rank'))}"
            + (" ◀ straggler</b>" if r.get("rank") in slow else ""),
            esc(r.get("host", "")),
            num((r.get("step_time_ms") or {}).get("mean")),
        ]
        + [num((r.get("breakdown_ms") or {}).get(lb)) for lb in LABELS]
        + [esc(r.get("steps", "")), esc(r.get("exit") or "")]
        for r in ranks
    ]
    rank_table = table(
        ["rank", "host", "mean ms"] + [f"{lb} ms" for lb in LABELS] + ["steps", "exit"], rows, {2, 3, 4, 5, 6, 7, 8}
    )
    chart = body.chart(
        stackbars(
            "ranks",
            [f"rank {r.get('rank')}" for r in ranks],
            [r.get("breakdown_ms") for r in ranks],
            [dur((r.get("step_time_ms") or {}).get("mean")) for r in ranks],
            "Per-rank breakdown (a straggler stands out by its colours)",
        )
    )
    sentences = [s.get("sentence", "") for s in doc.get("stragglers") or []] + [
        w.get("sentence", "") for w in doc.get("waiting") or []
    ]
    return (
        "<h2>Ranks</h2>"
        + rank_table
        + chart
        + ("<ul>" + "".join(f"<li>{esc(s)}</li>" for s in sentences if s) + "</ul>" if sentences else "")
    )


def _processes(doc: dict[str, Any]) -> str:
    """Training processes of one run (Hogwild), each with its own figures: no straggler among them."""
    rows = trainers(doc)
    if len(rows) < 2:
        return ""
    cells = [
        [f"pid {esc(r.get('pid'))}", esc(r.get("steps", "")), num((r.get("step_time_ms") or {}).get("mean"))]
        + [num((r.get("breakdown_ms") or {}).get(lb)) for lb in LABELS]
        + [esc(r.get("exit") or "")]
        for r in rows
    ]
    head = ["process", "steps", "mean ms"] + [f"{lb} ms" for lb in LABELS] + ["exit"]
    return (
        f"<h2>{len(rows)} training processes</h2><p>Each stepped its own optimizer; the run's steps and shares "
        "are over all of their steps.</p>" + table(head, cells, {1, 2, 3, 4, 5, 6, 7})
    )


def _environment(doc: dict[str, Any]) -> str:
    keys = [
        ("device", doc.get("device")),
        ("backend", doc.get("backend")),
        ("host", doc.get("host")),
        ("command", " ".join(map(str, doc.get("command") or doc.get("argv") or [])) or None),
        ("step source", doc.get("step_source_text") or doc.get("step_source")),
        ("world size", doc.get("world_size")),
        ("exit", (doc.get("outcome") or {}).get("sentence")),
    ]
    env = doc.get("environment") or {}
    if isinstance(env, dict):
        keys += [(k, v) for k, v in env.items() if isinstance(v, (str, int, float))]
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in keys if v not in (None, ""))
    return f"<table>{rows}</table>"


def links(files: Iterable[str]) -> str:
    """Links to files beside the page: plain names only, so a link never leaves the folder or runs
    a script (a name such as 'javascript:...' from a document is shown as text, not linked)."""
    from perfcore.report.reader import is_plain_name

    return " · ".join(
        f"<a href='{esc(x)}'>{esc(x)}</a>" if is_plain_name(x) else esc(x) for x in files if x != "report.html"
    )


def run_sections(doc: dict[str, Any], steps: pd.DataFrame | None, body: Body, dom_id: str | None = "verdict") -> None:
    """A run's sections into `body`: above the fold the verdict, the numbers and the ranked causes;
    then the run over time (all charts on one step axis), the GPU, loading, ranks, warnings."""
    st = doc.get("step_time_ms") or {}
    rate = samples_per_s(doc)
    body.add(
        verdict_card(doc, dom_id=dom_id),
        tiles(
            [
                ("p50 step", dur(st.get("p50"))),
                ("p90 step", dur(st.get("p90"))),
                ("mean step", dur(st.get("mean"))),
                ("throughput", f"{rate:,.0f} samples/s" if rate else None),
                ("steps measured", f"{int(doc.get('steps') or 0):,} (+{int(doc.get('warmup_steps') or 0)} warm-up)"),
                ("device", doc.get("device")),
                ("backend", doc.get("backend")),
                ("step source", doc.get("step_source_text") or doc.get("step_source")),
            ]
        ),
    )
    body.add(
        "<h2>Causes, ranked</h2>" if (doc.get("verdict") or {}).get("causes") or doc.get("recommendations") else "",
        causes_list(doc),
    )
    # A job of several ranks: who holds it up comes right after the causes.
    body.add(
        _ranks(doc, body),
        _processes(doc),
        "<h2>Where each step goes</h2>",
        stack_bar(steady_breakdown(doc)[0]),
        breakdown_table(doc),
        lines_section(doc),
    )
    charts = run_charts(doc, steps, "run") if steps is not None and len(steps) else []
    if charts:
        hist = [c for c in charts if c["kind"] == "histogram"]
        over = [c for c in charts if c["kind"] == "timeline"]
        left = "".join(body.chart(c, breakdown_svg(steps) if c["id"] == "run-breakdown" else "") for c in over)
        right = "".join(body.chart(c) for c in hist)
        body.add(
            "<h2>Over the run</h2><div class='muted'>One step axis for every chart: a drop in one lines up "
            "with the others. Shaded: warm-up.</div>",
            f"<div class='run-grid'><div>{left}</div><div>{right}</div></div>",
        )
    body.add(gpu_section(doc), _loading(doc), _details(doc))
    warns = warnings_of(doc)
    if warns:
        body.add(
            "<h2>Warnings and notes</h2><ul class='warn-list'>" + "".join(f"<li>{esc(w)}</li>" for w in warns) + "</ul>"
        )


def render_html(doc: dict[str, Any], steps: pd.DataFrame | None = None) -> str:
    """The report's body (no <html> shell): what Jupyter shows for a RunResult and %%perfcore."""
    body = Body("run")
    body.add("<h1>perfcore run</h1>")
    run_sections(doc, steps, body)
    return body.html()


def render_report(doc: dict[str, Any], steps: pd.DataFrame | None = None, folder: Path | None = None) -> str:
    """The whole report.html of a run folder: the run's sections, environment, the folder's files."""
    files = list((doc.get("files") or {}).keys())
    body = Body("merge" if len(doc.get("ranks") or []) > 1 else "run")
    cmd = " ".join(map(str, doc.get("command") or doc.get("argv") or []))
    n_ranks = len(doc.get("ranks") or [])
    body.add(
        f"<h1>perfcore run{f' · {n_ranks} ranks' if n_ranks > 1 else esc(trainers_phrase(doc).replace(' in ', ' · '))}</h1>",
        f"<div class='sub'>{esc(cmd)}</div>" if cmd else "",
    )
    run_sections(doc, steps, body)
    body.add("<h2>Environment</h2>", _environment(doc))
    if files:
        body.add(f"<h2>Files</h2><p>{links(files)}</p>")
    v = doc.get("verdict") or {}
    return page(f"perfcore: {verdict_headline(v) if v.get('step_ms') else v.get('summary', 'run')}", body)


def headline(doc: dict[str, Any], text: str = "") -> str:
    """The one sentence of an experiment document: its verdict, else its summary, else the terminal
    report's "verdict:" or "best:" line."""
    for d in (doc, doc.get("run") or {}):
        v = d.get("verdict")
        if isinstance(v, dict) and (has_facts(v) or v.get("summary")):
            return summary_words(v)
    if isinstance(doc.get("summary"), str):
        return doc["summary"]
    for line in text.splitlines():
        if line.startswith(("verdict:", "best:")):
            return line.split(":", 1)[1].strip() if line.startswith("verdict:") else line
    return "see the report below"


def breakdown_svg(steps: pd.DataFrame, width: int = 900, height: int = 230, bins: int = 120) -> str:
    """The binned breakdown as a static SVG: what viewers that run no script show (GitHub's notebook
    view); the chart script replaces it. Fixed size whatever the run length."""
    from perfcore.analysis.bins import bin_steps

    b = bin_steps(steps, bins)
    if not len(b):
        return ""
    left, bottom_pad, top_pad = 56, 22, 8
    w, h = width - left - 8, height - bottom_pad - top_pad
    total = b[[f"{lb}_ms" for lb in LABELS]].sum(axis=1).to_numpy()
    top = float(total.max()) * 1.15 or 1.0
    first, last = float(b["first_step"].iloc[0]), float(b["last_step"].iloc[-1]) + 1
    span = max(last - first, 1.0)
    X = lambda s: left + (s - first) / span * w  # noqa: E731
    Y = lambda v: top_pad + h - min(v, top) / top * h  # noqa: E731
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='100%' viewBox='0 0 {width} {height}' role='img' "
        "aria-label='step time breakdown over the run'>"
    ]
    if b["warmup"].any():
        end = float(b.loc[b["warmup"], "last_step"].max()) + 1
        parts.append(
            f"<rect x='{X(first):.1f}' y='{top_pad}' width='{X(end) - X(first):.1f}' height='{h}' "
            "fill='#555' fill-opacity='0.12'/>"
        )
    x0 = b["first_step"].to_numpy(dtype=float)
    x1 = b["last_step"].to_numpy(dtype=float) + 1
    base = [0.0] * len(b)
    for lb in LABELS:
        vals = b[f"{lb}_ms"].to_numpy()
        for i in range(len(b)):  # at most `bins` bars per label: a fixed cost
            v = float(vals[i])
            if v > 0:
                yt, yb = Y(base[i] + v), Y(base[i])
                parts.append(
                    f"<rect x='{X(x0[i]):.1f}' y='{yt:.1f}' width='{max(X(x1[i]) - X(x0[i]), 0.6):.1f}' "
                    f"height='{max(yb - yt, 0):.1f}' fill='{COLORS[lb]}'/>"
                )
            base[i] += v
    for frac in (0, 0.5, 1):
        y = Y(top * frac)
        parts.append(
            f"<line x1='{left}' x2='{left + w}' y1='{y:.1f}' y2='{y:.1f}' stroke='#ccc' stroke-width='0.5'/>"
            f"<text x='{left - 4}' y='{y + 4:.1f}' font-size='11' text-anchor='end'>{esc(dur(top * frac))}</text>"
        )
    parts.append(
        f"<text x='{left}' y='{height - 6}' font-size='11'>step {int(first)}</text>"
        f"<text x='{left + w}' y='{height - 6}' font-size='11' text-anchor='end'>step {int(last) - 1}</text></svg>"
    )
    return "".join(parts)
