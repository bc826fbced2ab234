"""The pieces every perfcore page is built from: escaping and number text, the page shell (CSS, the
inlined chart library), the verdict card, tiles, the breakdown bar and table, ranked causes, warnings
and plain tables. html (run pages) and html_stages (experiment pages) compose them."""

from __future__ import annotations

import html
import itertools
import time
from typing import Any, Iterable

from perfcore.analysis.attribution import LABELS
from perfcore.analysis.interference import valid_finding
from perfcore.analysis.verdict import run_evidence, steady_ms
from perfcore.analysis.units import fmt_ms
from perfcore.report.advice_words import evidence_of, test_of, text_of
from perfcore.report.charts import COLORS, assets, to_json
from perfcore.report.record_words import notes_of
from perfcore.report.safe_text import clean
from perfcore.report.label_words import interference_detail, interference_sentence
from perfcore.report.process_words import trainers
from perfcore.report.terminal import crashed_early
from perfcore.report.verdict_card import card_lines
from perfcore.report.verdict_words import cause_words, level_word, summary_words
from perfcore.report.words import overhead_short

__all__ = [
    "esc",
    "num",
    "dur",
    "Body",
    "page",
    "level_of",
    "verdict_card",
    "tiles",
    "samples_per_s",
    "stack_bar",
    "breakdown_table",
    "causes_list",
    "advice_item",
    "warnings_of",
    "table",
    "pct",
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


def level_of(doc: dict[str, Any]) -> str:
    v = doc.get("verdict") or {}
    lev = str(v.get("severity") or v.get("level") or "")
    if lev in ("warn", "critical"):
        return lev
    return "healthy" if v.get("healthy") or lev == "healthy" else ""


def verdict_card(doc: dict[str, Any], sentence: str | None = None, dom_id: str | None = "verdict") -> str:
    """The verdict: a headline (the cause and its level), at most two short lines (uncertain, borderline),
    the numbers that size it (avoidable ms per step, its share, the expected gain) and a "why" panel with
    the long words (`sentence`, default the verdict's own). A verdict not yet decided (a stage that
    measures only) shows its sentence as the headline."""
    v = doc.get("verdict") or {}
    causes = v.get("causes") or []
    level = level_of(doc)
    decided = v.get("bound") not in (None, "unknown") and bool(v.get("step_ms"))
    why = sentence if sentence is not None else (summary_words(v) if decided else "")
    if decided:
        head, short = card_lines(v)
        crash = crashed_early(doc)
        short = [crash[0], *short][:2] if crash else short  # the figures are partial: said first
    else:
        head, short, why = str(why or v.get("summary") or doc.get("no_step") or "no verdict"), [], ""
    big = []
    if causes:
        c = causes[0]
        big.append(
            f"<div><b>{dur(c.get('ms_per_step'))}</b><span>avoidable per step ({esc(c.get('label'))})</span></div>"
        )
        if c.get("share") is not None:
            big.append(f"<div><b>{100 * float(c['share']):.0f}%</b><span>of the step</span></div>")
        if c.get("expected_speedup"):
            big.append(
                f"<div><b>up to {float(c['expected_speedup']):.2f}×</b><span>faster steps if removed "
                f"({dur(v.get('step_ms'))} → {dur(c.get('expected_step_ms'))})</span></div>"
            )
    elif v.get("avoidable_ms"):
        lb, worst = max(v["avoidable_ms"].items(), key=lambda kv: kv[1])
        step = v.get("step_ms") or 0
        big.append(
            f"<div><b>{dur(worst)}</b><span>largest avoidable ({esc(lb)}"
            + (f", {100 * worst / step:.0f}% of the step" if step else "")
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


def tiles(items: Iterable[tuple[str, Any]]) -> str:
    cells = [
        f"<div class='tile'><span>{esc(k)}</span><b>{esc(v)}</b></div>" for k, v in items if v not in (None, "", "-")
    ]
    return f"<div class='tiles'>{''.join(cells)}</div>" if cells else ""


def samples_per_s(doc: dict[str, Any]) -> float | None:
    """Throughput where the training loader's batch size is known: samples per second of mean step."""
    mean = (doc.get("step_time_ms") or {}).get("mean")
    loaders = [x for x in doc.get("loaders") or [] if isinstance(x, dict) and x.get("training", True)]
    bs = next((x.get("batch_size") for x in loaders if isinstance(x.get("batch_size"), int)), None)
    if not mean or not bs:
        return None
    per_step = bs * float(doc.get("batches_per_step") or 1.0)
    # Processes that train side by side (Hogwild) each take their own batches: their rates add up.
    means = [float(r["step_time_ms"].get("mean") or 0.0) for r in trainers(doc)]
    if means and all(means):
        return sum(per_step / (m / 1000) for m in means)
    return per_step / (float(mean) / 1000)


def steady_breakdown(doc: dict[str, Any]) -> tuple[dict[str, float], float, int | None]:
    """The figures the verdict judges on, as the terminal's table quotes them: per label ms of the steady
    step (outlier steps set apart, when they were), that step, and how many steps were set apart."""
    ev = run_evidence(doc)
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


def breakdown_table(doc: dict[str, Any]) -> str:
    """The five labels of the steady step: the terminal's table and the verdict's figures (the plain means
    over every step are in run.json's breakdown_ms and the "mean step" tile)."""
    ms, step, outliers = steady_breakdown(doc)
    rows = []
    for lb in LABELS:
        fr = float(ms.get(lb) or 0.0) / step if step > 0 else 0.0
        rows.append(
            f"<tr><td><i class='pc-chip' style='background:{COLORS[lb]};margin-left:0'></i>{lb}</td>"
            f"<td class='n'>{num(ms.get(lb))}</td><td class='n'>{100 * fr:.1f}%</td>"
            f"<td><span class='hbar' style='background:{COLORS[lb]};width:{max(0.0, 200 * fr):.0f}px'></span></td></tr>"
        )
    caption = (
        f"<div class='muted'>of a steady {dur(step)} step: {outliers} outlier step(s) of "
        f"{int(doc.get('steps') or 0):,} set apart</div>"
        if outliers
        else ""
    )
    return (
        caption
        + "<table><tr><th>label</th><th class='n'>ms/step</th><th class='n'>share</th><th></th></tr>"
        + "".join(rows)
        + "</table>"
    )


def causes_list(doc: dict[str, Any]) -> str:
    """The ranked causes, each with the advice keyed to it, its evidence and the command that tests it;
    then the advice that is about no single label (start-up, memory, ...)."""
    v = doc.get("verdict") or {}
    causes = v.get("causes") or []
    recs = [r for r in doc.get("recommendations") or [] if isinstance(r, dict)]
    plan = doc.get("loader_plan") if isinstance(doc.get("loader_plan"), dict) else None
    used: set[int] = set()
    items = []
    for i, c in enumerate(causes, 1):
        lb = c.get("label")
        mine = [(j, r) for j, r in enumerate(recs) if r.get("cause") == lb]
        used.update(j for j, _ in mine)
        what, evidence = cause_words(v, c)
        # An advice's evidence that is its cause's, word for word, is said once, on the cause.
        advice = "".join(advice_item(r, plan, said=evidence) for _, r in mine)
        gain = f" · up to {float(c['expected_speedup']):.2f}× faster" if c.get("expected_speedup") else ""
        items.append(
            f"<li class='cause' style='border-left-color:{COLORS.get(lb, '#888')}'>"
            f"<div class='head'>{i}. {esc(c.get('bound', lb))}: {esc(what)} — "
            f"{dur(c.get('ms_per_step'))}/step ({100 * float(c.get('share') or 0):.0f}%, {esc(level_word(c.get('level', '')))})"
            f"{gain}</div><div class='ev'>evidence: {esc(evidence)}</div>{advice}</li>"
        )
    rest = [r for j, r in enumerate(recs) if j not in used]
    if rest:
        title = "Also" if items else "Advice"
        items.append(
            f"<li class='cause' style='border-left-color:#888'><div class='head'>{title}</div>"
            + "".join(advice_item(r, plan) for r in rest)
            + "</li>"
        )
    return f"<ul class='causes'>{''.join(items)}</ul>" if items else ""


def advice_item(r: dict[str, Any], plan: dict[str, Any] | None = None, said: str = "") -> str:
    test = f"<div class='try'>test it: <code>{esc(test_of(r))}</code></div>" if test_of(r) else ""
    because = evidence_of(r, plan)
    ev = f"<div class='ev'>evidence: {esc(because)}</div>" if because and because != said else ""
    return f"<div style='margin-top:4px'>→ {esc(text_of(r, plan))}{ev}{test}</div>"


def warnings_of(doc: dict[str, Any]) -> list[str]:
    """What a reader must know before trusting the numbers: lost records, overhead, clocks, partial runs."""
    out: list[str] = []
    v = doc.get("verdict") or {}
    intf = valid_finding(doc.get("interference")) or valid_finding(v.get("interference")) or {}
    if intf.get("material"):  # what inflated the steps, before anything else
        out.append(f"{interference_sentence(intf)} ({interference_detail(intf)})")
    cap = doc.get("capture") or {}
    dropped = cap.get("dropped") or cap.get("dropped_records") or 0
    if dropped:
        out.append(f"{dropped} CUPTI record(s) were dropped: kernel and copy time is undercounted")
    o = doc.get("overhead") or {}
    if o.get("material"):  # decided with the overhead: above what a rerun of the script moves its step by
        line = overhead_short(o)
        if o.get("hooks") == "not included":
            line += "; the zero-code hooks add more (bench/bench_run_overhead.py measures them)"
        out.append(line)
    offsets = doc.get("clock_offsets_ns") or {}
    if any(offsets.values()) if isinstance(offsets, dict) else False:
        out.append(
            "hosts' clocks were aligned by offsets " + ", ".join(f"{k}: {v / 1e6:+.3f} ms" for k, v in offsets.items())
        )
    if cap.get("clock_drift_ns"):
        out.append(f"GPU/host clock drift during the run: {cap['clock_drift_ns'] / 1e3:.1f} us")
    ex = doc.get("exit") or {}
    if ex.get("reason") and ex["reason"] not in ("finished", "steps reached"):
        out.append(
            f"partial results: the script {ex['sentence']}"
            if ex.get("sentence")
            else f"partial results: the script {ex['reason']}"
            + (f" ({ex['exception']})" if ex.get("exception") else "")
        )
    if doc.get("checkpoint"):
        out.append(
            f"these results are the last checkpoint ({doc['checkpoint'].get('steps', '?')} steps): "
            "the script did not finish writing its own"
        )
    if doc.get("missing_note"):
        out.append(str(doc["missing_note"]))
    if (doc.get("memory") or {}).get("probable_leak"):
        out.append(
            f"memory grows {doc['memory'].get('growth_bytes_per_step', 0) / 2**20:.2f} MiB per step: probable leak"
        )
    if doc.get("skipped_boundaries"):
        out.append(f"{doc['skipped_boundaries']} step boundaries were skipped")
    out += notes_of(doc)
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
