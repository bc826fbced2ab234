"""PNG plots of a run: the binned breakdown over time, the top kernels, heatmaps, ranks, transfer curves.
A run folder's charts (breakdown, kernels, monitor) are drawn on the small Pillow canvas below (Figure,
Panel: bars, steps, lines, ticks, legend): they are at the end of every `perfcore run`, where matplotlib's
import and first figure (~1-2 s) cost more than the rest of finishing, and Pillow (which matplotlib itself
needs, so it is always there) draws the same binned charts in milliseconds. The others are drawn on
matplotlib Figures with the Agg canvas directly: never pyplot, so the user's GUI backend (MPLBACKEND,
matplotlibrc, Jupyter's inline) is neither needed nor changed."""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import textwrap
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from perfcore.analysis.attribution import LABELS
from perfcore.analysis.bins import BINS
from perfcore.analysis.command_results import ExperimentRow
from perfcore.report.charts import COLORS

__all__ = [
    "plot_breakdown",
    "plot_kernels",
    "Figure",
    "Panel",
    "nice_ticks",
    "ms_label",
    "step_label",
    "wrap_title",
    "warm_fonts",
]

# -- the Pillow canvas ------------------------------------------------------------------------------

SCALE = 2  # drawn at twice the size, then reduced: smooth edges and text without per-primitive antialiasing
AXIS = "#333333"
GRID = "#e3e3e3"


def ms_label(v: float) -> str:
    """A tick in ms, or s from a second up; never an offset or an exponent (".83e+04")."""
    if abs(v) >= 1000:
        return f"{v / 1000:g} s"
    return f"{v:g} ms" if v else "0"


def step_label(v: float) -> str:
    """A step number that fits under its tick at any run length: 900, 20k, 1.5M."""
    if abs(v) >= 1e6:
        return f"{v / 1e6:g}M"
    return f"{v / 1e3:g}k" if abs(v) >= 1e4 else f"{v:g}"


def wrap_title(text: str, width: int = 110) -> str:
    """Two lines at most, the rest cut with an ellipsis."""
    lines = textwrap.wrap(text, width) or [""]
    if len(lines) > 2:
        lines = [lines[0], lines[1][: width - 1] + "…"]
    return "\n".join(lines)


def nice_ticks(lo: float, hi: float, target: int = 6, integer: bool = False) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 x 10^k apart) inside [lo, hi], about `target` of them."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / max(1, target - 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    if integer:
        step = max(1.0, math.ceil(step))
    first = math.ceil(lo / step - 1e-9) * step
    ticks = [round(first + i * step, 10) for i in range(int((hi - first) / step + 1e-9) + 1)]
    return [0.0 if t == 0 else t for t in ticks]


@lru_cache(maxsize=8)
def _font(size_px: int):
    """DejaVu Sans from matplotlib's package data, found without importing matplotlib; Pillow's own
    default font where that file or FreeType is missing (smaller, still legible)."""
    from PIL import ImageFont

    spec = importlib.util.find_spec("matplotlib")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = Path(root) / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"
        try:
            return ImageFont.truetype(str(path), size_px)
        except (OSError, ImportError):
            continue
    try:
        return ImageFont.load_default(size=size_px)
    except TypeError:  # Pillow < 10.1: the fixed bitmap font
        return ImageFont.load_default()


def _px(size_pt: float) -> int:
    """Points at the saved image's 110 dpi (the matplotlib charts' size) -> pixels on the drawn one."""
    return round(size_pt * 110 / 72 * SCALE)


def warm_fonts() -> None:
    """Load the chart font at the sizes the charts use (FreeType opens and sizes it once each)."""
    for pt in (7, 8, 9, 10):
        _font(_px(pt))


