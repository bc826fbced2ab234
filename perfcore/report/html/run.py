"""The run page: report.html of a run folder and the same body inline in Jupyter/Colab (_repr_html_,
%%perfcore). One self-contained file: CSS, the chart library (uPlot) and the chart data inline, no request
to anywhere. Its sections: the verdict and breakdown, "On the GPU" (top kernels and their categories,
copies by direction, pageable bytes apart, power and temperature per step, the capture's own statistics),
the user's lines that held each label's time and the loader's starvation in numbers (run.json's "lines"
and "starvation", escaped for the page), ranks, nodes and processes. The experiment pages (html)
build on its sections."""

from __future__ import annotations

from pathlib import Path, PurePath
from typing import Any

import pandas as pd

from perfcore.analysis.attribution import LABELS
from perfcore.analysis.findings import Finding
from perfcore.analysis.lines import LabelLines, SiteCalls, enough_samples
from perfcore.analysis.nodes import NodeState
from perfcore.analysis.results import Verdict
from perfcore.analysis.run_context import LoaderPlan
from perfcore.analysis.run_report import RunReport
from perfcore.report.charts import COLORS, run_charts, stackbars
from perfcore.report.html.parts import (
    Body,
    breakdown_svg,
    breakdown_table,
    dur,
    esc,
    links,
    num,
    page,
    pct,
    samples_per_s,
    stack_bar,
    table,
    tiles,
    verdict_card,
)
from perfcore.report.words import interference_words, level_word
from perfcore.report.words.advice import evidence_of, overhead_short, test_of, text_of
from perfcore.report.words.findings import memory_sentence, plan_sentence, step_source_text
from perfcore.report.words.runs import (
    clock_sentence,
    crashed_early,
    details_words,
    missing_sentence,
    node_sentences,
    notes_of,
    outcome_sentence,
    partial_words,
    ranks_phrase,
    straggler_sentence,
    trainers_phrase,
    undecided_words,
    waiting_sentence,
)
from perfcore.report.words.verdict import card_words, cause_words, verdict_short

__all__ = [
    "render_html",
    "render_report",
    "run_card",
    "causes_list",
    "advice_item",
    "warnings_of",
    "run_sections",
    "gpu_section",
    "lines_section",
    "starvation_block",
    "SHOWN_LABELS",
]


def _loading(r: RunReport) -> str:
    parts = []
    if r.loaders:
        keys = ["site", "batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers", "batches"]
        # Each loader's own time to make a batch: an eval loader's never mixes into the train loader's.
        rows = [
            # A setting the loader has says its value (prefetch_factor=None); a site or count it lacks, nothing.
            [esc(getattr(x, k)) if k not in ("site", "batches") or getattr(x, k) is not None else "" for k in keys]
            + [dur(x.worker_batch_ms) if x.worker_batch_ms is not None else ""]
            + [esc(x.role or ("train" if x.training else "other"))]
            for x in r.loaders
        ]
        parts.append(table(keys + ["batch made in", "role"], rows, {1, 2, 6, 7}))
    if r.workers is not None:
        parts.append(f"<p>{esc(details_words(r)['workers'])}</p>")
    if r.loaders or (r.starvation is not None and r.starvation.starved):
        parts.append(starvation_block(r))
    if plan_sentence(r.loader_plan):
        parts.append(f"<p>{esc(plan_sentence(r.loader_plan))}</p>")
    return ("<h2>Data loading</h2>" + "".join(parts)) if parts else ""


def _details(r: RunReport) -> str:
    said = details_words(r)
    rows = [said[k] for k in ("host", "gpu", "memory") if k in said]
    rows += [memory_sentence(f.figures) for f in r.findings if f.kind.memory] if "memory" in said else []
    rows += [said[k] for k in ("startup", "cpu") if k in said]
    return ("<h2>Step details</h2><ul>" + "".join(f"<li>{esc(x)}</li>" for x in rows) + "</ul>") if rows else ""


