"""The pieces every perfcore page is built from: escaping and number text, the page shell (CSS, the
inlined chart library), the verdict card (a headline, the verdict's name and what its time is, with at
most two short lines: why it is uncertain, diagnose's check of it, what would settle a borderline one;
the long words are words.verdict's), tiles, the breakdown bar and table, ranked causes, warnings and plain
tables. html.run (run pages) and html itself (experiment pages) compose them."""

from __future__ import annotations

import html
import itertools
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable

from perfcore.analysis.attribution import LABELS
from perfcore.analysis.results import Level, Verdict
from perfcore.analysis.run_report import RunReport
from perfcore.analysis.units import fmt_ms
from perfcore.report.charts import COLORS, assets, to_json
from perfcore.safe_text import clean

if TYPE_CHECKING:
    import pandas as pd

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
    "breakdown_svg",
    "breakdown_table",
    "table_of_labels",
    "table",
    "pct",
    "links",
]


_ids = itertools.count()


def esc(x: Any) -> str:
    """Text for a page: cleaned as the terminal's is (no control character, no bidirectional override, a
    byte that was not UTF-8 shown as its escape), then escaped for HTML."""
    return html.escape(clean(str(x)), quote=True)


def _shown(x: Any, say: Callable[[float], str]) -> str:
    """A figure said by `say`; "-" where there is none (None, NaN, not a number: a table's empty cell)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "-"
    return "-" if v != v else say(v)


def num(x: Any, fmt: str = ".2f") -> str:
    return _shown(x, lambda v: format(v, fmt))


def dur(x: Any) -> str:
    """A duration for people, as the terminal prints it (units.fmt_ms)."""
    return _shown(x, fmt_ms)


def pct(x: Any, digits: int = 0) -> str:
    """A fraction as a percentage with `digits` decimals."""
    return _shown(x, lambda v: f"{100 * v:.{digits}f}%")


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


def verdict_card(v: Verdict, said: tuple[str, list[str], str], dom_id: str | None = "verdict") -> str:
    """The verdict: a headline (the cause and its level), at most two short lines (uncertain, borderline),
    the numbers that size it (avoidable ms per step, its share, the expected gain) and a "why" panel with
    the long words; `said` is the card's words (words.verdict.card_words), laid out here."""
    causes = v.named
    level = level_of(v)
    head, short, why = said
    big = []
    if causes:
        c = causes[0]
        big.append(f"<div><b>{dur(c.ms_per_step)}</b><span>avoidable per step ({esc(c.label)})</span></div>")
        big.append(f"<div><b>{100 * c.share:.0f}%</b><span>of the step</span></div>")
        if c.gain.speedup:
            big.append(
                f"<div><b>about {c.gain.speedup:.2f}×</b><span>faster steps if removed "
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


def stack_bar(breakdown_ms: dict[str, float]) -> str:
    """The steady step as one bar split by label (HTML, so it shows even where scripts do not run)."""
    ms = {lb: float(breakdown_ms.get(lb) or 0) for lb in LABELS}
    total = sum(ms.values()) or 1.0
    segs = "".join(
        f"<div style='width:{100 * v / total:.2f}%;background:{COLORS[lb]}' "
        f"data-tip='{lb}: {dur(v)} ({100 * v / total:.0f}%)'></div>"
        for lb, v in ms.items()
        if v > 0
    )
    legend = "".join(f"<i style='background:{COLORS[lb]}'></i>{lb}" for lb in LABELS)
    return f"<div class='stackbar'>{segs}</div><div class='legend'>{legend}</div>"


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


def breakdown_table(r: RunReport) -> str:
    """The five labels of the steady step: the terminal's table and the verdict's figures (the plain means
    over every step are in run.json's breakdown_ms and the "mean step" tile)."""
    sd = r.steady()
    caption = (
        f"<div class='muted'>of a steady {dur(sd.step_ms)} step: {sd.outliers} outlier step(s) of {r.steps:,} set "
        "apart</div>"
        if sd.outliers
        else ""
    )
    return caption + table_of_labels(sd.ms, sd.step_ms)


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


def table(head: list[str], rows: list[list[Any]], numeric: set[int] = frozenset()) -> str:
    th = "".join(f"<th class='n'>{esc(h)}</th>" if i in numeric else f"<th>{esc(h)}</th>" for i, h in enumerate(head))
    body = "".join(
        "<tr>"
        + "".join(f"<td class='n'>{c}</td>" if i in numeric else f"<td>{c}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{th}</tr>{body}</table>"


def links(files: Iterable[str]) -> str:
    """Links to files beside the page: plain names only, so a link never leaves the folder or runs
    a script (a name such as 'javascript:...' from a document is shown as text, not linked)."""
    from perfcore.analysis.reader import is_plain_name

    return " · ".join(
        f"<a href='{esc(x)}'>{esc(x)}</a>" if is_plain_name(x) else esc(x) for x in files if x != "report.html"
    )