class Figure:
    """One image of width x height pixels (as saved); panels are placed on it in fractions."""

    def __init__(self, width_px: int, height_px: int):
        from PIL import Image, ImageDraw

        self.size = (width_px, height_px)
        self.image = Image.new("RGB", (width_px * SCALE, height_px * SCALE), "white")
        self.draw = ImageDraw.Draw(self.image)
        self.primitives = 0  # drawing calls, each at most a shape per bin: fixed, whatever the run length

    def text(self, xy: tuple[float, float], s: str, size: float = 9, anchor: str = "la", fill: str = AXIS) -> None:
        """`size` in points at the saved image's 110 dpi, as the matplotlib charts had them."""
        self.draw.text(xy, s, font=_font(_px(size)), anchor=anchor, fill=fill)

    def text_width(self, s: str, size: float = 9) -> float:
        return self.draw.textlength(s, font=_font(_px(size))) / SCALE

    def title(self, s: str, y_frac: float, size: float = 10) -> None:
        lines = s.split("\n")
        size = 9 if len(lines) > 1 else size
        step = size * 110 / 72 * 1.25 * SCALE
        y = y_frac * self.image.height - step * len(lines)
        for i, line in enumerate(lines):
            self.text((self.image.width / 2, y + i * step), line, size=size, anchor="ma")

    def legend(self, items: Sequence[tuple[str, str]], y_frac: float, size: float = 8) -> None:
        """Colour swatches and names in one centred row."""
        box, gap = 10 * SCALE, 16 * SCALE
        widths = [box + 5 * SCALE + self.text_width(name, size) * SCALE for _, name in items]
        x = (self.image.width - sum(widths) - gap * (len(items) - 1)) / 2
        y = y_frac * self.image.height
        for (color, name), w in zip(items, widths):
            self.draw.rectangle([x, y, x + box, y + box], fill=color)
            self.text((x + box + 5 * SCALE, y + box / 2), name, size=size, anchor="lm")
            x += w + gap

    def save(self, path: Path) -> None:
        """Atomically (temporary file, then rename): a reader never sees half a PNG."""
        from perfcore import jsonio

        small = self.image.reduce(SCALE)  # a box average of each 2x2: ~10x cheaper than a Lanczos resize
        with jsonio.atomic_path(Path(path)) as tmp:
            small.save(tmp, format="PNG", compress_level=6)