# Past this many ranks their table and chart are folded under the nodes' summary (open on a click).
FOLD_RANKS = 16


def _nodes(r: RunReport) -> str:
    """A job across machines, per node first: its ranks, step, labels, state; each node said; the clocks."""
    job = r.nodes
    if job is None or len(job.nodes) < 2:
        return ""
    rows = [
        [
            ("<b>" if n.state is NodeState.SLOW else "")
            + esc(n.host)
            + (" ◀ slow</b>" if n.state is NodeState.SLOW else ""),
            esc(ranks_phrase(n.ranks)),
            num(n.step_ms),
        ]
        + [num(n.breakdown_ms.get(lb, 0.0)) for lb in LABELS]
        + [esc(n.state.value + (f" for {', '.join(n.waits_for)}" if n.waits_for else ""))]
        for n in job.nodes
    ]
    sentences = node_sentences(job)
    if r.clocks is not None:
        sentences.append(clock_sentence(r.clocks))
    return (
        "<h2>Nodes</h2>"
        + table(["node", "ranks", "mean ms"] + [f"{lb} ms" for lb in LABELS] + ["state"], rows, {2, 3, 4, 5, 6, 7})
        + "<ul>"
        + "".join(f"<li>{esc(x)}</li>" for x in sentences)
        + "</ul>"
    )


def _ranks(r: RunReport, body: Body) -> str:
    ranks = r.ranks
    if len(ranks) < 2 and not r.stragglers:
        return ""
    slow = {s.rank for s in r.stragglers}
    rows = [
        [
            ("<b>" if k.rank in slow else "") + f"rank {esc(k.rank)}" + (" ◀ straggler</b>" if k.rank in slow else ""),
            esc(k.host or ""),
            num(k.step_time_ms.mean),
        ]
        + [num(k.breakdown_ms[lb]) for lb in LABELS]
        + [esc(k.steps), esc(k.exit or "")]
        for k in ranks
    ]
    rank_table = table(
        ["rank", "host", "mean ms"] + [f"{lb} ms" for lb in LABELS] + ["steps", "exit"], rows, {2, 3, 4, 5, 6, 7, 8}
    )
    chart = body.chart(
        stackbars(
            "ranks",
            [f"rank {k.rank}" for k in ranks],
            [k.breakdown_ms.as_dict() for k in ranks],
            [dur(k.step_time_ms.mean) for k in ranks],
            "Per-rank breakdown (a straggler stands out by its colours)",
        )
    )
    on_hosts = r.nodes is not None and len(r.nodes.nodes) > 1
    sentences = [straggler_sentence(s, on_hosts) for s in r.stragglers]
    # Across machines the nodes' section says who waits; per rank it would be a line for most of the job.
    sentences += [waiting_sentence(w) for w in r.waiting] if not on_hosts else []
    said = "<ul>" + "".join(f"<li>{esc(s)}</li>" for s in sentences if s) + "</ul>" if sentences else ""
    if len(ranks) > FOLD_RANKS:
        return (
            "<h2>Ranks</h2>"
            + said
            + f"<details><summary>each of the {len(ranks)} ranks</summary>"
            + rank_table
            + chart
            + "</details>"
        )
    return "<h2>Ranks</h2>" + rank_table + chart + said


def _processes(r: RunReport) -> str:
    """Training processes of one run (Hogwild), each with its own figures: no straggler among them."""
    rows = r.trainers
    if len(rows) < 2:
        return ""
    cells = [
        [f"pid {esc(p.pid)}", esc(p.steps), num(p.step_time_ms.mean)]
        + [num(p.breakdown_ms[lb]) for lb in LABELS]
        + [esc(p.exit or "")]
        for p in rows
    ]
    head = ["process", "steps", "mean ms"] + [f"{lb} ms" for lb in LABELS] + ["exit"]
    return (
        f"<h2>{len(rows)} training processes</h2><p>Each stepped its own optimizer; the run's steps and shares "
        "are over all of their steps.</p>" + table(head, cells, {1, 2, 3, 4, 5, 6, 7})
    )


