"""Chart data for report.html: per-step columns binned to a fixed size, rounded, as the JSON the
inlined chart script (assets/report.js, drawing with uPlot) reads. Pure functions: tables in, dicts out."""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from perfcore.analysis.attribution import LABELS
from perfcore.analysis.bins import bin_steps
from perfcore.analysis.run_report import RunReport

__all__ = [
    "COLORS",
    "HTML_BINS",
    "HIST_BINS",
    "run_charts",
    "lines_chart",
    "histogram",
    "stackbars",
    "to_json",
    "assets",
    "rounded",
]
LINE_COLORS = ("#5b3a8c", "#2a9d8f", "#c2185b", "#8d6e63")  # the top host functions; the rest: host's grey

COLORS = {"load": "#e4572e", "transfer": "#f3a712", "compute": "#29335c", "comm": "#669bbc", "host": "#a8a8a8"}
HTML_BINS = 600  # enough to zoom into a long run; a fixed size whatever its length
HIST_BINS = 40
ASSETS = Path(__file__).with_name("assets")


@lru_cache(maxsize=None)
def assets() -> dict[str, str]:
    """The inlined chart library (uPlot, MIT: assets/uPlot.LICENSE), its CSS, and perfcore's own script and CSS."""
    read = lambda name: (ASSETS / name).read_text(encoding="utf-8")  # noqa: E731
    return {
        "uplot_js": read("uPlot.iife.min.js"),
        "uplot_css": read("uPlot.min.css"),
        "report_js": read("report.js"),
        "report_css": read("report.css"),
    }


def rounded(values: Iterable[float] | np.ndarray, sig: int = 4) -> list[float | None]:
    """Floats to `sig` significant digits of the largest value (the JSON stays small); NaN -> null."""
    a = np.asarray(values, dtype=np.float64)
    if not a.size:
        return []
    finite = a[np.isfinite(a)]
    top = float(np.abs(finite).max()) if finite.size else 0.0
    decimals = max(0, sig - 1 - int(math.floor(math.log10(top)))) if top > 0 else 0
    r = np.round(a, decimals)
    return [None if not math.isfinite(v) else (int(v) if decimals == 0 else v) for v in r.tolist()]