class Panel:
    """A plot box on a Figure (left, top, right, bottom as fractions of it) with data limits."""

    def __init__(self, fig: Figure, box: tuple[float, float, float, float]):
        w, h = fig.image.size
        self.fig, self.draw = fig, fig.draw
        self.x0, self.y0, self.x1, self.y1 = box[0] * w, box[1] * h, box[2] * w, box[3] * h
        self.xlim, self.ylim = (0.0, 1.0), (0.0, 1.0)

    def limits(self, x: tuple[float, float], y: tuple[float, float]) -> None:
        fix = lambda lo, hi: (lo, hi) if hi != lo else (lo - 0.5, lo + 0.5)  # noqa: E731 (hi < lo: inverted)
        self.xlim, self.ylim = fix(*map(float, x)), fix(*map(float, y))

    def px(self, x) -> np.ndarray:
        a, b = self.xlim
        return self.x0 + (np.asarray(x, dtype=np.float64) - a) / (b - a) * (self.x1 - self.x0)

    def py(self, y) -> np.ndarray:
        a, b = self.ylim
        v = self.y1 - (np.asarray(y, dtype=np.float64) - a) / (b - a) * (self.y1 - self.y0)
        return np.clip(v, self.y0, self.y1)

    def inside(self, t: float, lim: tuple[float, float]) -> bool:
        return min(lim) - 1e-9 <= t <= max(lim) + 1e-9

    def rects(self, x0, x1, y0, y1, color: str) -> None:
        """Filled rectangles in data coordinates (one per bar or bin; zero heights skipped)."""
        px0, px1 = np.clip(self.px(x0), self.x0, self.x1), np.clip(self.px(x1), self.x0, self.x1)
        py0, py1 = np.minimum(self.py(y0), self.py(y1)), np.maximum(self.py(y0), self.py(y1))
        keep = (py1 - py0 >= 0.5) & (px1 > px0)
        for a, b, c, d in zip(px0[keep], py0[keep], np.maximum(px1[keep] - 1, px0[keep]), py1[keep]):
            self.draw.rectangle([a, b, c, d], fill=color)
        self.fig.primitives += 1

    def line(self, x, y, color: str, width: float = 1.0) -> None:
        pts = np.stack([self.px(x), self.py(y)], 1)
        pts = pts[np.isfinite(pts).all(1)]
        if len(pts) >= 2:
            self.draw.line([tuple(p) for p in pts], fill=color, width=round(width * SCALE), joint="curve")
        self.fig.primitives += 1

    def dots(self, x, y, color: str, radius: float = 1.6) -> None:
        """A dot per point: a second line beside a solid one (p90 beside the median), told apart at a glance."""
        r = radius * SCALE
        for a, b in zip(self.px(x), self.py(y)):
            if math.isfinite(a) and math.isfinite(b):
                self.draw.ellipse([a - r, b - r, a + r, b + r], fill=color)
        self.fig.primitives += 1

    def markers(self, x, y, color: str, radius: float = 4.0) -> None:
        """Downward triangles (an outlier step)."""
        r = radius * SCALE
        for a, b in zip(self.px(x), self.py(y)):
            self.draw.polygon([(a - r, b - r), (a + r, b - r), (a, b + r)], fill=color)
        self.fig.primitives += 1

    def xaxis(self, ticks: Sequence[float], label: Callable[[float], str], title: str = "", size: float = 8) -> None:
        for t in ticks:
            if self.inside(t, self.xlim):
                x = float(self.px(t))
                self.draw.line([x, self.y1, x, self.y1 + 4 * SCALE], fill=AXIS, width=SCALE)
                self.fig.text((x, self.y1 + 6 * SCALE), label(t), size=size, anchor="mt")
        if title:
            self.fig.text(((self.x0 + self.x1) / 2, self.y1 + 22 * SCALE), title, size=9, anchor="mt")

    def grid(self, yticks: Sequence[float]) -> None:
        """Horizontal lines at the y ticks, drawn first so the data cover them."""
        for t in yticks:
            if self.inside(t, self.ylim):
                y = float(self.py(t))
                self.draw.line([self.x0, y, self.x1, y], fill=GRID, width=SCALE)

    def yaxis(self, ticks: Sequence[float], label: Callable[[float], str], title: str = "", size: float = 8) -> None:
        for t in ticks:
            if self.inside(t, self.ylim):
                y = float(self.py(t))
                self.draw.line([self.x0 - 4 * SCALE, y, self.x0, y], fill=AXIS, width=SCALE)
                self.fig.text((self.x0 - 6 * SCALE, y), label(t), size=size, anchor="rm")
        if title:  # above the axis, right-aligned to it unless that would cut it at the image's edge
            x = max(self.x0 - 4 * SCALE, (self.fig.text_width(title, 8) + 4) * SCALE)
            self.fig.text((x, self.y0 - 6 * SCALE), title, size=8, anchor="rb")

    def frame(self) -> None:
        self.draw.rectangle([self.x0, self.y0, self.x1, self.y1], outline=AXIS, width=SCALE)


# -- the plots ---------------------------------------------------------------------------------------


def _import_matplotlib() -> None:
    """import matplotlib even when MPLBACKEND names a backend it rejects (e.g. Qt4Agg): that value is
    set aside for the import only (perfcore draws on Agg either way) and put back for the user."""
    if "matplotlib" in sys.modules:
        return
    try:
        import matplotlib  # noqa: F401
    except ValueError:
        for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
            del sys.modules[name]
        saved = os.environ.pop("MPLBACKEND", None)
        try:
            import matplotlib  # noqa: F401,F811
        finally:
            if saved is not None:
                os.environ["MPLBACKEND"] = saved


def _subplots(figsize=None, dpi=None):
    """A standalone matplotlib Figure on the Agg canvas and its one Axes (never pyplot's, so nothing else
    holds it)."""
    _import_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=dpi)
    FigureCanvasAgg(fig)
    return fig, fig.subplots()


def _ms_axis(ax, axis: str = "y") -> None:
    """Tick labels in ms, or s from a second up; never an offset or exponent (".83e+04")."""
    from matplotlib.ticker import FuncFormatter

    (ax.yaxis if axis == "y" else ax.xaxis).set_major_formatter(FuncFormatter(lambda v, _pos: ms_label(v)))


def _save(fig, path) -> None:
    """Atomically (temporary file, then rename): a reader never sees half a PNG."""
    from perfcore import jsonio

    with jsonio.atomic_path(Path(path)) as tmp:
        fig.savefig(tmp)