def _environment(r: RunReport) -> str:
    keys = [
        ("device", r.device),
        ("backend", r.backend),
        ("host", r.host),
        ("command", " ".join(map(str, r.command or r.argv)) or None),
        ("step source", step_source_text(r) or None),
        ("world size", r.world_size),
        ("exit", outcome_sentence(r.outcome) if r.outcome is not None else None),
    ]
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in keys if v not in (None, ""))
    return f"<table>{rows}</table>"


def run_card(r: RunReport, dom_id: str | None = "verdict") -> str:
    """A run's verdict card: a run that failed early leads with its end; one with no step says why."""
    return verdict_card(r.verdict, card_words(r.verdict, crash=crashed_early(r), none=undecided_words(r)), dom_id)


def causes_list(v: Verdict, findings: tuple[Finding, ...], plan: LoaderPlan | None = None) -> str:
    """The ranked causes, each with the advice keyed to it, its evidence and the command that tests it;
    then the advice that is about no single label (start-up, memory, ...)."""
    used: set[int] = set()
    items = []
    for i, c in enumerate(v.named, 1):
        mine = [(j, f) for j, f in enumerate(findings) if f.cause == c.label]
        used.update(j for j, _ in mine)
        what, evidence = cause_words(v, c)
        # An advice's evidence that is its cause's, word for word, is said once, on the cause.
        advice = "".join(advice_item(f, plan, said=evidence) for _, f in mine)
        gain = f" · about {c.gain.speedup:.2f}× faster" if c.gain.speedup else ""
        items.append(
            f"<li class='cause' style='border-left-color:{COLORS.get(c.label, '#888')}'>"
            f"<div class='head'>{i}. {esc(c.bound)}: {esc(what)} — "
            f"{dur(c.ms_per_step)}/step ({100 * c.share:.0f}%, {esc(level_word(c.level))})"
            f"{gain}</div><div class='ev'>evidence: {esc(evidence)}</div>{advice}</li>"
        )
    rest = [f for j, f in enumerate(findings) if j not in used]
    if rest:
        title = "Also" if items else "Advice"
        items.append(
            f"<li class='cause' style='border-left-color:#888'><div class='head'>{title}</div>"
            + "".join(advice_item(f, plan) for f in rest)
            + "</li>"
        )
    return f"<ul class='causes'>{''.join(items)}</ul>" if items else ""


def advice_item(f: Finding, plan: LoaderPlan | None = None, said: str = "") -> str:
    test = f"<div class='try'>test it: <code>{esc(test_of(f))}</code></div>" if test_of(f) else ""
    because = evidence_of(f, plan)
    ev = f"<div class='ev'>evidence: {esc(because)}</div>" if because and because != said else ""
    return f"<div style='margin-top:4px'>→ {esc(text_of(f, plan))}{ev}{test}</div>"


