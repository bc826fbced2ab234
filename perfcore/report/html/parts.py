"""The pieces every perfcore page is built from: escaping and number text, the page shell (CSS, the
inlined chart library), the verdict card (a headline, the verdict's name and what its time is, with at
most two short lines: why it is uncertain, diagnose's check of it, what would settle a borderline one;
the long words are words.verdict's), tiles, the breakdown bar and table, ranked causes, warnings and plain
tables. html.run (run pages) and html.stages (experiment pages) compose them."""

from __future__ import annotations

import html
import itertools
import time
from typing import Any, Iterable

from perfcore.analysis.attribution import LABELS
from perfcore.analysis.findings import Finding
from perfcore.analysis.results import Level, Verdict
from perfcore.analysis.run_context import LoaderPlan
from perfcore.analysis.run_report import RunReport
from perfcore.analysis.uncertainty import LEVEL, steps_to_settle
from perfcore.analysis.units import fmt_band, fmt_ms, fmt_share, fmt_x
from perfcore.analysis.verdict import WARN_SHARE, report_evidence, steady_ms
from perfcore.report.charts import COLORS, assets, to_json
from perfcore.safe_text import clean
from perfcore.report.words import WHAT, fit, interference_detail, interference_sentence, level_word
from perfcore.report.words.advice import evidence_of, overhead_short, test_of, text_of
from perfcore.report.words.jobs import missing_sentence
from perfcore.report.words.runs import crashed_early, exit_words, notes_of
from perfcore.report.words.verdict import (
    NO_STEPS,
    cause_words,
    plain_words,
    straggler_head,
    summary_words,
    undecided_words,
    verdict_name,
)

__all__ = [
    "esc",
    "num",
    "dur",
    "Body",
    "page",
    "level_of",
    "verdict_card",
    "run_card",
    "tiles",
    "samples_per_s",
    "stack_bar",
    "breakdown_table",
    "table_of_labels",
    "causes_list",
    "advice_item",
    "warnings_of",
    "table",
    "pct",
    "card_lines",
    "links",
]


_ids = itertools.count()


def esc(x: Any) -> str:
    """Text for a page: cleaned as the terminal's is (no control character, no bidirectional override, a
    byte that was not UTF-8 shown as its escape), then escaped for HTML."""
    return html.escape(clean(str(x)), quote=True)


def num(x: Any, fmt: str = ".2f") -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "-"
    return "-" if v != v else format(v, fmt)


def dur(x: Any) -> str:
    """A duration for people, as the terminal prints it (units.fmt_ms); "-" where there is none."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "-"
    return "-" if v != v else fmt_ms(v)


def pct(x: Any, digits: int = 0) -> str:
    """A fraction as a percentage with `digits` decimals; "-" where there is none."""
    try:
        return f"{100 * float(x):.{digits}f}%"
    except (TypeError, ValueError):
        return "-"


class Body:
    """One report's body: its sections, and the charts its script draws (ids unique on the page, so
    several reports can share one notebook)."""

    def __init__(self, kind: str):
        self.kind, self.uid = kind, f"pc{next(_ids)}"
        self.parts: list[str] = []
        self.charts: list[dict] = []

    def add(self, *html_parts: str) -> "Body":
        self.parts += [p for p in html_parts if p]
        return self

    def chart(self, spec: dict, fallback: str = "", note: str = "") -> str:
        """A chart's box: its title, the static fallback (replaced when the script runs) and a note."""
        spec = dict(spec, id=f"{self.uid}-{spec['id']}")
        if spec.get("group"):
            spec["group"] = f"{self.uid}-{spec['group']}"
        self.charts.append(spec)
        note = note or spec.get("note", "")
        return (
            f"<div class='chart'><div class='title'>{esc(spec.get('title', ''))}</div>"
            f"<div data-chart='{spec['id']}'>{fallback or '<span class=muted>(chart drawn by the script)</span>'}"
            f"</div>{f'<div class=muted>{esc(note)}</div>' if note else ''}</div>"
        )

    def html(self) -> str:
        a = assets()
        data = to_json({"charts": self.charts})
        # The script finds its report by the class; charts need the library, so it comes first.
        return (
            f"<div class='perfcore' id='{self.uid}' data-kind='{esc(self.kind)}'><style>{a['uplot_css']}"
            f"{a['report_css']}</style>{''.join(self.parts)}"
            f"<script type='application/json' class='pc-data'>{data}</script>"
            f"<script>{a['uplot_js']}</script><script>{a['report_js']}</script></div>"
        )