def plot_breakdown(steps: pd.DataFrame, path: Path, title: str = "", bins: int = BINS) -> Path:
    """Where the step time goes over the run, binned: stacked bars of each bin's mean ms per label (one
    bar per step for short runs), its median and p90 step time as lines, warm-up shaded, outliers
    marked. A fixed number of shapes, so the cost does not grow with the run."""
    from perfcore.analysis.bins import bin_steps, outliers

    if "evaluation" in steps.columns:  # evaluation rows are reported apart: no bar, no outlier of theirs
        steps = steps[~steps["evaluation"].astype(bool).to_numpy()]
    b = bin_steps(steps, bins)
    out = outliers(steps)
    fig = Figure(1100, 462)
    # Fixed margins for this fixed-size figure: room for "1.5 s"-wide tick labels, the two-line
    # title above and the legend below.
    ax = Panel(fig, (0.085, 0.13, 0.975, 0.75))
    per_step = bool(len(b)) and int(b["steps"].max()) == 1
    x = b["first_step"].to_numpy(dtype=float)
    width = (b["last_step"].to_numpy(dtype=float) - x + 1) * (0.85 if per_step and len(b) <= 60 else 1.0)
    stacked = np.cumsum([np.zeros(len(b))] + [b[f"{lb}_ms"].to_numpy(dtype=float) for lb in LABELS], axis=0)
    top = float(max(stacked[-1].max(initial=0.0), b["p90_ms"].max() if len(b) else 0.0)) * 1.25 or 1.0
    ax.limits((x[0], x[-1] + width[-1]) if len(b) else (0, 1), (0, top))
    yt = nice_ticks(0, top)
    ax.grid(yt)
    if len(b) and b["warmup"].any():
        last_warm = float(b.loc[b["warmup"], "last_step"].max()) + 1
        ax.rects(np.array([x[0]]), np.array([last_warm]), np.zeros(1), np.array([top]), "#e4e4e4")
    for i, lb in enumerate(LABELS):
        ax.rects(x, x + width, stacked[i], stacked[i + 1], COLORS[lb])
    legend = [(COLORS[lb], lb) for lb in LABELS]
    if not per_step:
        mid = x + width / 2
        ax.line(mid, b["median_ms"], "#111111", 1.2)
        ax.dots(mid, b["p90_ms"], "#111111")
        legend += [("#111111", "median step (line)"), ("#111111", "p90 step (dots)")]
    if len(b) and b["warmup"].any():
        legend.append(("#d0d0d0", "warm-up"))
    if len(out):
        n_all = out.attrs["count"]  # bins.outliers sets it on every frame with rows
        ax.markers(out["step"], np.minimum(out["wall_ms"], top * 0.97), "#cc0000")
        legend.append(
            (
                "#cc0000",
                f"{n_all} outlier step(s) set apart from the figures"
                + (f" ({len(out)} slowest shown)" if n_all > len(out) else ""),
            )
        )
    ax.frame()
    ax.yaxis(yt, ms_label, "per step")
    ax.xaxis(
        nice_ticks(*ax.xlim, target=9, integer=True),
        step_label,
        "step" if per_step else f"step ({len(b)} bins of ~{int(b['steps'].median())} steps: mean per label)",
    )
    fig.title(wrap_title(title or "where each step's time goes"), 0.11)
    fig.legend(legend, 0.89)
    fig.save(path)
    return Path(path)


def plot_kernels(kernels: list[dict[str, Any]], path: Path) -> Path | None:
    """The top kernels by total time, one horizontal bar each, the largest on top."""
    if not kernels:
        return None

    top = kernels[:15]
    height = round((0.35 * len(top) + 1.2) * 110)
    fig = Figure(1100, height)
    labels = [k["name"] if len(k["name"]) <= 70 else k["name"][:67] + "..." for k in top]
    left = min(0.6, (max(fig.text_width(s, 7) for s in labels) + 16) / 1100)
    ax = Panel(fig, (left, 40 / height, 0.97, 1 - 45 / height))
    total = np.array([float(k["total_ms"]) for k in top])
    hi = float(total.max(initial=0.0)) * 1.05 or 1.0
    ax.limits((0, hi), (len(top), 0))
    xt = nice_ticks(0, hi)
    rows = np.arange(len(top), dtype=float)
    ax.rects(np.zeros(len(top)), total, rows + 0.1, rows + 0.9, COLORS["compute"])
    ax.frame()
    for i, s in enumerate(labels):
        fig.text((ax.x0 - 12, float(ax.py(i + 0.5))), s, size=7, anchor="rm")
    ax.xaxis(xt, ms_label, "total")
    fig.title("top kernels by total time", 30 / height)
    fig.save(path)
    return Path(path)