def warnings_of(r: RunReport) -> list[str]:
    """What a reader must know before trusting the numbers: lost records, overhead, clocks, partial runs."""
    out: list[str] = []
    intf = r.interference or r.verdict.interference
    if intf is not None and intf.material:  # what inflated the steps, before anything else
        out.append(interference_words(intf))
    cap = r.capture
    dropped = (cap.count("dropped") or cap.count("dropped_records")) if cap is not None else 0
    if dropped:
        out.append(f"{dropped} CUPTI record(s) were dropped: kernel and copy time is undercounted")
    o = r.overhead
    if o is not None and o.material:  # decided with the overhead: above what a rerun of the script moves its step by
        line = overhead_short(o)
        if o.hooks == "not included":
            line += "; the zero-code hooks add more (bench/bench_run_overhead.py measures them)"
        out.append(line)
    offsets = r.clock_offsets_ns
    if any(offsets.values()):
        out.append(
            "hosts' clocks were aligned by offsets " + ", ".join(f"{k}: {v / 1e6:+.3f} ms" for k, v in offsets.items())
        )
    if cap is not None and cap.count("clock_drift_ns"):
        out.append(f"GPU/host clock drift during the run: {cap.count('clock_drift_ns') / 1e3:.1f} us")
    out += filter(None, [partial_words(r)])
    if r.checkpoint is not None:
        steps = r.checkpoint.steps if r.checkpoint.steps is not None else "?"
        out.append(f"these results are the last checkpoint ({steps} steps): the script did not finish writing its own")
    if missing_sentence(r):
        out.append(missing_sentence(r))
    if r.memory is not None and r.memory.probable_leak:
        out.append(f"memory grows {(r.memory.growth_bytes_per_step or 0) / 2**20:.2f} MiB per step: probable leak")
    if r.skipped_boundaries:
        out.append(f"{r.skipped_boundaries} step boundaries were skipped")
    out += notes_of(r)
    return out


def run_sections(
    r: RunReport, steps: pd.DataFrame | None, body: Body, dom_id: str | None = "verdict", card: bool = True
) -> None:
    """A run's sections into `body`: above the fold the verdict (card=False: a page that shows it once
    already, the demo's), the numbers and the ranked causes; then the run over time (all charts on one
    step axis), the GPU, loading, ranks, warnings."""
    st = r.step_time_ms
    rate = samples_per_s(r)
    body.add(
        run_card(r, dom_id=dom_id) if card else "",
        tiles(
            [
                ("p50 step", dur(st.p50)),
                ("p90 step", dur(st.p90)),
                ("mean step", dur(st.mean)),
                ("throughput", f"{rate:,.0f} samples/s" if rate else None),
                ("steps measured", f"{r.steps:,} (+{r.warmup_steps} warm-up)"),
                ("device", r.device),
                ("backend", r.backend),
                # A tile holds a figure; how the optimizers stepped is said in full under Environment.
                ("step source", step_source_text(r, brief=True) or None),
            ]
        ),
    )
    body.add(
        "<h2>Causes, ranked</h2>" if r.verdict.named or r.findings else "",
        causes_list(r.verdict, r.findings, r.loader_plan),
    )
    # A job of several ranks: who holds it up comes right after the causes.
    body.add(
        _nodes(r),
        _ranks(r, body),
        _processes(r),
        "<h2>Where each step goes</h2>",
        stack_bar(r.steady().ms),
        breakdown_table(r),
        lines_section(r),
    )
    charts = run_charts(r, steps, "run") if steps is not None and len(steps) else []
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
    body.add(gpu_section(r), _loading(r), _details(r))
    warns = warnings_of(r)
    if warns:
        body.add(
            "<h2>Warnings and notes</h2><ul class='warn-list'>" + "".join(f"<li>{esc(w)}</li>" for w in warns) + "</ul>"
        )


def render_html(r: RunReport, steps: pd.DataFrame | None = None) -> str:
    """The report's body (no <html> shell): what Jupyter shows for a RunResult and %%perfcore."""
    body = Body("run")
    body.add("<h1>perfcore run</h1>")
    run_sections(r, steps, body)
    return body.html()


def render_report(r: RunReport, steps: pd.DataFrame | None = None) -> str:
    """The whole report.html of a run folder: the run's sections, environment, the folder's files."""
    files = list(r.files)
    n_ranks = len(r.ranks)
    body = Body("merge" if n_ranks > 1 else "run")
    cmd = " ".join(map(str, r.command or r.argv))
    body.add(
        f"<h1>perfcore run{f' · {n_ranks} ranks' if n_ranks > 1 else esc(trainers_phrase(r).replace(' in ', ' · '))}</h1>",
        f"<div class='sub'>{esc(cmd)}</div>" if cmd else "",
    )
    run_sections(r, steps, body)
    body.add("<h2>Environment</h2>", _environment(r))
    if files:
        body.add(f"<h2>Files</h2><p>{links(files)}</p>")
    title = verdict_short(r.verdict) if r.verdict.decided else undecided_words(r)
    return page(f"perfcore: {title}", body)