def to_json(obj: Any) -> str:
    """JSON that can sit inside a <script> element: no '<' at all, so neither '</script' nor '<!--<script'
    (which puts the parser in a state where the real '</script>' no longer ends the element) can appear;
    JSON.parse reads the escape back as '<'."""
    return json.dumps(obj, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


def _bin_mean(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Mean of each bin's finite values (NaN where a bin has none)."""
    ok = np.isfinite(values)
    s = np.add.reduceat(np.where(ok, values, 0.0), starts)
    c = np.add.reduceat(ok.astype(np.int64), starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(c > 0, s / np.maximum(c, 1), np.nan)


def _col(steps: pd.DataFrame, name: str) -> np.ndarray | None:
    if name not in steps:
        return None
    v = pd.to_numeric(steps[name], errors="coerce").to_numpy(dtype=np.float64)
    return v if np.isfinite(v).any() else None


def run_charts(r: RunReport, steps: pd.DataFrame, prefix: str = "run", bins: int = HTML_BINS) -> list[dict]:
    """The charts over a run, all on one step axis (zoom and cursor shared): stacked ms per label,
    utilisation (GPU, host CPU), memory, DataLoader waits; and the step-time histogram beside them."""
    if steps is None or not len(steps):
        return []
    steps = steps.reset_index(drop=True)
    b = bin_steps(steps, bins)
    step_col = steps["step"].to_numpy() if "step" in steps else np.arange(len(steps))
    starts = np.searchsorted(step_col, b["first_step"].to_numpy())
    x = [int(v) for v in b["first_step"].to_numpy()]
    x_end = int(b["last_step"].iloc[-1]) + 1
    binned = int(b["steps"].max()) > 1
    warm = b["warmup"].to_numpy(dtype=bool)
    shade = [[x[0], int(b.loc[b["warmup"], "last_step"].max()) + 1]] if warm.any() else None
    common = {
        "kind": "timeline",
        "group": prefix,
        "x": x,
        "x_end": x_end,
        "shade": shade,
        "x_label": "step" if not binned else f"step ({len(b)} bins of ~{int(b['steps'].median())} steps)",
    }
    lines = []
    if int(b["steps"].median()) >= 20:  # a median or p90 of a few steps is noise, not a line
        lines = [
            {"label": "median step", "values": rounded(b["median_ms"]), "color": "#111111", "unit": "ms"},
            {"label": "p90 step", "values": rounded(b["p90_ms"]), "color": "#111111", "dash": [4, 3], "unit": "ms"},
        ]
    charts = [
        {
            **common,
            "id": f"{prefix}-breakdown",
            "stacked": True,
            "unit": "ms",
            "y_label": "ms per step",
            "height": 230,
            "warm": [bool(w) for w in warm],
            "total": rounded(b["wall_ms"]),
            "series": [
                {"label": lb, "values": rounded(b[f"{lb}_ms"]), "color": COLORS[lb], "unit": "ms"} for lb in LABELS
            ],
            "lines": lines,
            "title": "Where each step goes" + (" (mean per bin)" if binned else ""),
        }
    ]
    util = []
    gpu = _col(steps, "monitor_gpu_util")
    if gpu is not None:
        util.append(
            {
                "label": "GPU utilisation",
                "values": rounded(100 * _bin_mean(gpu, starts), 3),
                "color": COLORS["compute"],
                "unit": "%",
                "fill": True,
                "gaps": True,
            }
        )
    cpu = _col(steps, "monitor_cpu_percent")
    if cpu is not None:
        # Sampled every interval, not every step: a line across the steps between samples.
        util.append(
            {
                "label": "host CPU",
                "values": rounded(_bin_mean(cpu, starts), 3),
                "color": COLORS["load"],
                "unit": "%",
                "gaps": True,
            }
        )
    if util:
        charts.append(
            {
                **common,
                "id": f"{prefix}-util",
                "unit": "%",
                "y_label": "%",
                "y_max": 100,
                "height": 150,
                "series": util,
                "title": "Utilisation (sampled, mean per step)",
            }
        )
    mem = []
    gmem = _col(steps, "monitor_gpu_mem_used_bytes")
    if gmem is not None:
        mem.append(
            {
                "label": "GPU memory used",
                "values": rounded(_bin_mean(gmem, starts) / 2**20),
                "color": "#7b4fa0",
                "unit": "MiB",
                "fill": True,
                "gaps": True,
            }
        )
    pmem = _col(steps, "mem_bytes")
    if pmem is not None:
        pmem = np.where(pmem >= 0, pmem, np.nan)  # -1: not sampled at that step
        kind = r.memory.kind if r.memory is not None else None
        label = "CUDA allocated" if kind == "cuda_allocated" else "process RSS" if kind else "memory"
        if np.isfinite(pmem).any():
            mem.append(
                {
                    "label": label,
                    "values": rounded(_bin_mean(pmem, starts) / 2**20),
                    "color": COLORS["transfer"],
                    "unit": "MiB",
                    "gaps": True,
                }
            )
    unit = "MiB"
    if mem and max((v for s in mem for v in s["values"] if v is not None), default=0) > 2048:
        unit = "GiB"  # ticks at whole GiB, not at 9.77 GiB
        for s in mem:
            s["values"], s["unit"] = [None if v is None else round(v / 1024, 3) for v in s["values"]], unit
    if mem:
        charts.append(
            {
                **common,
                "id": f"{prefix}-memory",
                "unit": unit,
                "y_label": "memory",
                "height": 150,
                "series": mem,
                "title": "Memory",
            }
        )
    for col, label, unit, color in (
        ("monitor_power_w", "GPU power", "W", "#b8860b"),
        ("monitor_temp_c", "GPU temperature", "°C", "#c0392b"),
    ):
        v = _col(steps, col)
        if v is not None and np.isfinite(v).any():  # NVML answered: on the steps' axis, a drop lines up with them
            charts.append(
                {
                    **common,
                    "id": f"{prefix}-{col[8:]}",
                    "unit": unit,
                    "y_label": unit,
                    "height": 110,
                    "series": [
                        {
                            "label": label,
                            "values": rounded(_bin_mean(v, starts), 3),
                            "color": color,
                            "unit": unit,
                            "gaps": True,
                        }
                    ],
                    "title": f"{label} (sampled, mean per step)",
                }
            )
    load = _col(steps, "load_ms")
    if load is not None and np.nanmax(load) > 0:
        charts.append(
            {
                **common,
                "id": f"{prefix}-load",
                "unit": "ms",
                "y_label": "ms",
                "height": 130,
                "stepped": True,
                "series": [
                    {
                        "label": "DataLoader wait",
                        "values": rounded(b["load_ms"]),
                        "color": COLORS["load"],
                        "unit": "ms",
                        "fill": True,
                    }
                ],
                "title": "DataLoader waits (ms per step)",
            }
        )
    # Host time by the user's function right under the breakdown (a host dip lines up with its cause), the
    # histogram beside the timelines: either may have nothing to draw.
    charts[1:1] = [c for c in (lines_chart(r, prefix),) if c]
    del gpu, cpu, gmem, pmem, v, load  # a column each (8 MB at 1M steps): not held beside the histogram's copies
    hist = histogram(steps, {"p50": r.step_time_ms.p50, "p90": r.step_time_ms.p90}, f"{prefix}-hist")
    charts += [hist] if hist else []
    return charts


def lines_chart(r: RunReport, prefix: str = "run") -> dict | None:
    """Host time by the user's function on the steps' axis (run.json's lines.timeline: sampled, binned by
    the run), stacked, in the same group as the other charts so a dip lines up with its cause."""
    tl = r.lines.timeline if r.lines is not None else None
    if tl is None or not tl.first_step:
        return None
    x = [int(v) for v in tl.first_step]
    fns = list(tl.functions)
    vals = list(tl.ms_per_step)[: len(fns)]
    if len(vals) != len(fns) or any(len(v) != len(x) for v in vals) or len(tl.other_ms_per_step) != len(x):
        return None  # a damaged document draws no chart rather than a wrong one
    series = [
        {
            "label": f"{fn if fn != '<module>' else 'top level'} ({Path(str(file)).name}:{int(line)})",
            "values": rounded(v),
            "color": LINE_COLORS[i % len(LINE_COLORS)],
            "unit": "ms",
        }
        for i, ((file, fn, line), v) in enumerate(zip(fns, vals))
    ]
    series.append(
        {"label": "other host", "values": rounded(tl.other_ms_per_step), "color": COLORS["host"], "unit": "ms"}
    )
    binned = max(int(v) for v in tl.steps or [1]) > 1
    return {
        "kind": "timeline",
        "group": prefix,
        "id": f"{prefix}-lines",
        "x": x,
        "x_end": int(tl.last_step[-1]) + 1,
        "shade": None,
        "x_label": f"step ({len(x)} bins)" if binned else "step",
        "stacked": True,
        "unit": "ms",
        "y_label": "ms per step",
        "height": 170,
        "series": series,
        "title": "Host time by your function (sampled" + (", mean per bin)" if binned else ")"),
    }


def histogram(steps: pd.DataFrame, step_ms: dict[str, Any], chart_id: str, bins: int = HIST_BINS) -> dict | None:
    """Measured step times in `bins` equal bins up to the 99.5th percentile (slower steps counted in the
    note), with p50 and p90 marked: a heartbeat shows as two humps."""
    # Training steps only: warm-up and evaluation rows are reported apart.
    keep = np.ones(len(steps), dtype=bool)
    for col in ("warmup", "evaluation"):
        if col in steps:
            keep &= ~steps[col].fillna(False).to_numpy(dtype=bool)
    # The kept steps' finite times, one selection (each copy of a column is 8 MB at 1M steps).
    w = pd.to_numeric(steps["wall_ms"], errors="coerce").to_numpy(dtype=np.float64)
    keep &= np.isfinite(w)
    w = w[keep]
    del keep
    if not w.size:
        return None
    lo, hi = float(w.min()), float(np.quantile(w, 0.995))
    if hi <= lo:
        hi = lo + max(abs(lo) * 0.01, 1e-3)
    counts, edges = np.histogram(np.clip(w, lo, hi), bins=bins, range=(lo, hi))
    above = int((w > hi).sum())
    marks = [
        {"x": float(step_ms[k]), "label": k, "color": "#111111", "dash": [] if k == "p50" else [4, 3]}
        for k in ("p50", "p90")
        if isinstance(step_ms.get(k), (int, float)) and lo <= step_ms[k] <= hi
    ]
    return {
        "kind": "histogram",
        "id": chart_id,
        "edges": rounded(edges, 5),
        "counts": [int(c) for c in counts],
        "color": COLORS["compute"],
        "marks": marks,
        "height": 230,
        "title": "Step-time distribution",
        "note": f"{int(w.size):,} measured steps"
        + (f"; the {above} slowest (> {hi:.3g} ms) are in the last bar" if above else ""),
    }


def stackbars(
    chart_id: str,
    names: list[str],
    breakdowns: list[dict[str, float] | None],
    totals: list[str],
    title: str,
    height: int = 220,
) -> dict:
    """One stacked bar per named row (experiments, ranks, runs), split by label."""
    return {
        "kind": "stackbars",
        "id": chart_id,
        "names": names,
        "totals": totals,
        "unit": "ms",
        "height": height,
        "y_label": "ms per step",
        "title": title,
        "series": [
            {
                "label": lb,
                "values": rounded([float((bd or {}).get(lb) or 0.0) for bd in breakdowns]),
                "color": COLORS[lb],
                "unit": "ms",
            }
            for lb in LABELS
        ],
    }