def plot_heatmaps(configs: pd.DataFrame, out_dir: Path) -> list[Path]:
    """samples/s over batch_size x num_workers, annotated, one PNG per pin_memory/prefetch slice."""
    paths = []
    ok = configs.copy()
    ok["prefetch_factor"] = ok["prefetch_factor"].fillna(0).astype(int)
    vmax = float(ok.loc[~ok["oom"], "samples_per_s"].max()) if (~ok["oom"]).any() else 1.0
    for (pin, pf), g in ok.groupby(["pin_memory", "prefetch_factor"]):
        # Configurations without workers have no prefetch_factor: show them in every slice.
        g = pd.concat([g, ok[(ok["num_workers"] == 0) & (ok["pin_memory"] == pin)]]).drop_duplicates(
            subset=["batch_size", "num_workers"]
        )
        bss = sorted(g["batch_size"].unique())
        nws = sorted(g["num_workers"].unique())
        grid = np.full((len(bss), len(nws)), np.nan)
        oom = np.zeros_like(grid, dtype=bool)
        for _, r in g.iterrows():
            i, j = bss.index(r["batch_size"]), nws.index(r["num_workers"])
            grid[i, j] = r["samples_per_s"]
            oom[i, j] = bool(r["oom"])
        fig, ax = _subplots(figsize=(1.2 * len(nws) + 2.5, 0.8 * len(bss) + 1.8), dpi=110)
        im = ax.imshow(np.where(oom, np.nan, grid), cmap="viridis", vmin=0, vmax=vmax, aspect="auto")
        for i in range(len(bss)):
            for j in range(len(nws)):
                txt = "OOM" if oom[i, j] else ("" if np.isnan(grid[i, j]) else f"{grid[i, j]:.0f}")
                ax.text(
                    j,
                    i,
                    txt,
                    ha="center",
                    va="center",
                    color="white" if (grid[i, j] or 0) < 0.6 * vmax else "black",
                    fontsize=9,
                )
        ax.set_xticks(range(len(nws)), [str(n) for n in nws])
        ax.set_yticks(range(len(bss)), [str(b) for b in bss])
        ax.set_xlabel("num_workers")
        ax.set_ylabel("batch_size")
        ax.set_title(f"samples/s  (pin_memory={pin}, prefetch_factor={pf or '-'})", fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.046)
        fig.tight_layout()
        path = Path(out_dir) / f"heatmap_pin{int(pin)}_pf{pf}.png"
        _save(fig, path)
        paths.append(path)
    return paths


def _stacked_rows(
    names: list[str], breakdowns: list[dict[str, float]], notes: list[str], path: Path, title: str
) -> Path:
    """One horizontal bar per row, split by label, first row on top; `notes` printed at each bar's end."""
    fig, ax = _subplots(figsize=(9, 0.6 * len(names) + 1.6), dpi=110)
    for j, (bd, note) in enumerate(zip(breakdowns, notes)):
        left = 0.0
        for lb in LABELS:
            v = (bd or {}).get(lb, 0.0)
            ax.barh(j, v, left=left, color=COLORS[lb], label=lb if j == 0 else None)
            left += v
        if note:
            ax.text(left, j, f"  {note}", va="center", fontsize=8)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("per step")
    _ms_axis(ax, "x")
    title = wrap_title(title)
    ax.set_title(title, fontsize=9 if "\n" in title else 10)
    ax.legend(ncol=5, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.25), frameon=False)
    fig.tight_layout()
    _save(fig, path)
    return Path(path)