def gpu_section(r: RunReport) -> str:
    """On a GPU: top kernels, kernel categories, copies by direction (pageable bytes), capture statistics."""
    parts = []
    ks = r.kernels
    cats = r.kernel_categories
    if ks:
        cat_total = sum(float(c.ms or 0) for c in cats.values())
        total = cat_total or sum(k.total_ms for k in ks) or 1.0
        what = "of all kernel time" if cat_total else f"of the top {len(ks)} kernels' time"
        rows = [
            [
                f"<span title='{esc(k.name)}'>{esc(k.name[:100])}</span>",
                esc(k.count),
                num(k.total_ms),
                num(k.mean_us, ".1f"),
                f"{100 * k.total_ms / total:.1f}% "
                f"<span class='hbar' style='background:{COLORS['compute']};width:{80 * k.total_ms / total:.0f}px'></span>",
            ]
            for k in ks
        ]
        parts.append(
            f"<h3>Top kernels</h3>{table(['kernel', 'calls', 'total ms', 'mean µs', 'share ' + what], rows, {1, 2, 3})}"
        )
    if cats:
        rows = [[esc(c), num(v.ms), f"{100 * v.share:.1f}%"] for c, v in cats.items()]
        parts.append(f"<h3>Kernel categories</h3>{table(['category', 'ms', 'share'], rows, {1, 2})}")
    by = r.memcpy.by_direction if r.memcpy is not None else {}
    if by:
        rows = [
            [
                esc(d),
                esc(v.count if v.count is not None else ""),
                f"{v.bytes / 2**20:.1f}",
                num(v.ms),
                f"{v.pageable_bytes / 2**20:.1f}",
                num(v.pageable_ms),
            ]
            for d, v in by.items()
        ]
        parts.append(
            "<h3>Copies by direction</h3>"
            + table(["direction", "count", "MiB", "ms", "pageable MiB", "pageable ms"], rows, {1, 2, 3, 4, 5})
        )
    per_step = r.monitor.per_step if r.monitor is not None else {}
    names = {"power_w": ("power", "W"), "temp_c": ("temperature", "°C")}
    rows = [
        [
            esc(names[k][0]),
            *(f"{num(getattr(v, s), '.1f')} {names[k][1]}" for s in ("mean", "min", "max")),
            esc(v.steps),
        ]
        for k, v in per_step.items()
        if k in names
    ]
    if rows:
        parts.append(
            "<h3>Power and temperature (per-step means, sampled)</h3>"
            + table(["", "mean", "lowest step", "highest step", "steps sampled"], rows, {1, 2, 3, 4})
        )
    cap = {
        k: v for k, v in (r.capture.stats if r.capture is not None else {}).items() if isinstance(v, (int, float, str))
    }
    if ks or by or any(k in cap for k in ("records", "dropped", "dropped_records", "buffers")):
        rows = [
            [
                esc(k.replace("_", " ")),
                esc(f"{v:,}" if isinstance(v, int) else f"{v:.4g}" if isinstance(v, float) else v),
            ]
            for k, v in cap.items()
        ]
        parts.append(f"<h3>Capture</h3>{table(['', ''], rows)}")
    return ("<h2>On the GPU</h2>" + "".join(parts)) if parts else ""


SHOWN_LABELS = ("host", "load")  # the labels a user's line explains; compute's lines are the model's call
TOP_ROWS = 8


