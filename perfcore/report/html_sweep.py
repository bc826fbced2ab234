"""report.html of a sweep folder: a heatmap per metric over batch_size x num_workers (one per
pin_memory / prefetch slice), each batch size's knee outlined, failed cells marked, the table beside."""

from __future__ import annotations

from typing import Any

import pandas as pd

from perfcore.analysis.command_results import SweepResult
from perfcore.report.experiments import knee_text
from perfcore.report.html_parts import Body, dur, esc, num, pct, tiles
from perfcore.report.words.runs import config_failure
from perfcore.report.words.verdict import level_word

__all__ = ["sweep_sections"]


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