def plot_experiments(experiments: tuple[ExperimentRow, ...], path: Path, title: str = "") -> Path:
    """One stacked bar per experiment: mean step time split by label."""
    notes = [f"{e.step_ms:.1f} ms" if e.step_ms is not None and e.step_ms == e.step_ms else "OOM" for e in experiments]
    return _stacked_rows(
        [e.name for e in experiments],
        [e.breakdown_ms for e in experiments],
        notes,
        path,
        title or "experiments",
    )


def plot_timeline(samples: pd.DataFrame, path: Path, title: str = "") -> Path:
    """Sampler rows over time: utilisation (GPU when there is one), CPU %, memory."""

    t = ((samples["t_ns"] - samples["t_ns"].iloc[0]) / 1e9).to_numpy() if len(samples) else np.zeros(0)
    gpu = "gpu_util" in samples
    fig = Figure(1100, 528)
    span = (0.0, float(t[-1]) if len(t) and t[-1] > 0 else 1.0)
    top = Panel(fig, (0.08, 0.1, 0.975, 0.47))
    top.limits(span, (0, 105))
    yt = nice_ticks(0, 100)
    top.grid(yt)
    legend = []
    if gpu:
        top.line(t, 100 * samples["gpu_util"].to_numpy(dtype=float), COLORS["compute"], 1.2)
        legend.append((COLORS["compute"], "GPU util %"))
    top.line(t, samples["cpu_percent"].to_numpy(dtype=float), COLORS["load"], 1.2)
    legend.append((COLORS["load"], "CPU %"))
    top.frame()
    top.yaxis(yt, lambda v: f"{v:g}", "%")
    mem_col = "gpu_mem_used_bytes" if gpu else "ram_used_bytes"
    mem = samples[mem_col].to_numpy(dtype=float) / 2**30 if mem_col in samples else np.zeros(len(t))
    low = Panel(fig, (0.08, 0.55, 0.975, 0.88))
    hi = float(np.nanmax(mem, initial=0.0)) * 1.1 or 1.0
    low.limits(span, (0, hi))
    mt = nice_ticks(0, hi)
    low.grid(mt)
    low.line(t, mem, COLORS["transfer"], 1.2)
    low.frame()
    low.yaxis(mt, lambda v: f"{v:g}", "GPU memory GiB" if gpu else "RAM used GiB")
    low.xaxis(nice_ticks(*span), lambda v: f"{v:g} s", "seconds")
    fig.title(wrap_title(title or "perfcore monitor"), 0.06)
    fig.legend(legend, 0.49)
    fig.save(path)
    return Path(path)


def plot_ranks(ranks: list[dict[str, Any]], path: Path) -> Path:
    """One stacked bar per rank: mean ms per step by label (a straggler stands out by its colours)."""
    return _stacked_rows(
        [f"rank {r['rank']}" for r in ranks],
        [r["breakdown_ms"] for r in ranks],
        [f"{r['step_time_ms']['mean']:.1f} ms" for r in ranks],
        path,
        "per-rank breakdown",
    )


def plot_transfer(curve: pd.DataFrame, path: Path, nominal_gbps: float | None = None) -> Path:
    """GB/s against copy size, pinned vs pageable, both directions, with the link's nominal rate."""
    fig, ax = _subplots(figsize=(8, 4.2), dpi=110)
    styles = {
        ("h2d", "pinned"): ("-", COLORS["compute"]),
        ("h2d", "pageable"): ("--", COLORS["compute"]),
        ("d2h", "pinned"): ("-", COLORS["load"]),
        ("d2h", "pageable"): ("--", COLORS["load"]),
    }
    for (d, mem), g in curve.groupby(["direction", "memory"]):
        ls, c = styles.get((d, mem), ("-", "k"))
        g = g.sort_values("size_bytes")
        ax.plot(g["size_bytes"], g["gbps"], ls, color=c, marker="o", ms=3, label=f"{d} {mem}")
    if nominal_gbps:
        ax.axhline(nominal_gbps, color="#888", lw=1, ls=":", label=f"link nominal {nominal_gbps:.0f} GB/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("copy size (bytes)")
    ax.set_ylabel("GB/s")
    ax.set_title("host<->device copy bandwidth", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)
    return Path(path)