def _where(file: Any, line: Any) -> str:
    # The file's name and line, the whole path on hover: a path from a document is only ever text here.
    name = PurePath(str(file)).name or str(file)
    return f"<span title='{esc(file)}'>{esc(name)}:{esc(line)}</span>"


def _calls(calls: tuple[SiteCalls, ...]) -> str:
    out = [
        f"{c.per_step:.0f} <code>.{esc(c.method)}()</code>"
        for c in calls[:2]
        if c.per_step >= 1.0  # rarer calls round to "0"
    ]
    return ", ".join(out) + (" a step" if out else "")


def _label_table(lb: LabelLines, label_ms: float) -> str:
    # Each line's ms are its share of the label's ms in the breakdown: a sampler starved of CPU sees less
    # time, not a different split (as the terminal's "try" line says it). A line whose share the label's
    # samples cannot pin down (enough_samples) gets no ms figure.
    n = lb.samples
    rows = []
    for x in lb.lines[:TOP_ROWS]:
        share = x.share
        fn = esc(x.function) + ("" if x.user else " <span class='muted'>(library)</span>")
        rows.append(
            [
                fn,
                _where(x.file, x.line),
                dur(share * label_ms) if enough_samples(share, n) else "<span class='muted'>few samples</span>",
                f"{pct(share, 1)} <span class='hbar' style='background:#a8a8a8;width:{80 * share:.0f}px'></span>",
                esc(x.samples),
                _calls(x.calls),
            ]
        )
    return table(["function", "line", "ms a step", "share", "samples", "syncing calls"], rows, {2, 3, 4})


def _loads_in_process(r: RunReport) -> bool:
    # With workers, the training thread's load samples are only its wait in the loop's `for` line: the
    # batch is made elsewhere. A loader perfcore did not see (timer.load) runs where it is called.
    return not r.loaders or any(not x.num_workers for x in r.loaders)


def lines_section(r: RunReport) -> str:
    """The top lines per label, with ms per step and share; "" when the run sampled no lines."""
    lines = r.lines
    if lines is None:
        return ""
    names = SHOWN_LABELS if _loads_in_process(r) else ("host",)
    shown = [lb for name in names for lb in lines.labels if lb.label == name and lb.lines]
    if not shown:
        return ""
    parts = [
        "<h2>Your code's lines</h2>",
        f"<div class='muted'>The training thread's stack sampled every {esc(lines.interval_ms)} ms "
        f"({esc(lines.samples)} samples over {esc(lines.steps)} steps); library frames are counted "
        "at the line of your code that called them."
        + (" Host time by function is drawn over the run below." if lines.timeline is not None else "")
        + "</div>",
    ]
    for lb in shown:
        name = str(lb.label)
        label_ms = r.breakdown_ms[name]
        parts.append(f"<h3>{esc(name)}: {dur(label_ms)} a step</h3>" + _label_table(lb, label_ms))
    return "".join(parts)


def starvation_block(r: RunReport) -> str:
    """The loader's starvation in numbers (share of steps that waited, p50/p95 wait, the longest run)."""
    s = r.starvation
    if s is None or not s.steps:
        return ""
    if not s.starved:
        return f"<p>No step waited for data longer than {dur(s.threshold_ms)} (of {esc(s.steps)} measured steps).</p>"
    first = s.longest_run_first_step
    rows = [
        [
            f"{pct(s.share, 1)} ({esc(s.starved)} of {esc(s.steps)})",
            dur(s.p50_wait_ms),
            dur(s.p95_wait_ms),
            f"{esc(s.longest_run)} steps" + (f" from step {esc(first)}" if first is not None else ""),
            dur(s.load_ms_per_step),
        ]
    ]
    return "<h3>Loader starvation</h3>" + table(
        [
            f"steps that waited > {dur(s.threshold_ms)}",
            "p50 wait",
            "p95 wait",
            "longest starved run",
            "mean wait (all steps)",
        ],
        rows,
        {1, 2, 4},
    )