def page(title: str, body: Body | str) -> str:
    inner = body.html() if isinstance(body, Body) else body
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{esc(title)}</title><style>body{{margin:24px auto;max-width:1180px;padding:0 16px;"
        f"background:#fff}}</style></head><body>{inner}"
        f"<p class='muted' style='font:12px sans-serif;color:#777'>written by perfcore at "
        f"{esc(time.strftime('%Y-%m-%d %H:%M:%S'))}</p></body></html>\n"
    )


# ---- pieces every page uses


def level_of(v: Verdict) -> str:
    """The card's tone: the verdict's level where it names a cause at a tier, healthy, else none."""
    if v.level in (Level.WARN, Level.CRITICAL):
        return v.level.value
    return "healthy" if v.healthy or v.level is Level.HEALTHY else ""


def verdict_card(
    v: Verdict, sentence: str | None = None, dom_id: str | None = "verdict", *, crash: list[str] = (), none: str = ""
) -> str:
    """The verdict: a headline (the cause and its level), at most two short lines (uncertain, borderline),
    the numbers that size it (avoidable ms per step, its share, the expected gain) and a "why" panel with
    the long words (`sentence`, default the verdict's own). A verdict not yet decided (a stage that
    measures only) shows its sentence, else `none`, as the headline. crash: the lines a run that failed
    early leads with (its figures are partial: said first)."""
    causes = v.named
    level = level_of(v)
    why = sentence if sentence is not None else (summary_words(v) if v.decided else "")
    if v.decided:
        head, short = card_lines(v)
        short = [crash[0], *short][:2] if crash else short
    else:
        head, short, why = str(why or none or "no verdict"), [], ""
    big = []
    if causes:
        c = causes[0]
        big.append(f"<div><b>{dur(c.ms_per_step)}</b><span>avoidable per step ({esc(c.label)})</span></div>")
        big.append(f"<div><b>{100 * float(c.share):.0f}%</b><span>of the step</span></div>")
        if c.gain.speedup:
            big.append(
                f"<div><b>up to {float(c.gain.speedup):.2f}×</b><span>faster steps if removed "
                f"({dur(v.step_ms)} → {dur(c.gain.step_after_ms)})</span></div>"
            )
    elif v.ranked:
        worst = max(v.ranked, key=lambda c: c.ms_per_step)
        step = v.step_ms or 0
        big.append(
            f"<div><b>{dur(worst.ms_per_step)}</b><span>largest avoidable ({esc(worst.label)}"
            + (f", {100 * worst.ms_per_step / step:.0f}% of the step" if step else "")
            + ")</span></div>"
        )
    idattr = f" id='{dom_id}'" if dom_id else ""
    return (
        f"<div class='verdict {level}'><div class='bound'{idattr}>{esc(head)}</div>"
        + (f"<div class='sentence'>{'<br>'.join(esc(x) for x in short)}</div>" if short else "")
        + (f"<div class='big'>{''.join(big)}</div>" if big else "")
        + (f"<details class='why'><summary>why</summary><p>{esc(why)}</p></details>" if why and why != head else "")
        + "</div>"
    )


def run_card(r: RunReport, dom_id: str | None = "verdict") -> str:
    """A run's verdict card: a run that failed early leads with its end; one with no step says why."""
    return verdict_card(r.verdict, dom_id=dom_id, crash=crashed_early(r), none=undecided_words(r))


def tiles(items: Iterable[tuple[str, Any]]) -> str:
    cells = [
        f"<div class='tile'><span>{esc(k)}</span><b>{esc(v)}</b></div>" for k, v in items if v not in (None, "", "-")
    ]
    return f"<div class='tiles'>{''.join(cells)}</div>" if cells else ""


def samples_per_s(r: RunReport) -> float | None:
    """Throughput where the training loader's batch size is known: samples per second of mean step."""
    mean = r.step_time_ms.mean
    bs = next((x.batch_size for x in r.loaders if x.training and isinstance(x.batch_size, int)), None)
    if not mean or not bs:
        return None
    per_step = bs * float(r.batches_per_step or 1.0)
    # Processes that train side by side (Hogwild) each take their own batches: their rates add up.
    means = [p.step_time_ms.mean for p in r.trainers]
    if means and all(means):
        return sum(per_step / (m / 1000) for m in means)
    return per_step / (float(mean) / 1000)


def steady_breakdown(r: RunReport) -> tuple[dict[str, float], float, int | None]:
    """The figures the verdict judges on, as the terminal's table quotes them: per label ms of the steady
    step (outlier steps set apart, when they were), that step, and how many steps were set apart."""
    ev = report_evidence(r)
    return steady_ms(ev), float(ev["step_ms"] or 0.0), (ev.get("outliers") or {}).get("count")


def stack_bar(breakdown_ms: dict[str, float]) -> str:
    """The steady step as one bar split by label (HTML, so it shows even where scripts do not run)."""
    total = sum(float(breakdown_ms.get(lb) or 0) for lb in LABELS) or 1.0
    segs = "".join(
        f"<div style='width:{100 * float(breakdown_ms.get(lb) or 0) / total:.2f}%;background:{COLORS[lb]}' "
        f"data-tip='{lb}: {dur(breakdown_ms.get(lb))} ({100 * float(breakdown_ms.get(lb) or 0) / total:.0f}%)'>"
        "</div>"
        for lb in LABELS
        if float(breakdown_ms.get(lb) or 0) > 0
    )
    legend = "".join(f"<i style='background:{COLORS[lb]}'></i>{lb}" for lb in LABELS)
    return f"<div class='stackbar'>{segs}</div><div class='legend'>{legend}</div>"


def breakdown_table(r: RunReport) -> str:
    """The five labels of the steady step: the terminal's table and the verdict's figures (the plain means
    over every step are in run.json's breakdown_ms and the "mean step" tile)."""
    ms, step, outliers = steady_breakdown(r)
    caption = (
        f"<div class='muted'>of a steady {dur(step)} step: {outliers} outlier step(s) of {r.steps:,} set apart</div>"
        if outliers
        else ""
    )
    return caption + table_of_labels(ms, step)


def table_of_labels(ms: dict[str, float], step: float) -> str:
    """The five labels' ms of a `step` ms step, with their shares and bars."""
    rows = []
    for lb in LABELS:
        fr = float(ms.get(lb) or 0.0) / step if step > 0 else 0.0
        rows.append(
            f"<tr><td><i class='pc-chip' style='background:{COLORS[lb]};margin-left:0'></i>{lb}</td>"
            f"<td class='n'>{num(ms.get(lb))}</td><td class='n'>{100 * fr:.1f}%</td>"
            f"<td><span class='hbar' style='background:{COLORS[lb]};width:{max(0.0, 200 * fr):.0f}px'></span></td></tr>"
        )
    return (
        "<table><tr><th>label</th><th class='n'>ms/step</th><th class='n'>share</th><th></th></tr>"
        + "".join(rows)
        + "</table>"
    )


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
        gain = f" · up to {float(c.gain.speedup):.2f}× faster" if c.gain.speedup else ""
        items.append(
            f"<li class='cause' style='border-left-color:{COLORS.get(c.label, '#888')}'>"
            f"<div class='head'>{i}. {esc(c.bound)}: {esc(what)} — "
            f"{dur(c.ms_per_step)}/step ({100 * float(c.share or 0):.0f}%, {esc(level_word(c.level))})"
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
        out.append(f"{interference_sentence(intf)} ({interference_detail(intf)})")
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
    ex = r.exit
    if ex is not None and ex.reason and ex.reason not in ("finished", "steps reached"):
        out.append(f"partial results: the script {exit_words(r)}")
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


def table(head: list[str], rows: list[list[Any]], numeric: set[int] = frozenset()) -> str:
    th = "".join(f"<th class='n'>{esc(h)}</th>" if i in numeric else f"<th>{esc(h)}</th>" for i, h in enumerate(head))
    body = "".join(
        "<tr>"
        + "".join(f"<td class='n'>{c}</td>" if i in numeric else f"<td>{c}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{th}</tr>{body}</table>"


def card_lines(t: Verdict) -> tuple[str, list[str]]:
    """The HTML verdict card's words: a headline (the bound, its level, what the time is; the card's
    tiles give its ms, share and gain) and at most two short lines (why the verdict is uncertain,
    diagnose's check of it, what would settle a borderline one); summary_words goes in its "why" panel."""
    if not t.decided:
        return NO_STEPS, []
    top = next((c for c in t.named if c.label == t.primary), None)
    if t.level is Level.HEALTHY:
        head = f"{verdict_name(t)}: nothing outside compute reaches {100 * WARN_SHARE:.0f}% of the step"
    elif t.straggler is not None and t.bound == "straggler":
        head = fit(*straggler_head(t))  # the card says why it is uncertain below
    elif top is not None:
        head = f"{verdict_name(t)}: {WHAT[top.label]}"
    else:
        return plain_words(t).split("; ")[0], []
    lines = []
    if t.uncertain:
        lines.append("uncertain: other processes used the machine during the run (see Warnings)")
    check = next((c for c in t.checks if c.status is not None), None)
    if check is not None and check.measured_speedup is not None:  # diagnose's test of the verdict
        lines.append(
            f"checked: {check.name} measured {fmt_x(check.measured_speedup)}"
            + (f" against {fmt_x(check.predicted_speedup)} predicted" if check.predicted_speedup else "")
            + f": {check.status.value}"
        )
    if top is not None and top.share_band is not None and (t.level is Level.BORDERLINE or top.borderline_tier):
        tier = top.borderline_tier or WARN_SHARE
        more = steps_to_settle(t.steps, top.share, top.share_band, tier) if t.steps else None
        lines.append(
            f"near the {100 * tier:.0f}% line: its {100 * LEVEL:.0f}% interval "
            f"{fmt_band(top.share_band[0], top.share_band[1], fmt_share)}; "
            + (
                f"--steps {more} or a quieter machine would settle it"
                if more and more > t.steps
                else "more steps would settle it"
            )
        )
    return head, lines[:2]


def links(files: Iterable[str]) -> str:
    """Links to files beside the page: plain names only, so a link never leaves the folder or runs
    a script (a name such as 'javascript:...' from a document is shown as text, not linked)."""
    from perfcore.report.reader import is_plain_name

    return " · ".join(
        f"<a href='{esc(x)}'>{esc(x)}</a>" if is_plain_name(x) else esc(x) for x in files if x != "report.html"
    )
